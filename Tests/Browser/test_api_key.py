"""The playground with API keys: the page asks for a key when the API answers 401, keeps it in
the tab's sessionStorage only, sends it as a Bearer header, and reads the event stream with
fetch() (EventSource cannot send the header), so the key never appears in a URL."""

import pytest

from conftest import API
from test_playground import SETUP, act, assert_in_sync, by_testid, fling_down, slow_drag_down, wait_for

KEY_STORAGE = "sheetd.playground.apiKey"


def enter_key(driver, key):
    form = by_testid(driver, "api-key-form")
    wait_for(driver, form.is_displayed, "the page to ask for an API key")
    by_testid(driver, "api-key").send_keys(key)
    by_testid(driver, "api-key-save").click()
    sheet = by_testid(driver, "sheet")
    return wait_for(driver, lambda: sheet.get_attribute("data-session"), "the page to create or open a session")


def assert_key_kept_in_the_tab_only(driver, key):
    assert driver.execute_script(f"return sessionStorage.getItem('{KEY_STORAGE}')") == key
    assert driver.execute_script("return localStorage.length") == 0
    assert driver.get_cookies() == []
    urls = driver.execute_script("return performance.getEntriesByType('resource').map((entry) => entry.name)")
    assert [url for url in urls + [driver.current_url] if key in url] == []


def test_an_api_key_is_asked_for_and_kept_in_the_tab(browser, keyed_server):
    url, key = keyed_server
    api = API(url, key=key)
    browser.console.expect_network_error("/sessions", 401)
    browser.get(f"{url}/playground?{SETUP}")
    session_id = enter_key(browser, key)
    assert api.session(session_id)["config"]["thresholdDetent"] == "height:300"
    assert_in_sync(browser, api, session_id)
    session = act(browser, api, session_id, lambda: slow_drag_down(browser, 422))
    assert session["detent"] == "medium"
    assert_key_kept_in_the_tab_only(browser, key)

    # Another window has its own sessionStorage: it asks again, then follows the first.
    first = browser.current_window_handle
    link = by_testid(browser, "session-link").get_attribute("href")
    browser.switch_to.new_window("window")
    second = browser.current_window_handle
    browser.get(link)
    assert enter_key(browser, key) == session_id
    assert_in_sync(browser, api, session_id)
    browser.switch_to.window(first)
    session = act(browser, api, session_id, lambda: fling_down(browser, 222))
    assert session["phase"] == "confirming"
    session = act(browser, api, session_id, lambda: by_testid(browser, "confirm-cancel").click())
    assert session["phase"] == "presented"
    browser.switch_to.window(second)
    assert_in_sync(browser, api, session_id)
    assert_key_kept_in_the_tab_only(browser, key)
