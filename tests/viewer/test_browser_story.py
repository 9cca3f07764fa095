"""The Session and Live pages in a real headless Chromium, on a ledger this module writes to
while the pages are open: Live/Session parity, sessions followed while written, the controls."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.viewer import fixture_ledger
from tests.viewer.browser import BROWSER_MARKS, Tab, chromium_tab, serve
from tests.viewer.fixture_ledger import AUTH, LIVE
from tracing.ledger import AnchorWrite, Ledger, open_ledger
from tracing.status import Status
from viewer._ui import call_key

pytestmark = BROWSER_MARKS
TRACE = "https://langfuse.example/project/p1/traces/{trace_id}?observation={span_id}"
WAIT_MS = 60_000  # a loaded CI machine is slow; nothing here is a timing assertion


@pytest.fixture(scope="module")
def ledger_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('story') / 'ledger.db'}"
    fixture_ledger.build(url)
    return url


@pytest.fixture(scope="module")
def writer(ledger_url: str) -> Iterator[Ledger]:
    """The app's side: writes calls while the viewer shows them."""
    ledger = open_ledger(ledger_url)
    yield ledger
    ledger.close()


@pytest.fixture(scope="module")
def browser_tab(ledger_url: str) -> Iterator[Tab]:
    """The viewer on this module's ledger and one Chromium tab on it."""
    with serve(ledger_url, "--trace-url", TRACE) as base, chromium_tab(base) as tab:
        tab.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        yield tab


@pytest.fixture
def server(browser_tab: Tab) -> str:
    return browser_tab.base


@pytest.fixture
def tab(browser_tab: Tab) -> Any:
    return browser_tab.page


def write(ledger: Ledger, **kw: Any) -> None:
    ledger.record(AnchorWrite(**kw))
    assert ledger.flush(10.0)


def main_text(tab: Any) -> str:
    return tab.locator("[data-testid=stMain]").inner_text()


def wait_text(tab: Any, text: str) -> None:
    tab.locator("[data-testid=stMain]").get_by_text(text, exact=True).first.wait_for(
        timeout=WAIT_MS
    )


# --- Live / Session parity ------------------------------------------------------------------
def test_live_page_shows_the_subagent_ticker_and_the_activity_label(server: str, tab: Any) -> None:
    tab.goto(f"{server}/live")
    wait_text(tab, "● Delegating the flaky test hunt · Bisecting the failing commit")
    # a block under an activity label with a call still live: headed by that call's intent
    wait_text(tab, "Building the release artifacts")
    live = main_text(tab)
    tab.goto(f"{server}/session?session={LIVE}")
    wait_text(tab, "● Delegating the flaky test hunt · Bisecting the failing commit")
    session = main_text(tab)
    for line in ("Building the release artifacts", "Checking the deploy status", "1 call · 1 live"):
        assert line in live and line in session


# --- following a session while it is written ------------------------------------------------
def test_a_settled_session_page_shows_the_next_turns_call_without_reload(
    server: str, tab: Any, writer: Ledger
) -> None:
    now = time.time_ns()
    write(writer, tool_call_id="f1", tool_name="search_code", status=Status.SUCCESS,
          session_id="follow-1", turn=1, batch_id="fb1", intent="Searching for the parser",
          outcome="Found the parser", start_ns=now - 10**9, end_ns=now)  # fmt: skip
    tab.goto(f"{server}/session?session=follow-1")
    wait_text(tab, "✓ Found the parser")
    loads: list[str] = []
    tab.on("load", lambda _page: loads.append("load"))
    write(writer, tool_call_id="f2", tool_name="read_file", status=Status.IN_FLIGHT,
          session_id="follow-1", turn=2, batch_id="fb2", intent="Reading the parser module",
          start_ns=time.time_ns())  # fmt: skip
    wait_text(tab, "● Reading the parser module")
    wait_text(tab, "Turn 2")
    # it settles: the page follows again
    write(writer, tool_call_id="f2", tool_name="read_file", status=Status.ERROR,
          end_ns=time.time_ns(), error="PermissionError")  # fmt: skip
    wait_text(tab, "✗ Reading the parser module · failed")
    assert loads == []  # no reload


def test_an_activity_label_set_after_the_last_write_shows_without_reload(
    server: str, tab: Any, writer: Ledger
) -> None:
    now = time.time_ns()
    for n, intent in enumerate(("Reading the lexer", "Reading the parser")):
        write(writer, tool_call_id=f"h{n}", tool_name="read_file", status=Status.SUCCESS,
              session_id="follow-label", turn=1, batch_id="hb1", intent=intent,
              start_ns=now - 10**9 + n, end_ns=now + n)  # fmt: skip
    tab.goto(f"{server}/session?session=follow-label")
    wait_text(tab, "✓ Reading the parser")
    loads: list[str] = []
    tab.on("load", lambda _page: loads.append("load"))
    writer.set_activity("follow-label", "hb1", "Explored the front end", turn=1)
    assert writer.flush(10.0)
    wait_text(tab, "Explored the front end")  # no call was written: the label alone
    assert loads == []


def test_a_page_opened_before_its_session_exists_shows_it_once_written(
    server: str, tab: Any, writer: Ledger
) -> None:
    tab.goto(f"{server}/session?session=follow-later")
    wait_text(tab, "The ledger has no session with this id:")
    write(writer, tool_call_id="g1", tool_name="plan", status=Status.STREAMING,
          session_id="follow-later", turn=1, batch_id="gb1", intent="Planning the",
          start_ns=time.time_ns())  # fmt: skip
    wait_text(tab, "✎ Planning the")
    write(writer, tool_call_id="g1", tool_name="plan", status=Status.STREAMING,
          intent="Planning the migration")  # fmt: skip
    wait_text(tab, "✎ Planning the migration")
    assert "The ledger has no session with this id:" not in main_text(tab)


# --- the Session page's controls ------------------------------------------------------------
def focused(tab: Any, call_id: str) -> Any:
    return tab.wait_for_selector(f".st-key-{call_key(call_id)}[data-focused='1']", timeout=WAIT_MS)


def test_search_inside_a_session(server: str, tab: Any) -> None:
    tab.goto(f"{server}/session?session={AUTH}")
    box = tab.get_by_label("Search this session")
    box.fill("config")
    box.press("Enter")
    wait_text(tab, "2 of 13 calls match the search.")
    assert "Found 12 results" not in main_text(tab)
    box.fill("")
    box.press("Enter")
    wait_text(tab, "✓ Found 12 results")
    tab.get_by_text("Errors only").click()
    wait_text(tab, "1 of 13 calls match the search.")
    wait_text(tab, "✗ Reading the callback router · failed")
    expect(tab.get_by_text("✓ Reading the config")).to_have_count(0, timeout=WAIT_MS)


def test_details_links_are_named_apart_and_open_from_the_keyboard(server: str, tab: Any) -> None:
    tab.goto(f"{server}/session?session={AUTH}")
    wait_text(tab, "✓ Found 12 results")
    details = tab.locator("[data-testid=stMain] a", has_text="Details #")
    expect(details).to_have_count(13, timeout=WAIT_MS)
    texts = tab.locator("[data-testid=stMain] a").all_inner_texts()
    names = [t.split()[-2] + " " + t.split()[-1] for t in texts if "Details #" in t]
    # each its own accessible name (the subagent's two are in its closed section)
    assert len(names) == len(set(names)) == 11
    tab.get_by_role("link", name="Details #3", exact=True).focus()
    tab.keyboard.press("Enter")
    target = focused(tab, "c3")
    assert "Reading the callback router" in target.inner_text()
    # Tab from there reaches the next call's Details link
    tab.get_by_role("link", name="Details #1", exact=True).focus()
    tab.keyboard.press("Tab")
    after: str = tab.evaluate("document.activeElement.innerText")
    assert "Details #" in after and not after.endswith("Details #1")


def test_detail_moves_copies_and_links_out(server: str, tab: Any) -> None:
    tab.goto(f"{server}/session?session={AUTH}&anchor=c2")
    focused(tab, "c2")
    tab.get_by_role("link", name="Next call").click()
    target = focused(tab, "c3")
    tab.wait_for_url("**anchor=c3*")
    assert "Reading the callback router" in target.inner_text()
    tab.get_by_role("link", name="Previous call").click()
    focused(tab, "c2")
    # the call's link, copied with the code block's button
    code = tab.locator("[data-testid=stCode]", has_text="anchor=c2").first
    code.hover()
    code.get_by_role("button").first.click()
    copied = tab.evaluate("navigator.clipboard.readText()")
    assert copied.startswith(server) and copied.endswith(f"/session?session={AUTH}&anchor=c2")
    # the trace, in the tracing backend (the server runs with --trace-url)
    out = tab.get_by_role("link", name=re.compile("Open the trace"))
    href = out.get_attribute("href")
    assert href.startswith(
        "https://langfuse.example/project/p1/traces/4bf92f3577b34da6a3ce929d0e0e4736?observation="
    )


def test_timeline_bar_opens_its_call(server: str, tab: Any) -> None:
    tab.goto(f"{server}/session?session={AUTH}")
    wait_text(tab, "✓ Found 12 results")
    tab.get_by_role("tab", name="Timeline").click()
    bars = tab.locator("[data-testid=stVegaLiteChart] .mark-rect path")
    bars.first.wait_for(timeout=WAIT_MS)
    bars.nth(2).click()  # the third call in sequence order: c3
    target = focused(tab, "c3")
    tab.wait_for_url("**anchor=c3*")
    assert "Reading the callback router" in target.inner_text()


def test_jump_to_a_turn_and_collapse_one(server: str, tab: Any) -> None:
    tab.set_viewport_size({"width": 1400, "height": 600})
    try:
        tab.goto(f"{server}/session?session={AUTH}")
        wait_text(tab, "✓ Found 12 results")
        tab.get_by_label("Jump to turn").click()
        tab.get_by_role("option", name="Turn 3").click()
        tab.wait_for_url("**turn=3*")
        heading = tab.locator("[class*='st-key-turn-'][data-focused='1']")
        heading.wait_for(timeout=WAIT_MS)
        assert "Turn 3" in heading.inner_text()
        tab.wait_for_timeout(300)
        box = heading.bounding_box()
        assert box is not None and 0 <= box["y"] < 600  # scrolled to it
        tab.get_by_text("Collapse turn 1").click()
        wait_text(tab, "Collapsed · 3 calls")
        assert "✓ Found 12 results" not in main_text(tab)
    finally:
        tab.set_viewport_size({"width": 1400, "height": 1000})
