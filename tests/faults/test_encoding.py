"""The app's own spans (not tool spans) with a lone surrogate where the OTLP encoder meets it:
a status description, an event name, an attribute, a span name. One such span used to fail
the encoding of its whole batch (every span in it lost); they are repaired before export, as
tool spans are. Real OTLP/HTTP protobuf bytes over loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

from tests.support.otlp_receiver import OtlpReceiver
from tracing import IntentOptions, IntentSpanProcessor, session, tool_call


@pytest.fixture
def rx() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.mark.parametrize("in_thread", [True, False])
def test_app_spans_with_lone_surrogates_do_not_break_their_batch(
    rx: OtlpReceiver, in_thread: bool
) -> None:
    provider = TracerProvider()
    batch = BatchSpanProcessor(
        OTLPSpanExporter(endpoint=rx.traces_url),
        max_export_batch_size=512,
        schedule_delay_millis=60_000,
    )
    provider.add_span_processor(
        IntentSpanProcessor(batch, options=IntentOptions(in_thread=in_thread))
    )
    tracer = provider.get_tracer("app")
    with session("conv-enc"):
        for i in range(5):
            with tracer.start_as_current_span(f"step {i}"):
                pass
        with tracer.start_as_current_span("failing step") as span:
            span.set_status(Status(StatusCode.ERROR, "bad byte \udcff in the reply"))
        with tracer.start_as_current_span("evented step") as span:
            span.add_event("chunk \ud800", {"text": "half \udc00 pair"})
        with tracer.start_as_current_span("named \udfff step") as span:
            span.set_attribute("app.note \ud801", "value")
        with tool_call("search", {"intent": "Searching \ud800 odd"}, tracer=tracer):
            pass
    assert provider.force_flush(30_000)
    spans = {s.name: s for s in rx.wait_for_spans(9, timeout=30)}
    provider.shutdown()
    assert not rx.errors
    assert {f"step {i}" for i in range(5)} <= set(spans)
    assert spans["failing step"].status_message == "bad byte ? in the reply"
    (event,) = spans["evented step"].events
    assert (event.name, event.attributes["text"]) == ("chunk ?", "half ? pair")
    assert spans["named ? step"].attributes["app.note ?"] == "value"
    assert "execute_tool search" in spans
