"""Ids the database cannot hold and tool spans that name no tool: a lone surrogate in a call,
session or batch id (a JSON escape of half a pair, ``surrogateescape`` decoding) and a
recognised tool span with an empty name. Every writer (the ledger itself, the in-process
processor, ``intentrace import``, the stream taps) stores the call, with the id coerced as
labels are (the surrogate becomes ``?``), and loses nothing; readers find it by the id as the
app knows it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redaction import RedactionPolicy
from tests.ledger.conftest import FAST, pg_schema_url
from tests.support.wire import spans_to_json
from tracing import IntentRegistry, IntentSpanProcessor, session, tool_call
from tracing import attributes as A
from tracing.anchor import AnchorWrite, anchor_id, safe_id
from tracing.cli import main
from tracing.ledger import Ledger, open_ledger
from tracing.status import Status
from tracing.taps import StreamTap

SESSION = "conv-\ud800-1"
"""A session id with a lone high surrogate, as ``json.loads('"conv-\\ud800-1"')`` makes."""
STORED_SESSION = "conv-?-1"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ledger.db"
    return pg_schema_url(request.getfixturevalue("postgres_url"))


@pytest.fixture
def ledger(url: str) -> Iterator[Ledger]:
    led = open_ledger(url, options=FAST)
    yield led
    led.close()


@given(st.text(st.characters(exclude_categories=())))
def test_safe_id_always_encodes_and_keeps_what_encodes(text: str) -> None:
    shown = safe_id(text)
    shown.encode("utf-8")
    assert len(shown) == len(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert shown != text
    else:
        assert shown is text


def no_loss(ledger: Ledger) -> None:
    stats = ledger.stats()
    assert (stats["dropped"], stats["invalid"], stats["errors"]) == (0, 0, 0), (
        stats,
        ledger.recent_errors(),
    )


def test_the_ledger_stores_surrogate_ids_coerced(ledger: Ledger) -> None:
    turn = ledger.next_turn(SESSION)
    for i in range(3):
        write: AnchorWrite = {
            "tool_call_id": f"call-\udc00-{i}",
            "provider_call_id": f"p-\ud800-{i}",
            "tool_name": "search_code",
            "status": Status.IN_FLIGHT,
            "session_id": SESSION,
            "batch_id": "batch-\udfff",
            "agent_id": "agent-\ud801",
            "turn": turn,
        }
        ledger.record(write)
    ledger.record(
        {"tool_call_id": "call-\udc00-0", "tool_name": "search_code", "status": Status.SUCCESS}
    )
    ledger.set_activity(SESSION, "batch-\udfff", "Looking around", turn=turn)
    ledger.record_dropped(SESSION, 2)
    assert ledger.flush()
    no_loss(ledger)
    assert ledger.next_turn(SESSION) == turn + 1  # (the database's counter, not a fallback)
    no_loss(ledger)
    # Found by the ids as the app knows them, stored as they can be.
    rows = ledger.session_anchors(SESSION)
    assert [r["tool_call_id"] for r in rows] == [f"call-?-{i}" for i in range(3)]
    assert {(r["session_id"], r["batch_id"], r["agent_id"]) for r in rows} == {
        (STORED_SESSION, "batch-?", "agent-?")
    }
    assert rows[0]["status"] == "success"
    found = ledger.anchor("call-\udc00-1")
    assert found is not None and found["provider_call_id"] == "p-?-1"
    assert [b["activity_label"] for b in ledger.blocks(SESSION)] == ["Looking around"]
    assert [(d["session_id"], d["count"]) for d in ledger.dropped(SESSION)] == [(STORED_SESSION, 2)]


def _provider(ledger: Ledger) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(IntentSpanProcessor(SimpleSpanProcessor(exporter), ledger=ledger))
    return provider, exporter


def test_in_process_surrogate_session_and_call_id(ledger: Ledger) -> None:
    provider, exporter = _provider(ledger)
    tracer = provider.get_tracer("app")
    with (
        session(SESSION, agent_id="coder-\udc80", turn=1),
        tool_call(
            "search_code",
            {"intent": "Searching for OAuth handling"},
            tracer=tracer,
            call_id="call_\ud800",
            label_bearing=True,
        ) as c,
    ):
        c.set_result({"hits": 3}, outcome="Found 3")
    provider.shutdown()
    assert ledger.flush()
    no_loss(ledger)
    (row,) = ledger.session_anchors(SESSION)
    assert row["tool_call_id"] == anchor_id("call_?", session_id=STORED_SESSION, turn=1)
    assert (row["provider_call_id"], row["agent_id"]) == ("call_?", "coder-?")
    assert row["status"] == "success" and row["label"] == "Found 3"
    assert len(exporter.get_finished_spans()) == 1


def test_a_tool_span_with_no_name_at_all(ledger: Ledger) -> None:
    provider, exporter = _provider(ledger)
    tracer = provider.get_tracer("app")
    with session("s-noname"):
        # GenAI semconv recognises it (execute_tool), but it names no tool: no
        # gen_ai.tool.name, an empty span name.
        with tracer.start_as_current_span(
            "", attributes={A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL}
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool ", attributes={A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL}
        ):
            pass
    provider.shutdown()
    assert ledger.flush()
    no_loss(ledger)
    rows = ledger.session_anchors("s-noname")
    assert [(r["tool_name"], r["status"]) for r in rows] == [
        ("unknown", "success"),
        ("execute_tool ", "success"),
    ]
    assert rows[0]["label"] == "Ran unknown"
    assert len(exporter.get_finished_spans()) == 2


def test_import_of_surrogate_ids(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    for i in range(2):
        with tracer.start_as_current_span(
            "execute_tool search_code",
            attributes={
                A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
                A.GEN_AI_TOOL_NAME: "search_code",
                A.GEN_AI_TOOL_CALL_ID: f"call-X-{i}",
                A.GEN_AI_CONVERSATION_ID: "conv-X-1",
            },
        ):
            pass
    with tracer.start_as_current_span(
        "", attributes={A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL}
    ):
        pass
    text = json.dumps(spans_to_json(exporter.get_finished_spans()))
    # What an exporter of another language may write: JSON escapes of half a surrogate pair.
    text = text.replace("conv-X-1", "conv-\\ud800-1").replace("call-X-", "call-\\udc00-")
    assert "\\ud800" in text
    path = tmp_path / "spans.jsonl"
    path.write_text(text + "\n")
    db = tmp_path / "ledger.db"
    result = CliRunner().invoke(main, ["import", str(path), "--ledger", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output
    with open_ledger(f"sqlite:///{db}", read_only=True) as led:
        rows = led.session_anchors(SESSION)
        assert sorted(r["provider_call_id"] or "" for r in rows) == ["call-?-0", "call-?-1"]
        assert {r["session_id"] for r in rows} == {STORED_SESSION}
        assert [r["tool_name"] for r in led.session_anchors("")] == ["unknown"]


def test_stream_tap_surrogate_ids_meet_the_processor_row(ledger: Ledger) -> None:
    registry = IntentRegistry()
    registry.add("write_file")
    tap = StreamTap(ledger=ledger, registry=registry, policy=RedactionPolicy.default())
    tracker = tap.tracker(session_id=SESSION, turn=2, agent_id="a-\ud800")
    tracker.start(0, "call_\udc00", "write_file")
    tracker.feed(0, json.dumps({"intent": "Writing the parser", "path": "p.py"}))
    tracker.end(0)
    tracker.close()
    assert ledger.flush()
    no_loss(ledger)
    (row,) = ledger.session_anchors(SESSION)
    # The id the processor computes from the same call as it stores it: one row for both.
    assert row["tool_call_id"] == anchor_id("call_?", session_id=STORED_SESSION, turn=2)
    assert row["tool_call_id"] == anchor_id("call_\udc00", session_id=SESSION, turn=2)
    assert (row["provider_call_id"], row["agent_id"]) == ("call_?", "a-?")
    assert row["intent"] == "Writing the parser"
