"""Sanitize at render, keep the text (§9.5): an intent is stored in full (redacted per policy,
control characters removed) up to ``INTENT_MAX_CHARS``; it is cut to ~120 characters only
where it is shown as a label (the span's name), never in the ledger, the span's attributes or
the call's detail."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.agent import instrumented
from tracing import INTENT_MAX_CHARS, LABEL_MAX_CHARS, TracingSetup, session, tool_call
from tracing import attributes as A
from tracing.ledger import Ledger, open_ledger

LONG = (
    "Searching the whole repository for every place where the OAuth callback handler is "
    "registered, including the legacy router, the plugin loader and the test fixtures, so "
    "that the redirect bug can be traced end to end"
)
TOKEN = "ghp_" + "a1B2c3D4e5" * 4


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[TracingSetup, Ledger, InMemorySpanExporter]]:
    ledger = open_ledger(f"sqlite:///{tmp_path}/full.db")
    setup = instrumented(ledger, "search_code")
    exporter = InMemorySpanExporter()
    setup.processor.add_processor(SimpleSpanProcessor(exporter))
    yield setup, ledger, exporter
    setup.shutdown()


def _run(setup: TracingSetup, intent: str, *, fail: bool = False) -> None:
    tracer = setup.provider.get_tracer("agent")
    with (
        session("s", tracer=tracer),
        tool_call("search_code", json.dumps({"intent": intent, "q": 1}), tracer=tracer) as c,
    ):
        if fail:
            c.fail("boom")
    assert setup.force_flush()


def test_a_long_intent_is_kept_whole_and_cut_only_as_a_name(
    traced: tuple[TracingSetup, Ledger, InMemorySpanExporter],
) -> None:
    setup, ledger, exporter = traced
    assert len(LONG) > 200
    _run(setup, LONG.replace("OAuth", "OAuth\x1b[31m\n"))  # control characters go, text stays
    (call,) = ledger.session_anchors("s")
    assert call["intent"] == LONG.replace("OAuth", "OAuth ").replace("  ", " ")
    assert call["label"] == call["intent"]
    assert json.loads(call["args"] or "{}") == {"q": 1}
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert attrs[A.INTENT] == call["intent"]
    assert len(span.name) <= LABEL_MAX_CHARS
    assert span.name.endswith("…")
    assert (call["intent"] or "").startswith(span.name[:-1])


def test_a_failed_call_keeps_its_framing_in_the_cut_name(
    traced: tuple[TracingSetup, Ledger, InMemorySpanExporter],
) -> None:
    setup, ledger, exporter = traced
    _run(setup, LONG, fail=True)
    (call,) = ledger.session_anchors("s")
    assert call["label"] == f"{LONG} · failed"
    (span,) = exporter.get_finished_spans()
    assert span.name.endswith("… · failed")
    assert len(span.name) <= LABEL_MAX_CHARS + len(" · failed")


def test_the_bound_and_redaction_apply_to_the_whole_text(
    traced: tuple[TracingSetup, Ledger, InMemorySpanExporter],
) -> None:
    setup, ledger, _ = traced
    huge = f"Checking the token {TOKEN} " + "and more " * 400
    _run(setup, huge)
    (call,) = ledger.session_anchors("s")
    intent = call["intent"] or ""
    assert len(intent) == INTENT_MAX_CHARS
    assert intent.endswith("…")
    assert TOKEN not in intent
    assert intent.startswith("Checking the token [redacted")
