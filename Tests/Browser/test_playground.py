"""The playground page in a real headless Chromium: drags made with pointer actions, the
confirmation dialog, a second window following over Server-Sent Events, and the setup form's
400 messages. After every step the page's data-* state and its event log must equal what the
API says about the same session.

Waits only end a failure: each one waits for an outcome (the page showing the version the API
has), never for an amount of time, and the drags are chosen so that their outcome does not
depend on how fast the machine replays them (see `fling_down`).
"""

import json
import os
import re
import urllib.parse

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# Long enough for a loaded 2-core machine; it only ever ends a test that is failing anyway.
WAIT_SECONDS = 30
SETUP = "detents=large,medium&threshold=height:300"
# The deceleration rate `normal` (0.998) as the projection uses it: d / (1 - d).
NORMAL_COAST = 0.998 / (1 - 0.998)


def by_testid(driver, testid):
    return driver.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def wait_for(driver, condition, what):
    try:
        return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.05).until(lambda _: condition())
    except TimeoutException:
        pytest.fail(f"timed out waiting for {what}")


def open_playground(driver, base_url, query):
    driver.get(f"{base_url}/playground?{query}")
    sheet = by_testid(driver, "sheet")
    wait_for(driver, lambda: sheet.get_attribute("data-session"), "the page to create or open a session")
    return sheet.get_attribute("data-session")


def page_log(driver):
    """The event log as the page shows it: (seq, the event's JSON as streamed)."""
    items = driver.find_elements(By.CSS_SELECTOR, '[data-testid="event-log"] > li')
    return [(int(item.get_attribute("data-seq")), json.loads(item.find_element(By.TAG_NAME, "code").text)) for item in items]


def assert_in_sync(driver, api, session_id, after=0):
    """Waits until the session is past version `after` (the step's own change has landed), the
    page has no API call in flight, and it shows the API's version and events; then checks that
    the page's state and log are exactly the API's. Returns the session."""
    sheet = by_testid(driver, "sheet")

    def caught_up():
        version = api.session(session_id)["version"]
        return (version > after
                and driver.find_element(By.TAG_NAME, "body").get_attribute("data-pending") in (None, "0")
                and sheet.get_attribute("data-version") == str(version)
                and len(driver.find_elements(By.CSS_SELECTOR, '[data-testid="event-log"] > li')) == version)

    wait_for(driver, caught_up, f"the page to catch up with the session past version {after}")
    session = api.session(session_id)
    events = api.events(session_id)
    assert sheet.get_attribute("data-session") == session["id"]
    assert sheet.get_attribute("data-phase") == session["phase"]
    assert sheet.get_attribute("data-detent") == session["detent"]
    assert page_log(driver) == [(event["seq"], event) for event in events]
    # Every entry came over the event stream (none read back from the API to fill a gap).
    assert driver.find_elements(By.CSS_SELECTOR, '[data-testid="event-log"] > li.recovered') == []
    assert by_testid(driver, "stream-state").get_attribute("data-state") == "live"
    dialog = by_testid(driver, "confirmation")
    assert dialog.is_displayed() == (session["phase"] == "confirming")
    if "dimmed" in session:
        assert by_testid(driver, "dimming").get_attribute("data-dimmed") == json.dumps(session["dimmed"])
    assert_part2_state(driver, session)
    return session


def assert_part2_state(driver, session):
    """The sheet's unsaved-changes flag, container, detent heights and navigation stack as the
    page shows them equal the API's (each where the session carries it)."""
    sheet = by_testid(driver, "sheet")
    if "hasChanges" in session:
        assert sheet.get_attribute("data-has-changes") == json.dumps(session["hasChanges"])
        assert by_testid(driver, "changes-badge").get_property("hidden") != session["hasChanges"]
    if "containerHeight" in session:
        assert float(by_testid(driver, "phone").get_attribute("data-container-height")) == session["containerHeight"]
    for detent, height in session.get("heights", {}).items():
        assert float(by_testid(driver, f"marker-{detent}").get_attribute("data-height")) == height, detent
    if session.get("stack"):
        # By their content, not as shown: a dismissed sheet is drawn below the phone's edge.
        assert by_testid(driver, "sheet-title").get_property("textContent") == session["stack"][-1]
        assert by_testid(driver, "nav-back").get_property("hidden") == (len(session["stack"]) < 2)


def wait_settled(driver):
    sheet = by_testid(driver, "sheet")
    wait_for(driver, lambda: sheet.get_attribute("data-animating") == "false", "the sheet to finish its animation")


def scale_of(driver):
    return float(by_testid(driver, "phone").get_attribute("data-scale"))


def pointer_drag(driver, points, steps, step_ms, rest_ms, kind):
    """Presses on the sheet's grabber, moves `points` down in `steps` moves of `step_ms` each,
    rests `rest_ms`, and releases: real pointer events, from a mouse or a finger."""
    scale = scale_of(driver)
    grabber = by_testid(driver, "grabber")
    pointer = PointerInput(interaction.POINTER_TOUCH if kind == "touch" else interaction.POINTER_MOUSE, kind)
    builder = ActionBuilder(driver, mouse=pointer)
    builder.pointer_action.move_to(grabber)
    builder.pointer_action.pointer_down()
    pixels = points * scale
    moved = 0
    for step in range(1, steps + 1):
        target = round(pixels * step / steps)
        pointer.create_pointer_move(duration=step_ms, x=0, y=target - moved, origin=interaction.POINTER)
        moved = target
    if rest_ms:
        builder.pointer_action.pause(rest_ms / 1000)
    builder.pointer_action.pointer_up()
    builder.perform()


def slow_drag_down(driver, points):
    """A drag that rests before the release, so its velocity is 0."""
    pointer_drag(driver, points, steps=24, step_ms=25, rest_ms=400, kind="mouse")


def fling_down(driver, points):
    """A quick flick with a finger, released while moving."""
    pointer_drag(driver, points, steps=6, step_ms=8, rest_ms=0, kind="touch")


def projected(released, velocity):
    return released - velocity / 1000 * NORMAL_COAST


def assert_gesture_sent(driver, event, height_before):
    """The drag event records the gesture sheetd received; it must be the one the page measured."""
    sheet = by_testid(driver, "sheet")
    translation = float(sheet.get_attribute("data-gesture-translation"))
    velocity = float(sheet.get_attribute("data-gesture-velocity"))
    gesture = event["gesture"]
    assert gesture["releasedHeight"] == pytest.approx(height_before - translation, abs=0.01)
    assert gesture["projectedHeight"] == pytest.approx(projected(height_before - translation, velocity), abs=0.01)
    return translation, velocity


def act(driver, api, session_id, action):
    """Does `action` in the page and waits for its change to land; the page must then agree
    with the API. Returns the session as the API has it."""
    before = api.session(session_id)["version"]
    action()
    return assert_in_sync(driver, api, session_id, after=before)


def click(driver, testid):
    return lambda: by_testid(driver, testid).click()


def test_drags_dialog_and_a_second_window(browser, api, base_url):
    session_id = open_playground(browser, base_url, SETUP)
    session = assert_in_sync(browser, api, session_id)
    assert session["config"]["detents"] == ["height:300", "medium", "large"]
    assert session["config"]["thresholdDetent"] == "height:300"
    assert (session["phase"], session["detent"]) == ("presented", "large")
    assert_markers(browser, session)

    # A slow drag of half the container lands on medium.
    session = act(browser, api, session_id, lambda: slow_drag_down(browser, 422))
    assert (session["phase"], session["detent"]) == ("presented", "medium")
    changed = api.events(session_id)[-1]
    assert (changed["type"], changed["from"], changed["to"]) == ("detentChanged", "large", "medium")
    translation, velocity = assert_gesture_sent(browser, changed, 844)
    assert translation == pytest.approx(422, abs=3)
    assert velocity == 0
    wait_settled(browser)
    assert_resting_at(browser, session)

    # A fling down from medium is intercepted: released at about 200 points, nearer the
    # threshold (300) than medium (422), and any downward speed only carries it further down,
    # to the threshold or past it to `closed`. Either way the policy intercepts, and the sheet
    # snaps back to medium while the app asks.
    session = act(browser, api, session_id, lambda: fling_down(browser, 222))
    assert (session["phase"], session["detent"]) == ("confirming", "medium")
    intercepted = api.events(session_id)[-1]
    assert intercepted["type"] == "intercepted" and intercepted["restoredTo"] == "medium"
    assert intercepted["attempted"] in ("height:300", "closed")
    _, velocity = assert_gesture_sent(browser, intercepted, 422)
    assert velocity >= 0
    wait_settled(browser)
    assert_resting_at(browser, session)
    screenshot = os.environ.get("PLAYGROUND_SCREENSHOT")
    if screenshot:
        os.makedirs(os.path.dirname(os.path.abspath(screenshot)), exist_ok=True)
        assert browser.save_screenshot(screenshot)

    # A second window on the same session shows the same state and history...
    first = browser.current_window_handle
    link = by_testid(browser, "session-link").get_attribute("href")
    assert urllib.parse.parse_qs(urllib.parse.urlparse(link).query)["session"] == [session_id]
    browser.switch_to.new_window("window")
    second = browser.current_window_handle
    browser.get(link)
    assert_in_sync(browser, api, session_id)

    # ...and follows the first one live: Cancel in the first window, the second sees it.
    browser.switch_to.window(first)
    session = act(browser, api, session_id, click(browser, "confirm-cancel"))
    assert (session["phase"], session["detent"]) == ("presented", "medium")
    assert api.events(session_id)[-1]["type"] == "confirmationCancelled"
    browser.switch_to.window(second)
    assert_in_sync(browser, api, session_id)

    # The other way round: a fling in the second window, answered Discard there.
    session = act(browser, api, session_id, lambda: fling_down(browser, 222))
    assert session["phase"] == "confirming"
    session = act(browser, api, session_id, click(browser, "confirm-discard"))
    assert (session["phase"], session["dismissReason"]) == ("dismissed", "discarded")
    browser.switch_to.window(first)
    assert_in_sync(browser, api, session_id)

    # The app's buttons, and Save after another interception.
    for action, check in (
        (click(browser, "present"), lambda s: (s["phase"], s["detent"], s["presentation"]) == ("presented", "large", 2)),
        (click(browser, "done"), lambda s: (s["phase"], s["dismissReason"]) == ("dismissed", "done")),
        (click(browser, "present"), lambda s: (s["phase"], s["presentation"]) == ("presented", 3)),
        (lambda: slow_drag_down(browser, 422), lambda s: s["detent"] == "medium"),
        (lambda: fling_down(browser, 222), lambda s: s["phase"] == "confirming"),
        (click(browser, "confirm-save"), lambda s: (s["phase"], s["dismissReason"]) == ("dismissed", "saved")),
        (click(browser, "present"), lambda s: s["phase"] == "presented"),
        (click(browser, "dismiss-code"), lambda s: (s["phase"], s["dismissReason"]) == ("dismissed", "programmatic")),
    ):
        session = act(browser, api, session_id, action)
        assert check(session), session
    browser.switch_to.window(second)
    assert_in_sync(browser, api, session_id)


def assert_markers(driver, session):
    """A marker at each detent's resolved height; the threshold marked as such."""
    scale = scale_of(driver)
    phone = by_testid(driver, "phone").rect
    container = session.get("containerHeight", session["config"]["containerHeight"])
    for detent in session["config"]["detents"]:
        marker = by_testid(driver, f"marker-{detent}")
        height = float(marker.get_attribute("data-height"))
        top = marker.rect["y"] - phone["y"] - 8  # the phone's 8 px border
        assert top == pytest.approx((container - height) * scale, abs=1.5), detent
        is_threshold = "threshold" in marker.get_attribute("class").split()
        assert is_threshold == (detent == session["config"]["thresholdDetent"]), detent
    heights = {"large": 844, "medium": 422, "height:300": 300}
    for detent, height in heights.items():
        assert float(by_testid(driver, f"marker-{detent}").get_attribute("data-height")) == height


def assert_resting_at(driver, session):
    """The sheet's top edge is at its detent's height above the container's bottom."""
    scale = scale_of(driver)
    phone = by_testid(driver, "phone").rect
    sheet = by_testid(driver, "sheet").rect
    container = session.get("containerHeight", session["config"]["containerHeight"])
    height = float(by_testid(driver, f"marker-{session['detent']}").get_attribute("data-height"))
    bottom = phone["y"] + 8 + container * scale
    assert bottom - sheet["y"] == pytest.approx(height * scale, abs=1.5)


@pytest.mark.parametrize(
    "query, field, testid",
    [
        ("detents=large,tall", "detents", "error-detents"),
        ("detents=large,medium&threshold=height:abc", "thresholdDetent", "error-thresholdDetent"),
        ("threshold=large", "thresholdDetent", "error-thresholdDetent"),
        ("detents=large&height=0", "containerHeight", "error-containerHeight"),
        ("policy=allow&threshold=height:300", None, None),
    ],
)
def test_form_shows_the_400_next_to_its_field(browser, api, base_url, query, field, testid):
    browser.console.expect_network_error("/sessions", 400)
    open_playground(browser, base_url, SETUP)
    form = by_testid(browser, "setup-form")
    params = urllib.parse.parse_qs(query)
    for input_ in form.find_elements(By.CSS_SELECTOR, "[data-field]"):
        value = params.get(input_.get_attribute("name"), [""])[0]
        if input_.tag_name == "select":
            browser.execute_script("arguments[0].value = arguments[1]", input_, value)
        else:
            input_.clear()
            if value:
                input_.send_keys(value)
    by_testid(browser, "create").click()
    # The same request straight to the API: the page must show exactly this answer.
    body = form_body(params)
    status, answer = api.json("POST", "/sessions", body)
    assert status == 400, answer
    error = answer["error"]
    if field is None:
        field = error["field"]
        testid = f"error-{field}"
    assert error["field"] == field
    slot = by_testid(browser, testid)
    wait_for(browser, lambda: slot.text, f"the message next to {field}")
    assert error["message"] in slot.text and error["code"] in slot.text
    invalid = form.find_element(By.CSS_SELECTOR, f'[data-field="{field}"]')
    assert invalid.get_attribute("aria-invalid") == "true"
    # No other field claims the error, and the address carries the setup that failed.
    others = [e for e in form.find_elements(By.CSS_SELECTOR, "[data-error-for]") if e.text and e != slot]
    assert others == []
    assert urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query) == params


def form_body(params):
    names = {"detents": "detents", "default": "defaultDetent", "threshold": "thresholdDetent",
             "policy": "dismissPolicy", "height": "containerHeight"}
    body = {}
    for name, (value,) in params.items():
        if name == "detents":
            body["detents"] = value.split(",")
        elif name == "height":
            body["containerHeight"] = float(value) if re.fullmatch(r"[0-9.]+", value) else value
        else:
            body[names[name]] = value
    return body


def test_a_link_reproduces_a_setup(browser, api, base_url):
    query = "detents=large,fraction:0.25&default=fraction:0.25&policy=block&deceleration=fast&height=700"
    session_id = open_playground(browser, base_url, query)
    session = assert_in_sync(browser, api, session_id)
    config = session["config"]
    assert config["detents"] == ["fraction:0.25", "large"]
    assert (config["defaultDetent"], config["dismissPolicy"], config["decelerationRate"], config["containerHeight"]) == (
        "fraction:0.25", "block", "fast", 700)
    # A swipe past the smallest detent is blocked: the sheet stays, and the log says why.
    session = act(browser, api, session_id, lambda: slow_drag_down(browser, 170))
    assert session["detent"] == "fraction:0.25" and api.events(session_id)[-1]["type"] == "dismissBlocked"


def test_the_index_links_to_the_playground(browser, api, base_url):
    browser.get(f"{base_url}/")
    by_testid(browser, "playground-link").click()
    session_id = wait_for(browser, lambda: by_testid(browser, "sheet").get_attribute("data-session"), "the playground")
    assert_in_sync(browser, api, session_id)


def test_the_console_watch_sees_errors(browser, base_url):
    """The console check that every test ends with is real: an error on the page is seen."""
    browser.get(f"{base_url}/playground?{SETUP}")
    browser.execute_script("console.error('provoked by the test')")
    errors = browser.console.unexpected_errors()
    assert any("provoked by the test" in error for error in errors), errors
    browser.console.entries = []
