"""The Sessions page and page history in a real headless Chromium (``intentrace view`` on the
fixture ledger): Back and Forward walk Sessions → Session → call → Live the way the user
walked them, and each Sessions control works in the browser and is kept in the URL."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.viewer.browser import BROWSER_MARKS, Tab, chromium_tab, serve
from tests.viewer.fixture_ledger import AUTH, AUTH_USER, BULK_SESSIONS, LIVE, XSS
from viewer._ui import call_key

pytestmark = BROWSER_MARKS
TOTAL = BULK_SESSIONS + 3
ZONE = "Asia/Tokyo"  # +09:00 all year: the browser's zone the page must use
WAIT_MS = 30_000
ROW_PX = 35
"""The grid's row height (header and rows): rows are selected by clicking their checkbox."""


@pytest.fixture(scope="module")
def browser_tab(fixture_url: str) -> Iterator[Tab]:
    """The viewer on the fixture ledger and one Chromium tab on it, in ``ZONE``."""
    with serve(fixture_url) as base, chromium_tab(base, timezone_id=ZONE) as tab:
        yield tab


def title(tab: Any, text: str) -> None:
    tab.locator("[data-testid=stMain] h1", has_text=re.compile(f"^{text}$")).wait_for(
        timeout=WAIT_MS
    )


def caption(tab: Any, starts: str) -> None:
    """Wait for the table's caption (it says which rows, in which order)."""
    tab.locator("[data-testid=stCaptionContainer]", has_text=starts).first.wait_for(timeout=WAIT_MS)


def shown(tab: Any) -> list[str]:
    """The session ids of the table's rows in view (the grid's accessible table)."""
    rows = tab.locator("[data-testid=stDataFrame] [role=row]")
    rows.nth(1).wait_for(state="attached", timeout=WAIT_MS)
    cells: list[str] = rows.evaluate_all(
        "rows => rows.slice(1).map(r => "
        "[...r.querySelectorAll('[role=gridcell]')].map(c => c.textContent)"
        ".filter(t => t)[0] || '')"
    )
    return cells


def at_url(tab: Any, pattern: str) -> None:
    """Wait until the tab's URL matches ``pattern`` (a regex). Back and Forward move within the
    document and Streamlit then rewrites the URL in place, which ``wait_for_url`` can miss."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not re.search(pattern, tab.url):
        assert time.monotonic() < deadline, (tab.url, pattern, tab.evaluate("history.length"))
        tab.wait_for_timeout(100)


def idle(tab: Any) -> None:
    """Wait until the app's run has finished (the app's script state) and a moment more:
    Back/Forward in the middle of a run can leave the run's URL on the next page's entry."""
    tab.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for(
        state="attached", timeout=WAIT_MS
    )
    tab.wait_for_timeout(1_000)


def rows_become(tab: Any, check: Callable[[list[str]], bool]) -> list[str]:
    """The rows once ``check`` holds (the grid redraws after the caption changes)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    rows = shown(tab)
    while not check(rows) and time.monotonic() < deadline:
        tab.wait_for_timeout(200)
        rows = shown(tab)
    return rows


def pick(tab: Any, label: str, option: str) -> None:
    """Choose ``option`` in the selectbox labelled ``label``."""
    tab.get_by_role("combobox", name=re.compile(label)).click()
    tab.get_by_role("option", name=option, exact=True).click()


def toggle(tab: Any, label: str) -> None:
    tab.locator("[data-testid=stCheckbox]", has_text=label).locator("label").first.click()


def test_back_and_forward_walk_sessions_session_call_live(browser_tab: Tab) -> None:
    server, tab = browser_tab.base, browser_tab.page
    tab.goto(server)
    title(tab, "Sessions")
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")
    idle(tab)
    rows = shown(tab)
    assert rows[:3] == [XSS, LIVE, AUTH]
    # select AUTH's row: its checkbox cell (the grid is drawn on a canvas)
    grid = tab.locator("[data-testid=stDataFrame]").bounding_box()
    tab.mouse.click(grid["x"] + 16, grid["y"] + ROW_PX * (1.5 + rows.index(AUTH)))
    tab.wait_for_url(f"**/session?session={AUTH}", timeout=WAIT_MS)
    title(tab, "Session")
    idle(tab)
    # open a call: its Details link
    tab.locator(f".st-key-{call_key('c2')} a").first.click(timeout=WAIT_MS)
    tab.wait_for_url(re.compile(r"/session\?.*anchor=c2"), timeout=WAIT_MS)
    tab.locator(f".st-key-{call_key('c2')}[data-focused='1']").wait_for(timeout=WAIT_MS)
    idle(tab)
    # then the Live page from the navigation
    tab.locator("[data-testid=stSidebarNav] a", has_text="Live").click()
    tab.wait_for_url("**/live", timeout=WAIT_MS)
    title(tab, "Live")
    idle(tab)

    tab.go_back()
    at_url(tab, r"/session\?.*anchor=c2")
    title(tab, "Session")
    tab.locator(f".st-key-{call_key('c2')}[data-focused='1']").wait_for(timeout=WAIT_MS)
    idle(tab)
    tab.go_back()
    at_url(tab, rf"/session\?session={AUTH}$")
    title(tab, "Session")
    idle(tab)
    tab.go_back()
    title(tab, "Sessions")  # not bounced back to the session, nor re-opened by the selection
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")
    idle(tab)
    assert "/session" not in tab.url
    title(tab, "Sessions")

    tab.go_forward()
    at_url(tab, rf"/session\?session={AUTH}$")
    title(tab, "Session")
    idle(tab)
    tab.go_forward()
    at_url(tab, r"/session\?.*anchor=c2")
    idle(tab)
    tab.go_forward()
    at_url(tab, r"/live$")
    title(tab, "Live")


def test_sort_runs_over_every_page(browser_tab: Tab) -> None:
    server, tab = browser_tab.base, browser_tab.page
    tab.goto(server)
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")
    pick(tab, "Per page", "25")
    pick(tab, "Sort by", "Calls")
    tab.wait_for_url("**sort=calls*", timeout=WAIT_MS)
    caption(tab, f"Sessions 1–25 of {TOTAL} · calls, most first (across all pages)")
    assert rows_become(tab, lambda rows: rows[:2] == [AUTH, LIVE])[:2] == [AUTH, LIVE]
    toggle(tab, "Ascending")
    tab.wait_for_url("**asc=true*", timeout=WAIT_MS)
    caption(tab, f"Sessions 1–25 of {TOTAL} · calls, fewest first")
    assert AUTH not in rows_become(tab, lambda rows: AUTH not in rows)
    tab.get_by_role("button", name="Page 2", exact=True).click()
    caption(tab, f"Sessions 26–{TOTAL} of {TOTAL} · calls, fewest first")
    assert rows_become(tab, lambda rows: rows[-2:] == [LIVE, AUTH])[-2:] == [LIVE, AUTH]


def test_errors_and_live_toggles_and_back(browser_tab: Tab) -> None:
    server, tab = browser_tab.base, browser_tab.page
    tab.goto(server)
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")
    toggle(tab, "Errors")
    tab.wait_for_url("**errors=true*", timeout=WAIT_MS)
    caption(tab, "Sessions 1–1 of 1")
    assert rows_become(tab, lambda rows: rows == [AUTH]) == [AUTH]
    toggle(tab, "Errors")
    toggle(tab, "Live")
    tab.wait_for_url(re.compile(r"live=true"), timeout=WAIT_MS)
    caption(tab, "Sessions 1–1 of 1")
    assert rows_become(tab, lambda rows: rows == [LIVE]) == [LIVE]
    # a link with the toggles in it opens the same list
    tab.goto(f"{server}/?errors=true")
    caption(tab, "Sessions 1–1 of 1")
    assert rows_become(tab, lambda rows: rows == [AUTH]) == [AUTH]
    # open a session from the filtered list: Back comes to the same list
    grid = tab.locator("[data-testid=stDataFrame]").bounding_box()
    tab.mouse.click(grid["x"] + 16, grid["y"] + ROW_PX * 1.5)
    tab.wait_for_url(f"**/session?session={AUTH}*", timeout=WAIT_MS)
    title(tab, "Session")
    tab.go_back()
    title(tab, "Sessions")
    caption(tab, "Sessions 1–1 of 1")
    assert rows_become(tab, lambda rows: rows == [AUTH]) == [AUTH]
    assert "errors=true" in tab.url
    assert tab.locator("[data-testid=stCheckbox]", has_text="Errors").locator("input").is_checked()


def test_time_range(browser_tab: Tab) -> None:
    server, tab = browser_tab.base, browser_tab.page
    tab.goto(server)
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")
    pick(tab, "Time range", "Last 24 hours")  # the fixture's sessions are older
    tab.wait_for_url("**range=24h*", timeout=WAIT_MS)
    tab.locator("[data-testid=stAlert]", has_text="No session matches these filters.").wait_for(
        timeout=WAIT_MS
    )
    pick(tab, "Time range", "Dates…")
    for end in ("start", "end"):  # the fixture's day (in the browser's zone, +09:00: the same)
        tab.get_by_role("spinbutton", name=f"year, From – to {end} date").click(timeout=WAIT_MS)
        tab.keyboard.type("20251009")
    tab.locator("[data-testid=stMain] h1").click()  # the dates apply when the field loses focus
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")


def test_times_local_utc_relative(browser_tab: Tab) -> None:
    server, tab = browser_tab.base, browser_tab.page
    tab.goto(server)
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")
    # times in the browser's zone, and the page says which
    caption(tab, f"Times in {ZONE}, your browser's time zone.")
    tab.locator("[data-testid=stButtonGroup] button", has_text="Relative").click()
    tab.wait_for_url("**times=relative*", timeout=WAIT_MS)
    caption(tab, "Times relative to now")
    tab.locator("[data-testid=stButtonGroup] button", has_text="UTC").click()
    tab.wait_for_url("**times=utc*", timeout=WAIT_MS)
    caption(tab, "Times in UTC.")


def test_back_and_forward_walk_the_filter_states(browser_tab: Tab) -> None:
    server, tab = browser_tab.base, browser_tab.page
    tab.goto(server)
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL}")
    idle(tab)
    toggle(tab, "Errors")
    at_url(tab, r"\?errors=true$")
    caption(tab, "Sessions 1–1 of 1")
    idle(tab)
    pick(tab, "Sort by", "Calls")
    at_url(tab, r"\?sort=calls&errors=true$")
    caption(tab, "Sessions 1–1 of 1 · calls, most first")
    idle(tab)
    toggle(tab, "Errors")
    at_url(tab, r"\?sort=calls$")
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL} · calls, most first")
    idle(tab)

    tab.go_back()
    at_url(tab, r"\?sort=calls&errors=true$")
    caption(tab, "Sessions 1–1 of 1 · calls, most first")
    assert tab.locator("[data-testid=stCheckbox]", has_text="Errors").locator("input").is_checked()
    idle(tab)
    tab.go_back()
    at_url(tab, r"\?errors=true$")
    caption(tab, "Sessions 1–1 of 1 · last seen")
    idle(tab)
    tab.go_back()
    at_url(tab, r"/$")
    caption(tab, f"Sessions 1–{TOTAL} of {TOTAL} · last seen")
    assert (
        not tab.locator("[data-testid=stCheckbox]", has_text="Errors").locator("input").is_checked()
    )
    idle(tab)
    tab.go_forward()
    at_url(tab, r"\?errors=true$")
    caption(tab, "Sessions 1–1 of 1 · last seen")
    idle(tab)
    tab.go_forward()
    at_url(tab, r"\?sort=calls&errors=true$")
    caption(tab, "Sessions 1–1 of 1 · calls, most first")


def test_user_and_tag_filters_from_a_link_and_the_controls(browser_tab: Tab) -> None:
    server, tab = browser_tab.base, browser_tab.page
    tab.goto(f"{server}/?tag=prod")
    caption(tab, "Sessions 1–2 of 2")
    assert rows_become(tab, lambda rows: rows == [LIVE, AUTH]) == [LIVE, AUTH]
    idle(tab)
    pick(tab, "User", AUTH_USER)
    at_url(tab, rf"\?user={AUTH_USER}&tag=prod$")
    caption(tab, "Sessions 1–1 of 1")
    assert rows_become(tab, lambda rows: rows == [AUTH]) == [AUTH]
    idle(tab)
    tab.go_back()
    at_url(tab, r"\?tag=prod$")
    caption(tab, "Sessions 1–2 of 2")
