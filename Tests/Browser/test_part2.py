"""The playground's Part 2 buttons (mark changes, select a detent, rotate, push and pop a
screen, a sheet over the sheet, dimming) and a session with more events than sheetd keeps, in
headless Chromium. After every step the page must agree with the API (`assert_in_sync`, which
also compares the changes flag, container, heights and stack)."""

from selenium.webdriver.support.ui import Select

from test_playground import (
    SETUP, act, assert_in_sync, by_testid, click, open_playground, page_log, slow_drag_down, wait_for,
)


def test_part2_buttons(browser, api, base_url):
    # medium is the largest undimmed detent: the background dims above it only.
    session_id = open_playground(browser, base_url, SETUP + "&undimmed=medium")
    session = assert_in_sync(browser, api, session_id)
    assert (session["detent"], session["dimmed"], session["hasChanges"]) == ("large", True, False)

    session = act(browser, api, session_id, click(browser, "mark-changes"))
    assert session["hasChanges"] is True
    assert api.events(session_id)[-1]["type"] == "changesMarked"
    session = act(browser, api, session_id, click(browser, "mark-changes"))
    assert session["hasChanges"] is False

    def select(detent):
        def action():
            Select(by_testid(browser, "select-detent-choice")).select_by_value(detent)
            by_testid(browser, "select-detent").click()
        return action

    session = act(browser, api, session_id, select("medium"))
    assert (session["detent"], session["dimmed"]) == ("medium", False)
    changed = api.events(session_id)[-1]
    assert (changed["type"], changed["to"], changed["by"]) == ("detentChanged", "medium", "app")
    assert by_testid(browser, "dimming").get_attribute("data-dimmed") == "false"

    # Rotation: the container's height becomes the phone's width (390 of 844), and back.
    session = act(browser, api, session_id, click(browser, "rotate"))
    assert session["containerHeight"] == 390
    resized = api.events(session_id)[-1]
    assert (resized["type"], resized["from"], resized["to"]) == ("resized", 844, 390)
    session = act(browser, api, session_id, click(browser, "rotate"))
    assert session["containerHeight"] == 844

    session = act(browser, api, session_id, select("large"))
    assert (session["detent"], session["dimmed"]) == ("large", True)

    # A screen pushed inside the sheet, then popped with the sheet's Back button.
    session = act(browser, api, session_id, click(browser, "push"))
    assert session["stack"] == ["root", "detail"]
    session = act(browser, api, session_id, click(browser, "nav-back"))
    assert session["stack"] == ["root"]
    popped = api.events(session_id)[-1]
    assert (popped["type"], popped["screens"]) == ("popped", ["detail"])

    # A sheet over the sheet: the page follows the new one, drawn over its parent.
    by_testid(browser, "open-child").click()
    sheet = by_testid(browser, "sheet")
    wait_for(browser, lambda: sheet.get_attribute("data-session") not in ("", session_id), "the sheet over the sheet")
    child_id = sheet.get_attribute("data-session")
    child = assert_in_sync(browser, api, child_id)
    assert child["parent"] == session_id
    parent = api.session(session_id)
    assert parent["child"] == child_id
    assert api.events(session_id)[-1]["type"] == "covered"
    wait_for(browser, lambda: by_testid(browser, "parent-sheet").is_displayed(), "the parent drawn under the child")

    # Done on the sheet on top: it goes, the one below is uncovered.
    child = act(browser, api, child_id, click(browser, "done"))
    assert (child["phase"], child["dismissReason"]) == ("dismissed", "done")
    assert api.events(session_id)[-1]["type"] == "uncovered"
    by_testid(browser, "chain-parent").click()
    wait_for(browser, lambda: sheet.get_attribute("data-session") == session_id, "the page back on the parent")
    parent = assert_in_sync(browser, api, session_id)
    assert parent["child"] is None


def test_a_session_with_more_events_than_sheetd_keeps(browser, api, base_url):
    """sheetd keeps a session's newest 256 events: a page opened on a longer session (or
    resuming from a point before those) is answered 410 events_expired. It must go on from the
    session's version, say which events it cannot show, and follow what comes next live."""
    browser.console.expect_network_error("/events", 410)
    status, created = api.json("POST", "/sessions", {"detents": ["large", "medium"], "thresholdDetent": "height:300"})
    assert status == 201, created
    session_id = created["id"]
    for index in range(300):
        status, _ = api.json("POST", f"/sessions/{session_id}/drag", {"to": "medium" if index % 2 == 0 else "large"})
        assert status == 200
    version = api.session(session_id)["version"]
    assert version == 301
    status, answer = api.json("GET", f"/sessions/{session_id}/events?after=0")
    assert (status, answer["error"]["code"]) == (410, "events_expired")

    open_playground(browser, base_url, f"{SETUP}&session={session_id}")
    gap = by_testid(browser, "events-gap")
    wait_for(browser, lambda: gap.is_displayed() and gap.get_attribute("data-to") == str(version), "the note on the events not kept")
    assert gap.get_attribute("data-from") == "1"
    assert f"Events 1–{version}" in gap.text
    state = by_testid(browser, "stream-state")
    wait_for(browser, lambda: state.get_attribute("data-state") == "live", "the stream to be live again")
    sheet = by_testid(browser, "sheet")
    assert sheet.get_attribute("data-version") == str(version)
    assert page_log(browser) == []

    # The next events arrive over the stream: one from the page, one from another client.
    # The page sends its drag after the pointer is up: wait for its event, or the dismissal
    # below can reach sheetd first and the drag is refused on a dismissed sheet.
    slow_drag_down(browser, 422)
    wait_for(browser, lambda: len(page_log(browser)) == 1, "the page's drag in the log")
    status, _ = api.json("POST", f"/sessions/{session_id}/dismiss", {"reason": "programmatic"})
    assert status == 200
    wait_for(browser, lambda: len(page_log(browser)) == 2, "the two new events in the log")
    status, kept = api.json("GET", f"/sessions/{session_id}/events?after={version}")
    assert status == 200
    assert page_log(browser) == [(event["seq"], event) for event in kept["events"]]
    session = api.session(session_id)
    wait_for(browser, lambda: sheet.get_attribute("data-version") == str(session["version"]), "the page to show the new version")
    assert (sheet.get_attribute("data-phase"), sheet.get_attribute("data-detent")) == (session["phase"], session["detent"])
    assert browser.find_elements("css selector", '[data-testid="event-log"] > li.recovered') == []
