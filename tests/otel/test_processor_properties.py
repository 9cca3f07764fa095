"""Hypothesis: whatever attributes, args and events a span carries, the processor never
raises, never records an internal error, and what it exports always encodes as OTLP."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.trace import Status, StatusCode

from redaction import RedactionError, RedactionPolicy
from tracing import IntentOptions, IntentRegistry
from tracing import attributes as A
from tracing.derive._call import derive_call
from tracing.derive._conventions import SpanView
from tracing.testing import capture

KEYS = [
    A.GEN_AI_OPERATION_NAME,
    A.GEN_AI_TOOL_NAME,
    A.GEN_AI_TOOL_CALL_ID,
    A.GEN_AI_TOOL_CALL_ARGUMENTS,
    A.GEN_AI_TOOL_CALL_RESULT,
    A.GEN_AI_OUTPUT_MESSAGES,
    A.OPENINFERENCE_SPAN_KIND,
    A.OI_TOOL_NAME,
    A.OI_INPUT_VALUE,
    A.OI_OUTPUT_VALUE,
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    A.TRACELOOP_SPAN_KIND,
    A.TRACELOOP_ENTITY_INPUT,
    A.LANGFUSE_OBSERVATION_TYPE,
    A.LANGFUSE_OBSERVATION_INPUT,
    A.LANGFUSE_TRACE_TAGS,
    A.OUTCOME,
    A.OUTCOME_PATCH,
    A.STATUS,
    A.LABEL_BEARING,
    A.ACTIVITY,
    A.BATCH_ID,
    A.TURN,
    A.TIMED_OUT,
    A.SESSION_ID_KEY,
    "other.key",
]
KINDS = {
    A.GEN_AI_OPERATION_NAME: st.sampled_from(["execute_tool", "chat", ""]),
    A.OPENINFERENCE_SPAN_KIND: st.sampled_from(["TOOL", "tool", "LLM", "CHAIN"]),
    A.TRACELOOP_SPAN_KIND: st.sampled_from(["tool", "task"]),
    A.LANGFUSE_OBSERVATION_TYPE: st.sampled_from(["tool", "span"]),
    A.STATUS: st.sampled_from(["background", "cancelled", "weird"]),
}

text = st.text(max_size=40)  # includes lone surrogates
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def args_text(draw: st.DrawFn) -> str:
    value = draw(json_like)
    if draw(st.booleans()):
        value = {"intent": draw(text), **(value if isinstance(value, dict) else {"v": value})}
    if draw(st.booleans()):
        value = draw(st.sampled_from([{"kwargs": value}, {"args": [value], "kwargs": {}}]))
    out = json.dumps(value)
    cut = draw(st.integers(min_value=0, max_value=len(out)))
    return out[:cut] if draw(st.booleans()) else out  # sometimes truncated


def attribute_value(key: str) -> st.SearchStrategy[Any]:
    if key in KINDS:
        return KINDS[key]
    return st.one_of(
        args_text(),
        text,
        st.integers(),
        st.booleans(),
        st.floats(allow_nan=False),
        st.lists(text, max_size=3),
    )


@st.composite
def attributes(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=8))
    return {k: draw(attribute_value(k)) for k in keys}


events = st.lists(
    st.tuples(
        st.sampled_from(["exception", "gen_ai.tool.message", "gen_ai.choice", "other"]),
        st.dictionaries(
            st.sampled_from(["exception.message", "exception.type", "content", "message", "x"]),
            st.one_of(text, args_text(), st.integers()),
            max_size=3,
        ),
    ),
    max_size=3,
)

REGISTRY = IntentRegistry(["", "search", "tool"])


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    name=text,
    start_attrs=attributes(),
    end_attrs=attributes(),
    span_events=events,
    error=st.none() | text,
)
def test_processor_never_raises_and_exports_encodable_spans(
    name: str,
    start_attrs: dict[str, Any],
    end_attrs: dict[str, Any],
    span_events: list[tuple[str, dict[str, Any]]],
    error: str | None,
) -> None:
    cap = capture(registry=REGISTRY, options=IntentOptions(in_thread=False))
    with cap:
        span = cap.tracer.start_span(name, attributes=start_attrs)
        span.set_attributes(end_attrs)
        for event_name, event_attrs in span_events:
            span.add_event(event_name, event_attrs)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end()
        exported = cap.spans()
        cap.assert_no_internal_errors()
        assert len(exported) == 1
        encode_spans(exported).SerializeToString()  # a lone surrogate would raise here


@settings(max_examples=120, deadline=None)
@given(name=text, attrs=attributes(), span_events=events, code=st.sampled_from([0, 1, 2]))
def test_derive_call_only_ever_raises_redaction_errors(
    name: str, attrs: dict[str, Any], span_events: list[tuple[str, dict[str, Any]]], code: int
) -> None:
    from tracing.derive._conventions import EventView

    view = SpanView(
        name=name,
        attributes=attrs,
        events=tuple(EventView(n, a) for n, a in span_events),
        status_code=code,
        trace_id="1" * 32,
        span_id="2" * 16,
    )
    try:
        derived = derive_call(view, policy=RedactionPolicy.default(), registry=REGISTRY)
    except RedactionError:
        return
    if derived is not None:
        derived.name.encode("utf-8")
        assert derived.anchor["status"] in {"success", "error", "cancelled", "background"}
