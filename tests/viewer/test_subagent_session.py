"""A subagent run under its own ``session(...)`` is a child conversation of the call that
spawned it (seed 004): the parent session's story shows it nested under that call, with the
running subagent's latest intent as the call's ticker; its own session shows it too.
Written by an instrumented agent (``configure``, real SQLite ledger), read by AppTest."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.support.agent import instrumented
from tests.viewer.conftest import run_app, texts
from tracing import TracingSetup, session, tool_call
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import Ledger, open_ledger
from viewer import _data


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TracingSetup, Ledger]]:
    url = f"sqlite:///{tmp_path / 'sub.db'}"
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    ledger = open_ledger(url)
    setup = instrumented(ledger, "delegate", "bisect", "grep")
    yield setup, ledger
    setup.shutdown()


def test_a_subagent_in_its_own_session_is_a_child_with_a_ticker(
    agent: tuple[TracingSetup, Ledger],
) -> None:
    setup, ledger = agent
    tracer = setup.provider.get_tracer("agent")
    with ExitStack() as stack:
        stack.enter_context(session("parent", agent_id="planner", turn=1, tracer=tracer))
        stack.enter_context(
            tool_call("delegate", {"intent": "Delegating the flaky test hunt"}, tracer=tracer)
        )
        stack.enter_context(session("child", agent_id="hunter", turn=1, tracer=tracer))
        with tool_call("grep", {"intent": "Grepping the CI logs"}, tracer=tracer):
            pass
        stack.enter_context(
            tool_call("bisect", {"intent": "Bisecting the failing commit"}, tracer=tracer)
        )
        assert setup.force_flush()
        (spawner,) = ledger.session_anchors("parent")
        assert {a["parent_call_id"] for a in ledger.session_anchors("child")} == {
            spawner["tool_call_id"]
        }
        assert [a["intent"] for a in ledger.subagent_anchors("parent")] == [
            "Grepping the CI logs",
            "Bisecting the failing commit",
        ]
        lines = texts(run_app({"session": "parent"}))
        # the spawning call's ticker: the running subagent's latest in-flight intent
        assert "● Delegating the flaky test hunt · Bisecting the failing commit" in lines
        assert "✓ Grepping the CI logs" in lines  # the child's calls, nested
    assert setup.force_flush()
    _data.in_flight.clear()
    lines = texts(run_app({"session": "parent"}))
    assert "✓ Bisecting the failing commit" in lines
    assert ledger.subagent_anchors("child") == []
