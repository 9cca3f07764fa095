"""A Langfuse server reached by plain OTLP: marked (``langfuse_otlp=True``) or detected by its
endpoint path, it gets the copy shaped for Langfuse; any other OTLP destination gets a copy that
adds no GenAI key (``gen_ai.tool.name``, ``gen_ai.operation.name``, ``gen_ai.tool.call.id``,
``gen_ai.conversation.id``) the original span did not have. Real OTLP bytes over loopback."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider

from tests.support.otlp_receiver import OtlpReceiver
from tracing import IntentRegistry, configure
from tracing import attributes as A
from tracing.otel._setup import is_langfuse_endpoint

REGISTRY = IntentRegistry(["search_code"])
INTENT = "Searching for OAuth handling"


def _export(endpoint: str, *, langfuse_otlp: bool | None = None) -> None:
    setup = configure(
        otlp=endpoint,
        langfuse_otlp=langfuse_otlp,
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        registry=REGISTRY,
    )
    tracer = setup.provider.get_tracer("app")
    # an OpenInference tool span: no gen_ai.* attribute of its own
    with tracer.start_as_current_span(
        "search_code",
        attributes={
            A.OPENINFERENCE_SPAN_KIND: A.OPENINFERENCE_TOOL,
            A.OI_TOOL_NAME: "search_code",
            A.OI_INPUT_VALUE: json.dumps({"intent": INTENT, "q": "oauth"}),
            A.OI_TOOL_CALL_ID: "call-oi-1",
            A.SESSION_ID: "conv-1",
        },
    ):
        pass
    setup.force_flush()
    setup.shutdown()


GAINED = (
    A.GEN_AI_TOOL_NAME,
    A.GEN_AI_OPERATION_NAME,
    A.GEN_AI_TOOL_CALL_ID,
    A.GEN_AI_CONVERSATION_ID,
)


def test_a_plain_otlp_destination_gets_no_invented_genai_keys() -> None:
    with OtlpReceiver() as rx:
        _export(rx.traces_url)
        (span,) = rx.wait_for_spans(1)
    assert span.name == INTENT
    assert [k for k in GAINED if k in span.attributes] == []
    assert not [k for k in span.attributes if k.startswith("gen_ai.")]
    assert span.attributes[A.OI_TOOL_CALL_ID] == "call-oi-1"  # its own keys, as they were
    assert A.LANGFUSE_OBSERVATION_TYPE not in span.attributes
    assert span.attributes[A.TOOL_NAME] == "search_code"  # ours say which tool it was


@pytest.mark.parametrize("detected", [True, False])
def test_a_langfuse_otlp_destination_gets_the_langfuse_copy(detected: bool) -> None:
    with OtlpReceiver() as rx:
        if detected:
            _export(f"{rx.url}/api/public/otel/v1/traces")
        else:
            _export(f"{rx.url}/collector/v1/traces", langfuse_otlp=True)
        (span,) = rx.wait_for_spans(1)
    # the server's mapping: the name (no gen_ai.tool.name to name it by), TOOL, the session
    assert span.name == INTENT
    assert A.GEN_AI_TOOL_NAME not in span.attributes
    assert span.attributes[A.LANGFUSE_OBSERVATION_TYPE] == A.LANGFUSE_TOOL
    assert span.attributes[A.SESSION_ID] == "conv-1"
    assert span.attributes[A.GEN_AI_OPERATION_NAME] == A.GEN_AI_EXECUTE_TOOL
    assert span.attributes[A.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert span.attributes[A.GEN_AI_TOOL_CALL_ID] == "call-oi-1"
    assert A.DEFAULT_LANGFUSE_TAG in span.attributes[A.LANGFUSE_TRACE_TAGS]


def test_marking_off_wins_over_the_path() -> None:
    with OtlpReceiver() as rx:
        _export(f"{rx.url}/api/public/otel/v1/traces", langfuse_otlp=False)
        (span,) = rx.wait_for_spans(1)
    assert A.LANGFUSE_OBSERVATION_TYPE not in span.attributes


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("https://cloud.langfuse.com/api/public/otel/v1/traces", True),
        ("https://cloud.langfuse.com/api/public/otel", True),
        ("http://collector:4318/v1/traces", False),
        ("http://api-public-otel:4318/v1/traces", False),
        ("", False),
        (None, False),
    ],
)
def test_langfuse_endpoint_detection(endpoint: str | None, expected: bool) -> None:
    assert is_langfuse_endpoint(endpoint) is expected
