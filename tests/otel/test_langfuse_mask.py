"""The Langfuse adapters with the real Langfuse SDK (v5). No server: Langfuse's `span_exporter=`
hook hands its export batches (after `mask_otel_spans`) to an in-memory exporter."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from langfuse import Langfuse
from langfuse.types import MaskOtelSpansResult
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redaction import AgentOverlay, RedactionPolicy, ToolRule
from tracing.otel import langfuse_span_mask

OPENAI = "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBaZyX"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
POLICY = RedactionPolicy(
    tools=(ToolRule("db_*", args="redact"),),
    agents=(AgentOverlay("billing", output="redact"),),
)


class Client:
    def __init__(self, policy: RedactionPolicy) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.langfuse = Langfuse(
            public_key=f"pk-lf-test-{uuid.uuid4().hex}",
            secret_key="sk-lf-test",
            base_url="http://127.0.0.1:9",
            tracer_provider=self.provider,
            span_exporter=self.exporter,
            mask=policy.langfuse_mask,
            mask_otel_spans=langfuse_span_mask(policy),
            flush_at=1000,
        )

    def spans(self) -> dict[str, ReadableSpan]:
        self.langfuse.flush()
        return {s.name: s for s in self.exporter.get_finished_spans()}


@pytest.fixture
def client() -> Iterator[Client]:
    c = Client(POLICY)
    yield c
    c.langfuse.shutdown()
    c.provider.shutdown()


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_mask_scrubs_langfuse_api_data(client: Client) -> None:
    obs = client.langfuse.start_observation(
        name="search",
        as_type="tool",
        input={"query": "oauth", "api_key": "abc123", "note": f"use {OPENAI}"},
        metadata={"source": "test", "auth": f"Bearer {JWT}"},
    )
    obs.update(output={"result": f"token was {JWT}"})
    obs.end()
    attrs = _attrs(client.spans()["search"])
    text = json.dumps(attrs)
    assert OPENAI not in text and JWT not in text and "abc123" not in text
    assert json.loads(attrs["langfuse.observation.input"]) == {
        "query": "oauth",
        "api_key": "[redacted:key:api_key]",
        "note": "use [redacted:openai_key]",
    }
    assert json.loads(attrs["langfuse.observation.output"]) == {
        "result": "token was [redacted:jwt]"
    }


def _tool_span(client: Client, name: str, tool: str, attrs: dict[str, Any]) -> None:
    tracer = client.provider.get_tracer("third.party.instrumentation")
    with tracer.start_as_current_span(name) as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", tool)
        for k, v in attrs.items():
            span.set_attribute(k, v)


def test_mask_otel_spans_applies_policy_to_third_party_tool_spans(client: Client) -> None:
    common = {
        "gen_ai.tool.call.result": json.dumps({"rows": 3, "dsn": "postgresql://u:pw12345678@db/x"}),
        "intentrace.intent": "Looking up invoices for bob",
        "intentrace.outcome": "Found 3 invoices for bob",
        "intentrace.label": "Looking up invoices for bob",
        "intentrace.outcome_patch": json.dumps({"from": "Looking up", "to": "Found"}),
        "http.request.header.authorization": f"Bearer {JWT}",
        "gen_ai.usage.input_tokens": 31,
        "tags": ("a", f"key {OPENAI}"),
    }
    _tool_span(
        client,
        "execute_tool db_query",
        "db_query",
        {"gen_ai.tool.call.arguments": json.dumps({"sql": "select 1", "who": "bob"}), **common},
    )
    _tool_span(
        client,
        "execute_tool search",
        "search",
        {
            "gen_ai.tool.call.arguments": json.dumps({"q": "invoices", "token": "t0ps3cr3t"}),
            **common,
        },
    )
    spans = client.spans()
    hidden = _attrs(spans["execute_tool db_query"])
    shown = _attrs(spans["execute_tool search"])

    # args redacted by the tool rule -> intent and outcome attributes are gone too
    assert hidden["gen_ai.tool.call.arguments"] == "[redacted:policy]"
    for key in ("intent", "outcome", "label", "outcome_patch"):
        assert f"intentrace.{key}" not in hidden
    # kept args are scrubbed; intent and outcome stay
    assert json.loads(shown["gen_ai.tool.call.arguments"]) == {
        "q": "invoices",
        "token": "[redacted:key:token]",
    }
    assert shown["intentrace.intent"] == "Looking up invoices for bob"
    assert shown["intentrace.outcome"] == "Found 3 invoices for bob"
    assert shown["intentrace.label"] == "Looking up invoices for bob"
    for attrs in (hidden, shown):
        assert attrs["http.request.header.authorization"] == "[redacted:key:auth]"
        assert attrs["gen_ai.usage.input_tokens"] == 31
        assert attrs["tags"] == ("a", "key [redacted:openai_key]")
        assert "pw12345678" not in attrs["gen_ai.tool.call.result"]
        assert JWT not in json.dumps(attrs) and OPENAI not in json.dumps(attrs)


def test_mask_otel_spans_agent_overlay(client: Client) -> None:
    _tool_span(
        client,
        "execute_tool search",
        "search",
        {
            "gen_ai.agent.name": "billing",
            "gen_ai.tool.call.arguments": '{"q": "x"}',
            "gen_ai.tool.call.result": '{"n": 1}',
            "intentrace.intent": "Searching for x",
            "intentrace.outcome": "Found one x",
        },
    )
    attrs = _attrs(client.spans()["execute_tool search"])
    assert attrs["gen_ai.tool.call.arguments"] == '{"q": "x"}'
    assert attrs["gen_ai.tool.call.result"] == "[redacted:policy]"
    assert attrs["intentrace.intent"] == "Searching for x"
    assert "intentrace.outcome" not in attrs


def test_mask_otel_spans_reads_our_own_attributes(client: Client) -> None:
    tracer = client.provider.get_tracer("intentrace")
    with tracer.start_as_current_span("Looking up invoices") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("intentrace.tool.name", "search")
        span.set_attribute("intentrace.agent.id", "billing")
        span.set_attribute("gen_ai.tool.call.result", '{"n": 1}')
        span.set_attribute("intentrace.outcome", "Found one invoice")
    attrs = _attrs(client.spans()["Looking up invoices"])
    assert attrs["gen_ai.tool.call.result"] == "[redacted:policy]"
    assert "intentrace.outcome" not in attrs


def test_a_span_that_cannot_be_scrubbed_is_replaced_not_exported_raw(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("scrubber broke")

    monkeypatch.setattr(POLICY.scrubber, "scrub", boom)
    _tool_span(client, "execute_tool search", "search", {"note": f"key {OPENAI}", "n": 7})
    attrs = _attrs(client.spans()["execute_tool search"])
    assert attrs["note"] == "[redacted:error]"
    assert attrs["gen_ai.tool.name"] == "[redacted:error]"
    assert attrs["n"] == 7


def test_mask_otel_spans_never_raises() -> None:
    class Broken:
        def items(self) -> Any:
            raise RuntimeError("broken batch")

    result = langfuse_span_mask(POLICY)(params=SimpleNamespace(spans=Broken()))
    # not a MaskOtelSpansResult: Langfuse drops the batch (fail closed) and logs it
    assert not isinstance(result, MaskOtelSpansResult)


def test_langfuse_mask_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("scrubber broke")

    policy = RedactionPolicy()
    monkeypatch.setattr(policy.scrubber, "scrub", boom)
    assert policy.langfuse_mask(data={"q": OPENAI}) == "[redacted:error]"
