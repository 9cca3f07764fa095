"""Real wire formats: OTLP/HTTP protobuf to a loopback receiver, and the real Langfuse SDK v5
exporting to the same receiver (``base_url``), judged by the Langfuse server's own rules."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.support.langfuse_server import langfuse_name, langfuse_session, langfuse_type
from tests.support.otlp_receiver import OtlpReceiver
from tracing import IntentSpanProcessor, configure, session, tool_call
from tracing import attributes as A

SECRET = "sk-live-0123456789abcdefghijklmnopqrstuv"
LANGFUSE_PATH = "/api/public/otel/v1/traces"


@pytest.fixture
def rx() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


def _calls(tracer: Any) -> None:
    with session("conv-wire", agent_id="coder", turn=1):
        with tool_call(
            "search_code",
            {"intent": "Searching for OAuth handling", "api_key": SECRET},
            tracer=tracer,
            call_id="call_1",
            label_bearing=True,
        ) as c:
            c.set_result({"hits": 3, "log": f"used {SECRET}"}, outcome="Found 3 OAuth handlers")
        with (
            pytest.raises(PermissionError),
            tool_call(
                "read_file",
                {"intent": "Reading the vault config"},
                tracer=tracer,
                call_id="call_2",
                label_bearing=True,
            ),
        ):
            raise PermissionError(f"denied, token {SECRET}")
        with tool_call("list_dir", {"path": "/src"}, tracer=tracer, call_id="call_3"):
            pass


def test_otlp_http_wire(rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.traces_url)
    setup = configure(otlp=True, provider=TracerProvider(), set_global=False, ledger=False)
    _calls(setup.provider.get_tracer("app"))
    assert setup.force_flush()
    spans = {s.attributes[A.GEN_AI_TOOL_CALL_ID]: s for s in rx.wait_for_spans(3)}
    setup.shutdown()
    assert spans["call_1"].name == "Found 3 OAuth handlers"
    assert spans["call_2"].name == "Reading the vault config · failed"
    assert spans["call_3"].name == "execute_tool list_dir"
    one = spans["call_1"].attributes
    assert one[A.GEN_AI_TOOL_NAME] == "search_code"  # plain OTLP keeps the semconv name
    assert one[A.INTENT] == "Searching for OAuth handling"
    assert one[A.OUTCOME] == "Found 3 OAuth handlers"
    assert one[A.ORIGINAL_NAME] == "execute_tool search_code"
    assert one[A.GEN_AI_CONVERSATION_ID] == "conv-wire"
    assert spans["call_2"].status_code == 2
    assert spans["call_2"].events[0].name == "exception"
    assert all(s.path == "/v1/traces" for s in spans.values())
    assert SECRET.encode() not in b"".join(r.body for r in rx.requests)


# -- the Langfuse server's rules: tests/support/langfuse_server.py --


def _langfuse_kwargs(rx: OtlpReceiver) -> dict[str, Any]:
    key = uuid.uuid4().hex[:12]
    return {
        "public_key": f"pk-lf-{key}",
        "secret_key": f"sk-lf-{key}",
        "base_url": rx.url,
        "flush_interval": 0.1,
    }


def test_langfuse_sdk_wire(rx: OtlpReceiver) -> None:
    setup = configure(
        langfuse=_langfuse_kwargs(rx), provider=TracerProvider(), set_global=False, ledger=False
    )
    try:
        tracer = setup.provider.get_tracer("app")
        with tracer.start_as_current_span("request handler"):  # no gen_ai.*: filtered out
            _calls(tracer)
        assert setup.force_flush()
        spans = {
            s.attributes[A.GEN_AI_TOOL_CALL_ID]: s for s in rx.wait_for_spans(3, path=LANGFUSE_PATH)
        }
    finally:
        setup.langfuse.shutdown()  # pyright: ignore[reportOptionalMemberAccess]
        setup.shutdown()
    assert "request handler" not in {s.name for s in rx.spans()}  # the SDK's default filter
    assert langfuse_name(spans["call_1"]) == "Found 3 OAuth handlers"
    assert langfuse_name(spans["call_2"]) == "Reading the vault config · failed"
    assert langfuse_name(spans["call_3"]) == "list_dir"  # no intent: today's name
    for span in spans.values():
        assert langfuse_type(span) == "TOOL"
        assert langfuse_session(span.attributes) == "conv-wire"
    assert spans["call_1"].attributes[A.LANGFUSE_TRACE_TAGS] == ["tool-intent"]
    assert A.LANGFUSE_TRACE_TAGS not in spans["call_3"].attributes
    assert spans["call_1"].attributes[A.TOOL_NAME] == "search_code"
    headers = rx.requests[0].headers
    assert headers["authorization"].startswith("Basic ")
    assert SECRET.encode() not in b"".join(r.body for r in rx.requests)


def test_both_destinations_and_an_existing_provider(
    rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the app configured its provider (with an OTLP exporter) before us
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=rx.traces_url)))
    setup = configure(
        provider=provider, langfuse=_langfuse_kwargs(rx), set_global=False, ledger=False
    )
    try:
        assert isinstance(provider._active_span_processor._span_processors[0], IntentSpanProcessor)
        assert len(setup.processor.processors) == 2  # the app's exporter + Langfuse's
        _calls(provider.get_tracer("app"))
        assert setup.force_flush()
        otlp = {
            s.attributes[A.GEN_AI_TOOL_CALL_ID]: s for s in rx.wait_for_spans(3, path="/v1/traces")
        }
        lf = {
            s.attributes[A.GEN_AI_TOOL_CALL_ID]: s for s in rx.wait_for_spans(3, path=LANGFUSE_PATH)
        }
    finally:
        setup.langfuse.shutdown()  # pyright: ignore[reportOptionalMemberAccess]
        setup.shutdown()
    assert otlp["call_1"].name == lf["call_1"].name == "Found 3 OAuth handlers"
    assert otlp["call_1"].attributes[A.GEN_AI_TOOL_NAME] == "search_code"
    assert A.GEN_AI_TOOL_NAME not in lf["call_1"].attributes
    assert langfuse_name(lf["call_1"]) == "Found 3 OAuth handlers"


def test_langfuse_own_tool_observations_are_named_and_redacted(rx: OtlpReceiver) -> None:
    from redaction import RedactionPolicy
    from tracing import IntentRegistry

    policy = RedactionPolicy.from_toml('[tools.vault_read]\nargs = "redact"\n')
    setup = configure(
        langfuse=_langfuse_kwargs(rx),
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        policy=policy,
        registry=IntentRegistry(["lookup", "vault_read"]),
    )
    client = setup.langfuse
    assert client is not None
    try:
        with client.start_as_current_observation(
            name="lookup",
            as_type="tool",
            input={"intent": "Looking up the customer", "api_key": SECRET},
        ) as obs:
            obs.update(output={"found": True, "token": SECRET})
        with client.start_as_current_observation(
            name="vault_read",
            as_type="tool",
            input={"intent": "Reading prod secrets from the vault", "path": "/prod/db"},
        ) as obs:
            obs.update(output="ok")
        assert setup.force_flush()
        spans = {s.attributes[A.TOOL_NAME]: s for s in rx.wait_for_spans(2, path=LANGFUSE_PATH)}
    finally:
        client.shutdown()
        setup.shutdown()
    lookup, vault = spans["lookup"], spans["vault_read"]
    assert langfuse_name(lookup) == "Looking up the customer"
    assert langfuse_type(lookup) == "TOOL"
    assert langfuse_name(vault) == "vault_read"  # args redacted: the intent is hidden too
    assert vault.attributes[A.LANGFUSE_OBSERVATION_INPUT] == "[redacted:policy]"
    assert A.INTENT not in vault.attributes
    body = b"".join(r.body for r in rx.requests)
    assert SECRET.encode() not in body
    assert b"prod secrets" not in body and b"/prod/db" not in body
