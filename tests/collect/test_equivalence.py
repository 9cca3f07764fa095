"""The receiver makes the anchors the in-process processor makes, for the same spans.

The same agent run is emitted twice with the same ids and clock: once through
``IntentSpanProcessor`` (its ledger writes are the reference), once by an app with no processor
at all, whose spans reach ``intentrace collect`` over loopback HTTP — protobuf from the real
``OTLPSpanExporter`` (plain and gzip), OTLP/JSON (plain and gzip), one request per span
(children before their parents) or batched. A third run sends the processor's own shaped
exports to the receiver. Every anchor must match, field for field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
)

from tests.collect import scenarios
from tests.collect.conftest import Collected
from tests.support.wire import JsonExporter
from tracing.testing import (
    FakeClock,
    RecordingLedger,
    SequentialIdGenerator,
    capture,
    deterministic_clock,
)


def reference() -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Anchors and activity labels written by the in-process processor."""
    cap = capture(policy=scenarios.POLICY, registry=scenarios.registry())
    with cap, deterministic_clock(FakeClock()):
        scenarios.run(cap.tracer)
        anchors = cap.calls()
        cap.assert_no_internal_errors()
    return anchors, cap.ledger.activities


def emit_plain(exporter: SpanExporter, *, batched: bool) -> None:
    """The same run from an app without our processor (same ids, same clock)."""
    provider = TracerProvider(id_generator=SequentialIdGenerator())
    processor = BatchSpanProcessor(exporter) if batched else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    with deterministic_clock(FakeClock()):
        scenarios.run(provider.get_tracer("tests"))
    provider.force_flush()
    provider.shutdown()


EXPORTERS: dict[str, Callable[[str], SpanExporter]] = {
    "protobuf": lambda url: OTLPSpanExporter(endpoint=url),
    "protobuf-gzip": lambda url: OTLPSpanExporter(endpoint=url, compression=Compression.Gzip),
    "json": JsonExporter,
    "json-gzip": lambda url: JsonExporter(url, gzip_body=True),
}


def test_reference_covers_the_cases() -> None:
    anchors, activities = reference()
    statuses = {a["status"] for a in anchors.values()}
    assert statuses == {"success", "error", "cancelled"}
    assert anchors["call_learned"]["intent"] == "Looking up the refund policy"
    assert anchors["call_p2"]["intent"] == "Looking up invoice 2"
    assert anchors["call_p1"]["intent"] == "Looking up invoice 1"
    assert any(a["parent_call_id"] for a in anchors.values())
    assert activities and activities[0]["label"] == "Exploring the auth flow"


@pytest.mark.parametrize("batched", [False, True], ids=["span-per-request", "batched"])
@pytest.mark.parametrize("transport", sorted(EXPORTERS))
def test_same_anchors_as_the_processor(collected: Collected, transport: str, batched: bool) -> None:
    expected, activities = reference()
    emit_plain(EXPORTERS[transport](collected.url), batched=batched)
    got = collected.ledger.calls()
    assert sorted(got) == sorted(expected)
    for call_id, anchor in expected.items():
        assert got[call_id] == anchor, call_id
    assert collected.ledger.activities == activities
    stats = collected.feed.stats()
    assert stats["rejected"] == 0
    if not batched:  # children arrived before their parents: resolved when the parents came
        assert stats["resolved_late"] >= 3


def test_shaped_exports_of_the_processor_give_the_same_anchors(collected: Collected) -> None:
    """An app with our processor exporting OTLP to ``collect`` (no database access)."""
    inner = RecordingLedger()
    cap = capture(
        policy=scenarios.POLICY,
        registry=scenarios.registry(),
        ledger=inner,
        processors=[SimpleSpanProcessor(OTLPSpanExporter(endpoint=collected.url))],
    )
    with cap, deterministic_clock(FakeClock()):
        scenarios.run(cap.tracer)
        expected = cap.calls()
        cap.assert_no_internal_errors()
    got = collected.ledger.calls()
    assert sorted(got) == sorted(expected)
    for call_id, anchor in expected.items():
        assert got[call_id] == anchor, call_id
