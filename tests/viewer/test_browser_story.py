"""The Session and Live pages in a real headless Chromium, on a ledger this module writes to
while the pages are open: Live/Session parity, sessions followed while written, the controls."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.viewer import fixture_ledger
from tests.viewer.browser import BROWSER_MARKS, Tab, chromium_tab, serve
from tests.viewer.fixture_ledger import LIVE
from tracing.ledger import AnchorWrite, Ledger, open_ledger
from tracing.status import Status

pytestmark = BROWSER_MARKS
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
    with serve(ledger_url) as base, chromium_tab(base) as tab:
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
    wait_text(tab, "Preparing the release")  # the activity label heads its block
    live = main_text(tab)
    tab.goto(f"{server}/session?session={LIVE}")
    wait_text(tab, "● Delegating the flaky test hunt · Bisecting the failing commit")
    session = main_text(tab)
    for line in ("Preparing the release", "Checking the deploy status", "1 call · 1 live"):
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
