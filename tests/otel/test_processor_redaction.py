"""Every span through the processor is redacted, not only tool spans: model spans by the policy
of each call they list, activity labels, attribute names, events, status, links, resources;
and ``mask_otel_spans`` applies the same rule (tests/redaction/test_sink_matrix.py does it for
every path and sink; these are the cases one by one)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from langfuse import Langfuse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from redaction import RedactionError, RedactionPolicy, ToolRule
from tracing import IntentOptions, IntentRegistry, IntentSpanProcessor, activity, tool_call
from tracing import attributes as A
from tracing.derive._redact import trace_redactor
from tracing.otel import langfuse_span_mask
from tracing.otel._spans import Shaper
from tracing.testing import capture

AWS = "AKIAIOSFODNN7EXAMPLE"
GHP = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
CARD = "4111111111111111"
SECRET_WORD = "zebraquartz"  # the data of a tool whose policy hides it
POLICY = RedactionPolicy(tools=(ToolRule("vault_read", args="redact", output="redact"),))


def _chat(tracer: Any, **attrs: Any) -> None:
    outputs = [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "vault_read",
                    "arguments": {"intent": f"Reading the {SECRET_WORD} entry"},
                },
                {"type": "tool_call", "id": "c2", "name": "search", "arguments": {"q": AWS}},
            ],
        }
    ]
    inputs = [
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "c0", "response": f"{SECRET_WORD} result"}
            ],
        }
    ]
    with tracer.start_as_current_span(
        "chat m",
        attributes={
            A.GEN_AI_OPERATION_NAME: "chat",
            A.GEN_AI_REQUEST_MODEL: "m",
            A.GEN_AI_OUTPUT_MESSAGES: json.dumps(outputs),
            "gen_ai.input.messages": json.dumps(inputs),
            **attrs,
        },
    ) as span:
        span.add_event("exception", {"exception.message": f"retry with {GHP}"})
        span.set_status(Status(StatusCode.ERROR, f"model failed: {AWS}"))


def test_model_spans_get_each_listed_calls_policy_and_are_scrubbed() -> None:
    with capture(policy=POLICY) as cap:
        _chat(cap.tracer, **{"app.request.password": "hunter2", f"note.{GHP}": "x"})
        (span,) = cap.dicts()
    attrs = span["attributes"]
    assert SECRET_WORD not in json.dumps(span)
    out = json.loads(attrs[A.GEN_AI_OUTPUT_MESSAGES])[0]["parts"]
    assert out[0]["arguments"] == "[redacted:policy]"
    assert out[1]["arguments"] == {"q": "[redacted:aws_access_key]"}  # kept, scrubbed
    # the result of a call the span does not list, of a policy that hides some results
    assert json.loads(attrs["gen_ai.input.messages"])[0]["parts"][0]["response"] == (
        "[redacted:policy]"
    )
    assert attrs["app.request.password"] == "[redacted:key:password]"
    assert not any(GHP in key for key in attrs)
    assert (
        span["events"][0]["attributes"]["exception.message"] == "retry with [redacted:github_token]"
    )
    assert span["status_message"] == "model failed: [redacted:aws_access_key]"
    cap.assert_no_internal_errors()


def test_a_result_is_matched_to_its_call_by_id_across_spans() -> None:
    policy = RedactionPolicy(tools=(ToolRule("vault_read", output="redact"),))
    with capture(policy=policy) as cap:
        tracer = cap.tracer
        with tracer.start_as_current_span("turn"):
            for response, name in ((f"{SECRET_WORD} A", "vault_read"), ("plain B", "search")):
                call_id = f"id-{name}"
                first = [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "tool_call", "id": call_id, "name": name, "arguments": {}}
                        ],
                    }
                ]
                second = [
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": call_id, "response": response}
                        ],
                    }
                ]
                with tracer.start_as_current_span(
                    "chat", attributes={A.GEN_AI_OUTPUT_MESSAGES: json.dumps(first)}
                ):
                    pass
                with tracer.start_as_current_span(
                    "chat", attributes={"gen_ai.input.messages": json.dumps(second)}
                ):
                    pass
        text = json.dumps(cap.dicts())
    assert SECRET_WORD not in text
    assert "plain B" in text  # a kept tool's result, known by its id from the earlier span


def test_activity_labels_are_scrubbed_in_name_and_attribute() -> None:
    with capture() as cap:
        with activity(f"Checking {AWS} and card {CARD}", tracer=cap.tracer):
            pass
        (span,) = cap.dicts()
    assert span["name"] == "Checking [redacted:aws_access_key] and card [redacted:credit_card]"
    assert span["attributes"][A.ACTIVITY] == span["name"]


def test_attribute_names_one_rule_on_every_span() -> None:
    attrs = {
        "app.request.password": "hunter2",
        "http.request.header.cookie": "a=b",
        "n": 3,
        f"app.note.{CARD}": "on",
        "auth.enabled": True,
    }
    with capture(registry=IntentRegistry(["search"])) as cap:
        with cap.tracer.start_as_current_span("plain", attributes=attrs):
            pass
        with tool_call("search", {"q": "x"}, tracer=cap.tracer, attributes=attrs):
            pass
        plain, tool = cap.dicts()
    for span in (plain, tool):
        got = span["attributes"]
        assert got["app.request.password"] == "[redacted:key:password]"
        assert got["http.request.header.cookie"] == "[redacted:key:cookie]"
        assert got["n"] == 3 and got["auth.enabled"] is True
        assert "app.note.[redacted:credit_card]" in got and f"app.note.{CARD}" not in got


def test_tool_names_that_hit_a_value_rule_are_scrubbed() -> None:
    with capture() as cap:
        with tool_call(GHP, {"q": 1}, tracer=cap.tracer, call_id="c1"):
            pass
        (span,) = cap.dicts()
        anchor = cap.calls()["c1"]
    assert GHP not in json.dumps(span) and GHP not in json.dumps(anchor)
    assert anchor["tool_name"] == "[redacted:github_token]"
    assert span["name"] == "execute_tool [redacted:github_token]"


def test_resources_and_links_are_scrubbed() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource({"service.name": "app", "process.command_args": ("app", "--key", GHP)})
    )
    provider.add_span_processor(
        IntentSpanProcessor(SimpleSpanProcessor(exporter), options=IntentOptions(in_thread=False))
    )
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("first") as first:
        pass
    link = Link(first.get_span_context(), {"note": f"from {AWS}"})
    with tracer.start_as_current_span("second", links=[link]):
        pass
    with tool_call("search", {"q": 1}, tracer=tracer):
        pass
    provider.shutdown()
    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    for span in spans:
        assert dict(span.resource.attributes)["process.command_args"] == (
            "app",
            "--key",
            "[redacted:github_token]",
        )
    assert spans[0].resource is spans[1].resource  # redacted once, shared (OTLP groups by it)
    assert dict(spans[1].links[0].attributes or {}) == {"note": "from [redacted:aws_access_key]"}


def test_clean_spans_are_forwarded_as_they_are() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("db", attributes={"db.system": "x"}):
        pass
    (span,) = exporter.get_finished_spans()
    shaper = Shaper(trace_redactor(RedactionPolicy()))
    assert shaper.plain(span) is span  # nothing to remove: no copy


class _Breaks:
    def __init__(self) -> None:
        self.real = RedactionPolicy()

    def redact_call(self, **kwargs: Any) -> Any:
        return self.real.redact_call(**kwargs)

    def scrub(self, value: Any) -> Any:
        if isinstance(value, dict) and "boom" in value:
            raise RedactionError("scrubbing failed: test")
        return self.real.scrub(value)

    def scrub_text(self, text: str) -> str:
        return self.real.scrub_text(text)


@pytest.mark.internal_errors
def test_a_span_that_cannot_be_redacted_is_dropped() -> None:
    with capture(policy=_Breaks()) as cap:
        with cap.tracer.start_as_current_span("plain", attributes={"boom": AWS}):
            pass
        with cap.tracer.start_as_current_span("fine"):
            pass
        names = [s.name for s in cap.spans()]
        assert names == ["fine"]
        assert cap.processor.stats()["dropped"] == 1


# -- the Langfuse hook: the same rule, keys from the conventions table ------------------------


def _langfuse(policy: RedactionPolicy) -> tuple[Langfuse, TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    client = Langfuse(
        public_key=f"pk-lf-{uuid.uuid4().hex}",
        secret_key="sk-lf-test",
        base_url="http://127.0.0.1:9",
        tracer_provider=provider,
        span_exporter=exporter,
        mask_otel_spans=langfuse_span_mask(policy),
        flush_at=1000,
    )
    return client, provider, exporter


@pytest.mark.parametrize(
    ("attrs", "args_key", "result_key"),
    [
        (
            {A.GEN_AI_TOOL_NAME: "vault_read"},
            A.PYDANTIC_AI_TOOL_ARGUMENTS,
            A.PYDANTIC_AI_TOOL_RESPONSE,
        ),
        (
            {A.OPENINFERENCE_SPAN_KIND: "TOOL", A.OI_TOOL_NAME: "vault_read"},
            A.OI_TOOL_CALL_FUNCTION_ARGUMENTS,
            A.OI_OUTPUT_VALUE,
        ),
        (
            {A.GEN_AI_OPERATION_NAME: "execute_tool", A.GEN_AI_TOOL_NAME: "vault_read"},
            A.GEN_AI_TOOL_CALL_ARGUMENTS,
            A.GEN_AI_TOOL_CALL_RESULT,
        ),
    ],
)
def test_mask_otel_spans_uses_the_processors_keys(
    attrs: dict[str, Any], args_key: str, result_key: str
) -> None:
    client, provider, exporter = _langfuse(POLICY)
    with provider.get_tracer("openinference.instrumentation.x").start_as_current_span(
        "tool",
        attributes={
            **attrs,
            args_key: json.dumps({"p": SECRET_WORD}),
            result_key: SECRET_WORD,
            "gen_ai.system": "x",
        },
    ):
        pass
    client.flush()
    (span,) = exporter.get_finished_spans()
    client.shutdown()
    provider.shutdown()
    got = dict(span.attributes or {})
    assert got[args_key] == got[result_key] == "[redacted:policy]"


def test_mask_otel_spans_redacts_model_spans_like_the_processor() -> None:
    client, provider, exporter = _langfuse(POLICY)
    _chat(
        provider.get_tracer("opentelemetry.instrumentation.openai"),
        **{"app.request.password": "hunter2"},
    )
    client.flush()
    (masked,) = exporter.get_finished_spans()
    client.shutdown()
    provider.shutdown()
    with capture(policy=POLICY) as cap:
        _chat(cap.tracer, **{"app.request.password": "hunter2"})
        (ours,) = cap.spans()
    assert SECRET_WORD not in json.dumps(dict(masked.attributes or {}))
    for key in (A.GEN_AI_OUTPUT_MESSAGES, "gen_ai.input.messages", "app.request.password"):
        assert _attr(masked, key) == _attr(ours, key), key


def _attr(span: ReadableSpan, key: str) -> Any:
    value: Any = (span.attributes or {})[key]
    try:
        return json.loads(value)  # (Langfuse re-encodes what it patches)
    except (TypeError, ValueError):
        return value


def test_configure_wires_both_langfuse_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracing import configure

    seen: dict[str, Any] = {}

    class Fake:
        def __init__(self, **kwargs: Any) -> None:
            seen.update(kwargs)

    monkeypatch.setattr("langfuse.Langfuse", Fake)
    setup = configure(
        langfuse={"public_key": "pk"},
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        policy=POLICY,
    )
    setup.shutdown()
    assert seen["mask"] == POLICY.langfuse_mask
    hook = seen["mask_otel_spans"]
    assert callable(hook) and hook.__qualname__.startswith("langfuse_span_mask")
