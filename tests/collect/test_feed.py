"""SpanFeed on its own: relations across export batches (subagents, sessions and activity
labels found on ancestors that arrive later), replays, bounded memory, the gate without the
in-process registry, background calls, and no internal error whatever the spans say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redaction import RedactionPolicy
from tests.ledger.conftest import pg_schema_url
from tracing import IntentRegistry
from tracing import attributes as A
from tracing.anchor import anchor_id
from tracing.collect._feed import SpanFeed
from tracing.derive._conventions import EventView, SpanView
from tracing.ledger import open_ledger
from tracing.testing import RecordingLedger

TRACE = "0af7651916cd43dd8448eb211c80319c"
POLICY = RedactionPolicy.default()


def view(
    span_id: str,
    parent: str | None = None,
    *,
    name: str = "step",
    attrs: dict[str, Any] | None = None,
    start: int = 1,
    status: int = 0,
    trace: str = TRACE,
) -> SpanView:
    return SpanView(
        name=name,
        attributes=attrs or {},
        status_code=status,
        trace_id=trace,
        span_id=span_id.rjust(16, "0"),
        parent_span_id=parent.rjust(16, "0") if parent else None,
        start_ns=1_700_000_000_000_000_000 + start,
        end_ns=1_700_000_000_000_000_000 + start + 1000,
    )


def tool(
    span_id: str,
    parent: str | None,
    name: str,
    intent: str | None = None,
    *,
    flag: bool | None = True,
    start: int = 1,
    extra: dict[str, Any] | None = None,
) -> SpanView:
    args = {"intent": intent} if intent else {}
    attrs: dict[str, Any] = {
        A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
        A.GEN_AI_TOOL_NAME: name,
        A.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(args),
        **(extra or {}),
    }
    if flag is not None:
        attrs[A.LABEL_BEARING] = flag
    return view(span_id, parent, name=f"execute_tool {name}", attrs=attrs, start=start)


def call_id(span_id: str) -> str:
    return anchor_id(None, trace_id=TRACE, span_id=span_id.rjust(16, "0"))


def test_subagent_calls_find_their_parent_call_when_it_arrives_later() -> None:
    ledger = RecordingLedger()
    feed = SpanFeed(ledger, policy=POLICY)
    # the subagent's calls end first and come in their own requests
    feed.ingest([tool("c1", "s1", "git_diff", "Reviewing the diff", start=30)])
    feed.ingest([view("s1", "p1", name="reviewer step", start=20)])  # between: not a call
    assert ledger.anchors()[call_id("c1")]["parent_call_id"] is None
    assert feed.stats()["waiting"] == 1
    feed.ingest([tool("p1", "root", "spawn_agent", "Asking a reviewer", start=10)])
    assert ledger.anchors()[call_id("c1")]["parent_call_id"] == call_id("p1")
    feed.ingest([view("root", None, start=0)])
    stats = feed.stats()
    assert (stats["waiting"], stats["resolved_late"], stats["calls"]) == (0, 1, 2)
    assert ledger.anchors()[call_id("p1")]["parent_call_id"] is None
    assert feed.internal_errors() == []


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger: a SQLite file, or a new schema on the real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/l.db"
    return pg_schema_url(request.getfixturevalue("postgres_url"))


def test_session_and_activity_on_a_later_ancestor_move_calls_into_the_session(
    store_url: str,
) -> None:
    ledger = open_ledger(store_url)
    try:
        feed = SpanFeed(ledger, policy=POLICY)
        feed.ingest(
            [
                tool("c1", "b1", "search_code", "Searching for A", start=3),
                tool("c2", "b1", "search_code", "Searching for B", start=4),
            ]
        )
        feed.ingest([view("b1", "r1", attrs={A.ACTIVITY: "Exploring the code"}, start=2)])
        ledger.flush()
        assert [a["tool_call_id"] for a in ledger.session_anchors("")] == [
            call_id("c1"),
            call_id("c2"),
        ]
        root = {A.SESSION_ID: "conv-9", A.AGENT_ID: "coder", A.TURN: 2}
        feed.ingest([view("r1", None, attrs=root, start=1)])
        ledger.flush()
        assert ledger.session_anchors("") == []
        anchors = ledger.session_anchors("conv-9")
        assert [(a["tool_call_id"], a["agent_id"], a["turn"]) for a in anchors] == [
            (call_id("c1"), "coder", 2),
            (call_id("c2"), "coder", 2),
        ]
        assert [b["activity_label"] for b in ledger.blocks("conv-9")] == ["Exploring the code"]
        assert feed.internal_errors() == []
    finally:
        ledger.close()


def test_replays_do_not_duplicate(tmp_path: Path) -> None:
    ledger = open_ledger(f"sqlite:///{tmp_path}/l.db")
    try:
        feed = SpanFeed(ledger, policy=POLICY)
        batch = [
            view("r", None, attrs={A.SESSION_ID: "conv"}),
            tool("a", "r", "read_file", "Reading a", start=2),
            tool("b", "a", "read_file", "Reading b", start=3),
        ]
        for _ in range(3):
            feed.ingest(batch)
        ledger.flush()
        anchors = ledger.session_anchors("conv")
        assert [a["intent"] for a in anchors] == ["Reading a", "Reading b"]
        assert anchors[1]["parent_call_id"] == call_id("a")
    finally:
        ledger.close()


def test_memory_is_bounded() -> None:
    ledger = RecordingLedger()
    feed = SpanFeed(ledger, policy=POLICY, max_spans=50, max_waiting=10)
    for n in range(200):  # calls whose parents never come
        feed.ingest([tool(f"c{n:x}", f"f{n:x}", "read_file", "Reading", start=n)])
    stats = feed.stats()
    assert stats["spans_indexed"] <= 50
    assert stats["waiting"] <= 10
    assert stats["unresolved"] >= 190
    assert len(ledger.calls()) == 200  # every call is written all the same


def test_gate_without_the_registry() -> None:
    ledger = RecordingLedger()
    oi = {A.OPENINFERENCE_SPAN_KIND: "TOOL", A.OI_TOOL_NAME: "crm_update"}
    args = json.dumps({"intent": "upsell", "account": 7})  # a business parameter
    spans = [
        view("a", None, name="crm_update", attrs={**oi, A.OI_INPUT_VALUE: args}),
        view(
            "b",
            None,
            name="lookup",
            attrs={
                A.OPENINFERENCE_SPAN_KIND: "TOOL",
                A.OI_TOOL_NAME: "lookup",
                A.OI_INPUT_VALUE: json.dumps({"intent": "Looking up the invoice"}),
            },
        ),
        tool("c", None, "lookup", "Looking up the refund", flag=False),  # the flag wins
        view(
            "d",
            None,
            name="summarize",
            attrs={
                A.LANGFUSE_OBSERVATION_TYPE: "tool",
                A.LANGFUSE_OBSERVATION_INPUT: json.dumps(
                    {"args": ["Summarizing the thread"], "kwargs": {}}
                ),
                A.LANGFUSE_OBSERVATION_LEVEL: "ERROR",
                A.LANGFUSE_OBSERVATION_STATUS_MESSAGE: "context too long",
            },
        ),
    ]
    SpanFeed(ledger, policy=POLICY, registry=IntentRegistry(["lookup", "summarize"])).ingest(spans)
    got = {a["span_id"][-1]: a for a in ledger.calls().values()}
    assert (got["a"]["intent"], got["a"]["label"]) == (None, "Ran crm_update")
    assert json.loads(got["a"]["args"]) == {"intent": "upsell", "account": 7}
    assert got["b"]["intent"] == "Looking up the invoice"
    assert got["c"]["intent"] is None
    assert (got["d"]["tool_name"], got["d"]["intent"]) == ("summarize", "Summarizing the thread")
    assert (got["d"]["label"], got["d"]["error"]) == (
        "Summarizing the thread · failed",
        "context too long",
    )


def test_background_hint_stays_in_flight_until_harvested() -> None:
    ledger = RecordingLedger()
    feed = SpanFeed(ledger, policy=POLICY)
    ids = {A.GEN_AI_TOOL_CALL_ID: "call_bg"}
    feed.ingest(
        [tool("a", None, "run_tests", "Running the suite", extra={**ids, A.STATUS: "background"})]
    )
    anchor = ledger.calls()["call_bg"]
    assert (anchor["status"], anchor["label"], anchor["end_ns"]) == (
        "background",
        "Running the suite · in background",
        None,
    )
    feed.ingest([tool("b", None, "run_tests", "Running the suite", start=99, extra=ids)])
    assert ledger.calls()["call_bg"]["status"] == "success"


def test_learned_calls_need_the_model_span_to_end_before_the_tool_starts() -> None:
    ledger = RecordingLedger()
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    model = view(
        "m",
        None,
        name="llm",
        attrs={
            A.OPENINFERENCE_SPAN_KIND: "LLM",
            prefix + "id": "call_x",
            prefix + "function.name": "lookup",
            prefix + "function.arguments": json.dumps({"intent": "Looking up refunds"}),
        },
        start=0,
    )
    bare = view("t", None, name="lookup", start=5000)  # starts after the model span ended
    early = view("u", None, name="lookup", start=10)  # started before: not this call
    feed = SpanFeed(ledger, policy=POLICY, registry=IntentRegistry(["lookup"]))
    feed.ingest([early, bare, model])  # arrival order does not matter
    anchors = ledger.calls()
    assert list(anchors) == ["call_x"]
    assert anchors["call_x"]["intent"] == "Looking up refunds"
    assert anchors["call_x"]["span_id"].endswith("t")


def test_secrets_are_scrubbed_and_policy_hides_intents() -> None:
    policy = RedactionPolicy.from_toml('[tools.query_customers]\nargs = "redact"\n')
    ledger = RecordingLedger()
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    spans = [
        tool("a", None, "query_customers", "Looking up Jane Doe's card"),
        view(
            "b",
            None,
            name="execute_tool run_shell",
            attrs={
                A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
                A.GEN_AI_TOOL_NAME: "run_shell",
                A.LABEL_BEARING: True,
                A.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(
                    {"intent": f"Checking token {token}", "cmd": f"gh auth --token {token}"}
                ),
            },
            status=2,
        ),
    ]
    SpanFeed(ledger, policy=policy).ingest(spans)
    text = json.dumps(list(ledger.calls().values()))
    assert token not in text
    assert "Jane" not in text
    got = {a["tool_name"]: a for a in ledger.calls().values()}
    assert got["query_customers"]["label"] == "Ran query_customers"
    assert json.loads(got["query_customers"]["redaction"])["intent_hidden"] is True
    assert got["run_shell"]["label"].startswith("Checking token [redacted")


# ---------------------------------------------------------------------------------- properties

_KEYS = [
    A.GEN_AI_OPERATION_NAME,
    A.GEN_AI_TOOL_NAME,
    A.GEN_AI_TOOL_CALL_ARGUMENTS,
    A.GEN_AI_TOOL_CALL_RESULT,
    A.GEN_AI_TOOL_CALL_ID,
    A.OPENINFERENCE_SPAN_KIND,
    A.OI_INPUT_VALUE,
    A.LANGFUSE_OBSERVATION_TYPE,
    A.LANGFUSE_OBSERVATION_INPUT,
    A.TRACELOOP_SPAN_KIND,
    A.LABEL_BEARING,
    A.SESSION_ID,
    A.TURN,
    A.STATUS,
    A.ACTIVITY,
    A.OUTCOME,
    A.OUTCOME_PATCH,
    A.TOOL_CALL_ID,
    A.PARENT_CALL_ID,
    A.BATCH_ID,
    A.CONVENTION,
    A.INTENT,
]
_VALUES = st.one_of(
    st.sampled_from(["execute_tool", "TOOL", "tool", "LLM", "background", "cancelled"]),
    st.text(max_size=20),
    st.integers(),
    st.booleans(),
    st.binary(max_size=4),
    st.lists(st.text(max_size=4), max_size=2).map(tuple),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    st.builds(
        json.dumps,
        st.dictionaries(st.sampled_from(["intent", "q", "outcome"]), st.text(max_size=10)),
    ),
)
_SPANS = st.lists(
    st.builds(
        lambda sid, parent, attrs, status, events: SpanView(
            name="span",
            attributes=attrs,
            events=tuple(EventView(n, {"exception.type": "CancelledError"}) for n in events),
            status_code=status,
            trace_id=TRACE,
            span_id=f"{sid:016x}",
            parent_span_id=f"{parent:016x}" if parent else None,
            start_ns=sid,
            end_ns=sid + 10,
        ),
        st.integers(1, 8),
        st.integers(0, 8),
        st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=6),
        st.integers(0, 2),
        st.lists(st.sampled_from(["exception", "gen_ai.choice"]), max_size=2),
    ),
    max_size=8,
)


@given(st.lists(_SPANS, max_size=3))
def test_no_internal_error_whatever_the_spans_say(batches: list[list[SpanView]]) -> None:
    ledger = RecordingLedger()
    feed = SpanFeed(ledger, policy=POLICY, registry=IntentRegistry(["span"]))
    for batch in batches:
        result = feed.ingest(batch)
        assert result.rejected == 0
    assert feed.internal_errors() == []
    for anchor in ledger.calls().values():
        assert anchor["label"]


def test_parent_cycles_do_not_hang_the_feed() -> None:
    ledger = RecordingLedger()
    feed = SpanFeed(ledger, policy=POLICY)
    feed.ingest([tool("a", "a", "read_file", "Reading a")])  # its own parent
    feed.ingest([tool("b", "c", "read_file", "Reading b"), view("c", "b")])  # a loop of two
    assert len(ledger.calls()) == 2
    assert feed.stats()["cycles"] >= 1
    assert feed.internal_errors() == []
    assert all(a["parent_call_id"] != a["tool_call_id"] for a in ledger.calls().values())
