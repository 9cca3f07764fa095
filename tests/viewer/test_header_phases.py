"""The block header in time on the Session and Live pages (AppTest) and in a real browser: an
agent instrumented with ``configure`` writes a real SQLite ledger; while the calls of
``activity("Explored the auth flow")`` run the header is the latest in-flight intent, and the
activity label heads the block only once the block has settled."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import instrumented
from tests.viewer.browser import BROWSER_MARKS, chromium_tab, serve
from tests.viewer.conftest import run_app, texts
from tracing import activity, session, tool_call
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import open_ledger
from viewer import _data

LABEL = "Explored the auth flow"
SESSION = "phases"


class Agent:
    """An agent paused inside an activity block with two calls in flight (the live edge)."""

    def __init__(self, url: str) -> None:
        self.ledger = open_ledger(url)
        self.setup = instrumented(self.ledger, "search_code", "read_file")
        self.stack = ExitStack()
        self.calls: list[Any] = []

    def start_block(self) -> None:
        tracer = self.setup.provider.get_tracer("agent")
        self.stack.enter_context(session(SESSION, turn=1, tracer=tracer))
        self.stack.enter_context(activity(LABEL, tracer=tracer))
        for tool, intent in (
            ("search_code", "Searching for OAuth"),
            ("read_file", "Reading the router"),
        ):
            self.calls.append(tool_call(tool, {"intent": intent}, tracer=tracer).start())
        assert self.setup.force_flush()

    def settle_block(self) -> None:
        for call in self.calls:
            with call:
                pass
        self.stack.close()
        assert self.setup.force_flush()

    def close(self) -> None:
        self.setup.shutdown()


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agent]:
    url = f"sqlite:///{tmp_path / 'phases.db'}"
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    running = Agent(url)
    yield running
    running.close()


def header(lines: list[str], row: str) -> str:
    return lines[lines.index(row) - 1]


def test_session_and_live_pages_show_the_live_edge_then_the_label(agent: Agent) -> None:
    agent.start_block()
    for at in (run_app({"session": SESSION}), run_app(page="live")):
        lines = texts(at)
        assert header(lines, "● Searching for OAuth") == "Reading the router"
        assert LABEL not in lines
    agent.settle_block()
    _data.in_flight.clear()
    lines = texts(run_app({"session": SESSION}))
    assert header(lines, "✓ Searching for OAuth") == LABEL


@BROWSER_MARKS[0]
@BROWSER_MARKS[1]
def test_a_browser_sees_the_header_follow_the_block(agent: Agent, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    agent.start_block()
    url = f"sqlite:///{tmp_path / 'phases.db'}"
    with serve(url) as base, chromium_tab(base) as tab:
        tab.page.goto(f"{base}/session?session={SESSION}")
        main = tab.page.locator("[data-testid=stMain]")
        expect(main.get_by_text("Reading the router", exact=True).first).to_be_visible(
            timeout=60_000
        )
        expect(main.get_by_text(LABEL, exact=True)).to_have_count(0)
        agent.settle_block()
        tab.page.reload()
        expect(main.get_by_text(LABEL, exact=True)).to_be_visible(timeout=60_000)
