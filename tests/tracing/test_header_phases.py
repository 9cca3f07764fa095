"""The group header in time (§5.2/§5.3): while a call inside ``activity("…")`` is in flight the
header is the latest in-flight intent; the activity label heads the block only once the block
has settled, and only when it resolved (no error). Through the public API: ``configure`` with a
real SQLite ledger, ``Ledger.blocks``, ``intentrace watch`` and ``group_header``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.agent import instrumented
from tracing import (
    TracingSetup,
    activity,
    group_header,
    session,
    tool_call,
)
from tracing.cli import main
from tracing.ledger import AnchorWrite, Ledger, open_ledger
from tracing.status import HeaderCall, Status, call_kind, count_header

LABEL = "Explored the auth flow"


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[TracingSetup, Ledger, str]]:
    url = f"sqlite:///{tmp_path}/phases.db"
    ledger = open_ledger(url)
    setup = instrumented(ledger, "search_code", "read_file")
    yield setup, ledger, url
    setup.shutdown()


def _watch(url: str) -> list[str]:
    result = CliRunner().invoke(main, ["watch", "--ledger", url, "--once", "--session", "s1"])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output.splitlines()


def test_phase_one_is_the_live_edge_then_the_label_once_settled(
    traced: tuple[TracingSetup, Ledger, str],
) -> None:
    setup, ledger, url = traced
    tracer = setup.provider.get_tracer("app")
    with session("s1", turn=1, tracer=tracer), activity(LABEL, tracer=tracer):
        # two sibling calls in flight at once (started, then run)
        search = tool_call("search_code", {"intent": "Searching for OAuth"}, tracer=tracer).start()
        read = tool_call("read_file", {"intent": "Reading the router"}, tracer=tracer).start()
        assert setup.force_flush()
        (block,) = ledger.blocks("s1")
        assert block["activity_label"] is None  # not before the block settled
        assert "▸ Reading the router" in _watch(url)  # the latest in-flight intent
        with search:
            pass
        with read:
            pass
    assert setup.force_flush()
    (block,) = ledger.blocks("s1")
    assert block["activity_label"] == LABEL
    calls = ledger.session_anchors("s1")
    assert [c["status"] for c in calls] == [Status.SUCCESS, Status.SUCCESS]


def test_a_block_that_failed_keeps_its_outcomes(traced: tuple[TracingSetup, Ledger, str]) -> None:
    setup, ledger, _ = traced
    tracer = setup.provider.get_tracer("app")
    with (
        pytest.raises(RuntimeError),
        session("s1", tracer=tracer),
        activity(LABEL, tracer=tracer),
        tool_call("read_file", {"intent": "Reading the router"}, tracer=tracer),
    ):
        raise RuntimeError("no such file")
    assert setup.force_flush()
    (block,) = ledger.blocks("s1")
    assert block["activity_label"] is None  # the label never resolved
    (call,) = ledger.session_anchors("s1")
    assert call["label"] == "Reading the router · failed"


def _call(status: Status, intent: str | None, seq: int, **kw: object) -> HeaderCall:
    label = str(kw.pop("label", intent or "Ran x"))
    return HeaderCall(status=status, intent=intent, label=label, seq=seq, **kw)  # pyright: ignore[reportArgumentType]


def test_group_header_phases() -> None:
    searching = _call(Status.SUCCESS, "Searching", 1, label="Found 3", settle_seq=3)
    reading = _call(Status.IN_FLIGHT, "Reading the router", 2)
    assert group_header([searching, reading], LABEL) == "Reading the router"  # phase 1
    done = _call(Status.SUCCESS, "Reading the router", 2, label="Read it", settle_seq=4)
    assert group_header([searching, done], LABEL) == LABEL  # phase 3: settled, resolved
    assert group_header([searching, done]) == "Read it"  # no label: latest settled
    silent = _call(Status.IN_FLIGHT, None, 5, label="Running x")
    assert group_header([searching, silent], LABEL) == "Found 3"  # live: no label yet


def test_a_block_of_one_call_is_the_call() -> None:
    plain = _call(Status.SUCCESS, None, 1, label="Ran search_code", settle_seq=2)
    assert group_header([plain]) == "Ran search_code"
    running = _call(Status.IN_FLIGHT, None, 1, label="Running search_code")
    assert group_header([running]) == "Running search_code"


def test_the_plain_count_names_subagents_and_questions() -> None:
    tool = _call(Status.SUCCESS, None, 1, settle_seq=4)
    sub = _call(Status.SUCCESS, None, 2, settle_seq=5, kind=call_kind("task", spawned=True))
    ask = _call(Status.SUCCESS, None, 3, settle_seq=6, kind=call_kind("ask_user"))
    assert group_header([tool, tool, sub, ask]) == (
        "Used 2 tools, ran 1 subagent, asked 1 question"
    )
    assert group_header([sub, sub]) == "Ran 2 subagents"
    assert count_header([]) == "Used 0 tools"
    assert call_kind("search_code") == "tool"


def test_watch_counts_subagents_and_questions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/counts.db"
    with open_ledger(url) as ledger:
        for call_id, tool in (("q", "ask_user"), ("t", "task"), ("inner", "grep")):
            write = AnchorWrite(
                tool_call_id=call_id,
                tool_name=tool,
                status=Status.IN_FLIGHT,
                session_id="s1",
                batch_id="b1",
            )
            if call_id == "inner":  # the subagent's call, made under "t"
                write["parent_call_id"], write["batch_id"] = "t", "b2"
            ledger.record(write)
        assert ledger.flush()
    assert "▸ Ran 1 subagent, asked 1 question" in _watch(url)
