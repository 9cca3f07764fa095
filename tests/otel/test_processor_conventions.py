"""Conventions (GenAI, OpenInference, Traceloop, Langfuse, user-defined), learning intents from
model spans, and the pure derivation the OTLP receiver reuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from redaction import RedactionPolicy
from tracing import IntentOptions, IntentRegistry
from tracing import attributes as A
from tracing.anchor import anchor_id
from tracing.derive._call import derive_call
from tracing.derive._conventions import (
    DEFAULT_CONVENTIONS,
    AttributeConvention,
    EventView,
    SpanView,
    intent_candidate,
    recognise,
    requested_calls,
)
from tracing.intent import read_intent
from tracing.testing import capture

REGISTRY = IntentRegistry(["search_code", "read_file", "lookup"])


class StartNames(SpanProcessor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.names.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        pass


def _end_only(cap: Any, name: str, attrs: dict[str, Any], events: tuple[Any, ...] = ()) -> None:
    span = cap.tracer.start_span(name)
    span.set_attributes(attrs)
    for event_name, event_attrs in events:
        span.add_event(event_name, event_attrs)
    span.end()


@pytest.mark.parametrize(
    "input_value",
    [
        '{"intent": "Searching for MCP wiring", "query": "mcp"}',
        '{"kwargs": {"intent": "Searching for MCP wiring", "query": "mcp"}}',
        '{"args": [], "kwargs": {"intent": "Searching for MCP wiring", "query": "mcp"}}',
    ],
)
def test_openinference_tool_span_attributes_only_at_end(input_value: str) -> None:
    with capture(registry=REGISTRY) as cap:
        _end_only(
            cap,
            "search_code",
            {
                A.OPENINFERENCE_SPAN_KIND: "TOOL",
                A.OI_TOOL_NAME: "search_code",
                A.OI_INPUT_VALUE: input_value,
                A.OI_OUTPUT_VALUE: '{"outcome": "Found the MCP wiring"}',
                A.SESSION_ID_KEY: "s-oi",
            },
        )
        (span,) = cap.dicts()
        (anchor,) = cap.calls().values()
    assert span["name"] == "Found the MCP wiring"
    assert span["attributes"][A.INTENT] == "Searching for MCP wiring"
    assert span["attributes"][A.CONVENTION] == "openinference"
    assert anchor["session_id"] == "s-oi"
    assert json.loads(anchor["args"]) == {"query": "mcp"}


def test_traceloop_truncated_input() -> None:
    full = json.dumps({"args": [], "kwargs": {"intent": "Reading the router", "path": "x" * 500}})
    with capture(registry=REGISTRY) as cap:
        _end_only(
            cap,
            "read_file.tool",
            {
                A.TRACELOOP_SPAN_KIND: "tool",
                A.TRACELOOP_ENTITY_NAME: "read_file",
                A.TRACELOOP_ENTITY_INPUT: full[:120],  # truncated by the instrumentation
                A.TRACELOOP_SESSION_ID: "s-tl",
            },
        )
        (span,) = cap.dicts()
        (anchor,) = cap.calls().values()
    assert span["name"] == "Reading the router"
    assert anchor["tool_name"] == "read_file" and anchor["session_id"] == "s-tl"


def test_langfuse_observe_tool_with_positional_intent() -> None:
    with capture(registry=REGISTRY) as cap:
        _end_only(
            cap,
            "lookup",
            {
                A.LANGFUSE_OBSERVATION_TYPE: "tool",
                A.LANGFUSE_OBSERVATION_INPUT: json.dumps(
                    {"args": ["Looking up the customer", "cust-1"], "kwargs": {}}
                ),
                A.LANGFUSE_OBSERVATION_OUTPUT: '"ok"',
            },
        )
        (span,) = cap.dicts()
    assert span["name"] == "Looking up the customer"
    assert span["attributes"][A.CONVENTION] == "langfuse"


def test_genai_args_and_result_in_events() -> None:
    with capture(registry=REGISTRY) as cap:
        _end_only(
            cap,
            "execute_tool read_file",
            {A.GEN_AI_OPERATION_NAME: "execute_tool"},
            events=(
                (A.GEN_AI_TOOL_MESSAGE_EVENT, {"content": '{"intent": "Reading setup.py"}'}),
                (A.GEN_AI_CHOICE_EVENT, {"message": '{"outcome": "Read setup.py"}'}),
            ),
        )
        (span,) = cap.dicts()
    assert span["attributes"][A.TOOL_NAME] == "read_file"
    assert span["name"] == "Read setup.py"


ACME = AttributeConvention(
    name="acme",
    match=lambda name, attrs: attrs.get("acme.kind") == "tool",
    tool_name_keys=("acme.tool",),
    args_keys=("acme.args",),
    result_keys=("acme.result",),
)
"""A user's own convention (spans marked ``acme.kind = tool``), used here and in setup tests."""


def test_user_convention_first() -> None:
    secret = "sk-live-0123456789abcdefghijklmnopqrstuv"
    cap = capture(registry=REGISTRY, conventions=(ACME, *DEFAULT_CONVENTIONS))
    with cap:
        _end_only(
            cap,
            "acme span",
            {
                "acme.kind": "tool",
                "acme.tool": "lookup",
                "acme.args": json.dumps({"intent": "Looking up Ada", "key": secret}),
                "acme.result": secret,
            },
        )
        (span,) = cap.dicts()
    assert span["name"] == "Looking up Ada"
    assert span["attributes"][A.CONVENTION] == "acme"
    assert secret not in json.dumps(span)


def _oi_llm_attrs(calls: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    attrs: dict[str, Any] = {A.OPENINFERENCE_SPAN_KIND: "LLM"}
    for j, (call_id, name, args) in enumerate(calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
        attrs[prefix + "id"] = call_id
        attrs[prefix + "function.name"] = name
        attrs[prefix + "function.arguments"] = json.dumps(args)
    return attrs


def test_learned_from_openinference_model_span_names_tool_spans_at_start() -> None:
    probe = StartNames()
    sync = IntentOptions(in_thread=False)  # probe the live name synchronously
    with capture(registry=REGISTRY, processors=[probe], options=sync) as cap:
        with cap.tracer.start_as_current_span("agent"):
            _end_only(
                cap,
                "ChatModel",
                _oi_llm_attrs(
                    [
                        ("c1", "search_code", {"intent": "Searching for OAuth", "q": "oauth"}),
                        ("c2", "search_code", {"intent": "Searching for MCP", "q": "mcp"}),
                    ]
                ),
            )
            for query, intent in (("oauth", "Searching for OAuth"), ("mcp", "Searching for MCP")):
                _end_only(
                    cap,
                    "search_code",
                    {
                        A.OPENINFERENCE_SPAN_KIND: "TOOL",
                        A.OI_TOOL_NAME: "search_code",
                        A.OI_INPUT_VALUE: json.dumps({"intent": intent, "q": query}),
                    },
                )
        names = [s["name"] for s in cap.dicts()]
        anchors = cap.calls()
        stats = cap.processor.stats()
    assert probe.names[2:] == ["Searching for OAuth", "Searching for MCP"]  # named at start
    assert names[1:3] == ["Searching for OAuth", "Searching for MCP"]
    assert set(anchors) == {"c1", "c2"}  # the provider's call ids
    assert stats["learned_calls"] == 2 and stats["learned_matched"] == 2


def test_learned_from_genai_output_messages_matched_by_call_id() -> None:
    probe = StartNames()
    messages = [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "let me look"},
                {
                    "type": "tool_call",
                    "id": "a",
                    "name": "read_file",
                    "arguments": {"intent": "Reading A"},
                },
                {
                    "type": "tool_call",
                    "id": "b",
                    "name": "read_file",
                    "arguments": {"intent": "Reading B"},
                },
            ],
        }
    ]
    sync = IntentOptions(in_thread=False)  # probe the live name synchronously
    with capture(registry=REGISTRY, processors=[probe], options=sync) as cap:
        with cap.tracer.start_as_current_span("agent"):
            _end_only(cap, "chat gpt", {A.GEN_AI_OUTPUT_MESSAGES: json.dumps(messages)})
            for call_id in ("b", "a"):  # started in the other order: matched by id
                span = cap.tracer.start_span(
                    "execute_tool read_file",
                    attributes={
                        A.GEN_AI_OPERATION_NAME: "execute_tool",
                        A.GEN_AI_TOOL_NAME: "read_file",
                        A.GEN_AI_TOOL_CALL_ID: call_id,
                    },
                )
                span.end()
        names = [s["name"] for s in cap.dicts()]
    assert probe.names[2:] == ["Reading B", "Reading A"]
    assert names[1:3] == ["Reading B", "Reading A"]


def test_learned_intent_behind_the_gate_only() -> None:
    probe = StartNames()
    sync = IntentOptions(in_thread=False)
    with capture(registry=IntentRegistry(), processors=[probe], options=sync) as cap:
        _end_only(cap, "ChatModel", _oi_llm_attrs([("c1", "crm", {"intent": "purchase"})]))
        _end_only(cap, "crm", {A.OPENINFERENCE_SPAN_KIND: "TOOL", A.OI_INPUT_VALUE: "{}"})
        names = [s["name"] for s in cap.dicts()]
    assert names == ["ChatModel", "crm"]


def test_requested_calls_forms() -> None:
    attrs = _oi_llm_attrs([("x", "t1", {"intent": "A"}), ("y", "t2", {})])
    calls = requested_calls(attrs)
    assert [(c.tool_name, c.call_id) for c in calls] == [("t1", "x"), ("t2", "y")]
    assert requested_calls({A.GEN_AI_OUTPUT_MESSAGES: "not json"}) == []


def test_intent_read_from_a_prefix_of_large_args() -> None:
    big = json.dumps({"intent": "Uploading the dataset", "blob": "x" * 400_000})
    assert intent_candidate(big, read=read_intent) == "Uploading the dataset"
    # the intent not first: not in the prefix, found by the full parse at settle
    late = json.dumps({"blob": "x" * 400_000, "intent": "Uploading late"})
    assert intent_candidate(late, read=read_intent) is None
    with capture(registry=REGISTRY) as cap:
        _end_only(
            cap,
            "execute_tool lookup",
            {A.GEN_AI_OPERATION_NAME: "execute_tool", A.GEN_AI_TOOL_CALL_ARGUMENTS: late},
        )
        (span,) = cap.dicts()
    assert span["name"] == "Uploading late"


def test_derive_call_on_a_plain_view_is_what_the_receiver_uses() -> None:
    view = SpanView(
        name="execute_tool search_code",
        attributes={
            A.GEN_AI_OPERATION_NAME: "execute_tool",
            A.GEN_AI_TOOL_NAME: "search_code",
            A.GEN_AI_TOOL_CALL_ID: "call_9",
            A.GEN_AI_TOOL_CALL_ARGUMENTS: '{"intent": "Searching for OAuth", "q": "o"}',
            A.LABEL_BEARING: True,
            A.GEN_AI_CONVERSATION_ID: "conv-1",
        },
        events=(EventView("exception", {"exception.message": "timeout talking to index"}),),
        status_code=2,
        status_message="TimeoutError: timeout talking to index",
        trace_id="ab" * 16,
        span_id="cd" * 8,
        parent_span_id="ef" * 8,
        start_ns=1_000,
        end_ns=3_000_000,
    )
    assert recognise(view) is not None
    derived = derive_call(view, policy=RedactionPolicy.default())  # no registry: the flag
    assert derived is not None
    assert derived.name == "Searching for OAuth · failed"
    anchor = derived.anchor
    assert anchor["tool_call_id"] == anchor_id("call_9", session_id="conv-1")
    assert anchor.get("provider_call_id") == "call_9"
    assert anchor["status"] == "error"
    assert anchor.get("batch_id") == "ef" * 8
    assert anchor.get("session_id") == "conv-1"
    assert anchor.get("error") == "TimeoutError: timeout talking to index"
    assert json.loads(str(anchor.get("args"))) == {"q": "o"}
    assert (
        derive_call(SpanView(name="db query", attributes={}), policy=RedactionPolicy.default())
        is None
    )


@pytest.mark.parametrize("overlap", [False, True])
def test_parallel_calls_started_out_of_order_get_their_own_call_ids(overlap: bool) -> None:
    """Matched by tool name and order at start; corrected by their own args at settle."""
    calls = [
        ("c1", "search_code", {"intent": "Searching A", "q": "a"}),
        ("c2", "search_code", {"intent": "Searching B", "q": "b"}),
    ]

    def tool_span(cap: Any) -> Any:
        return cap.tracer.start_span("search_code")  # no attributes until the end

    def finish(span: Any, intent: str) -> None:
        span.set_attributes(
            {
                A.OPENINFERENCE_SPAN_KIND: "TOOL",
                A.OI_INPUT_VALUE: json.dumps({"intent": intent}),
            }
        )
        span.end()

    options = IntentOptions(in_thread=False)
    with capture(registry=REGISTRY, options=options) as cap:
        with cap.tracer.start_as_current_span("agent"):
            _end_only(cap, "ChatModel", _oi_llm_attrs(calls))
            first = tool_span(cap)  # really the B call, but takes c1 by order
            if overlap:
                second = tool_span(cap)  # takes c2
                finish(first, "Searching B")  # trades with the started sibling
                finish(second, "Searching A")
            else:
                finish(first, "Searching B")  # trades with the call still waiting
                second = tool_span(cap)
                finish(second, "Searching A")
        anchors = cap.calls()
        by_id = cap.anchors()
        tools = [s for s in cap.dicts() if A.TOOL_CALL_ID in s["attributes"]]
        spans = {by_id[s["attributes"][A.TOOL_CALL_ID]]["provider_call_id"]: s for s in tools}
    span_of = {"c1": second, "c2": first}
    for call_id, intent in (("c1", "Searching A"), ("c2", "Searching B")):
        assert anchors[call_id]["intent"] == intent
        assert anchors[call_id]["span_id"] == format(
            span_of[call_id].get_span_context().span_id, "016x"
        )
        assert spans[call_id]["name"] == intent
    assert cap.processor.stats()["learned_reassigned"] >= 1


@pytest.mark.parametrize("seen", ["live", "ended"])
def test_learned_ids_do_not_depend_on_when_the_start_was_handled(seen: str) -> None:
    """OpenInference's LlamaIndex tool spans get their attributes after start: the processor's
    thread may handle the start while the span is live (nothing to recognise yet: it is named
    only at settle) or after it ended (recognised at start). Either way the call the model span
    requested is matched, and the anchor id is the same."""
    tool = {
        A.OPENINFERENCE_SPAN_KIND: "TOOL",
        A.OI_TOOL_NAME: "search_code",
        A.OI_INPUT_VALUE: json.dumps({"intent": "Searching A", "q": "a"}),
    }
    with capture(registry=REGISTRY, options=IntentOptions(in_thread=False)) as cap:
        with cap.tracer.start_as_current_span("agent"):
            _end_only(cap, "ChatModel", _oi_llm_attrs([("call_0", "search_code", {"intent": "A"})]))
            if seen == "live":
                span = cap.tracer.start_span("FunctionTool.acall")  # attributes come later
                span.set_attributes(tool)
            else:
                span = cap.tracer.start_span("FunctionTool.acall", attributes=tool)
            span.end()
        anchors = cap.anchors()
        stats = cap.processor.stats()
    (anchor,) = anchors.values()
    assert anchor["tool_call_id"] == anchor_id("call_0")
    assert anchor["provider_call_id"] == "call_0"
    assert anchor["intent"] == "Searching A" and stats["learned_matched"] == 1
