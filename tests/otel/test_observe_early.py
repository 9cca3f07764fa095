"""Langfuse ``@observe(as_type="tool")`` sets its args just after the span starts: the processor
reads the span again then, so the live span carries its label (and the in-flight anchor is
written) before the tool body runs, inline (``in_thread=False``) and in the processor's thread.
Real Langfuse SDK, in-memory exporter."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langfuse import observe
from langfuse._client.resource_manager import LangfuseResourceManager
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing import IntentOptions, IntentRegistry, configure
from tracing.otel import _langfuse
from tracing.testing import RecordingLedger

REGISTRY = IntentRegistry(["lookup_customer"])
SEEN: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def no_langfuse_clients() -> Iterator[None]:
    LangfuseResourceManager.reset()
    _langfuse._warned.clear()
    yield
    LangfuseResourceManager.reset()
    _langfuse._warned.clear()


def _live_name(deadline_s: float) -> str:
    """The current span's name, once the processor renamed it (or as it is at the deadline)."""
    span: Any = trace.get_current_span()
    end = time.monotonic() + deadline_s
    while span.name == "lookup_customer" and time.monotonic() < end:
        time.sleep(0.01)  # (the processor's thread renames it moments after start)
    return str(span.name)


@observe(as_type="tool")
def lookup_customer(intent: str, customer: str, *, wait_s: float = 0.0) -> dict[str, str]:
    SEEN["name"] = _live_name(wait_s)
    SEEN["anchors"] = [dict(w) for w in SEEN["ledger"].writes]
    return {"customer": customer, "outcome": f"Found {customer}"}


@pytest.mark.parametrize("in_thread", [False, True], ids=["inline", "thread"])
def test_observe_tool_span_is_named_live_before_its_body_runs(in_thread: bool) -> None:
    exporter = InMemorySpanExporter()
    ledger = RecordingLedger()
    SEEN.clear()
    SEEN["ledger"] = ledger
    setup = configure(
        langfuse={
            "public_key": f"pk-lf-{uuid.uuid4().hex[:12]}", "secret_key": "sk-lf-test",
            "base_url": "http://127.0.0.1:9", "span_exporter": exporter, "flush_at": 1000,
        },
        provider=TracerProvider(), set_global=False, ledger=ledger, registry=REGISTRY,
        options=IntentOptions(in_thread=in_thread),
    )  # fmt: skip
    lookup_customer("Looking up the customer", "cust-1", wait_s=0.0 if not in_thread else 5.0)
    assert setup.langfuse is not None
    setup.langfuse.flush()
    setup.force_flush()
    setup.shutdown()
    # inline: the label from the instant @observe set the args (no wait at all)
    assert SEEN["name"] == "Looking up the customer"
    (in_flight,) = [a for a in SEEN["anchors"] if a.get("status") == "running"] or SEEN["anchors"]
    assert in_flight["intent"] == "Looking up the customer"
    assert in_flight["tool_name"] == "lookup_customer"
    assert setup.processor.stats()["named_at_start"] == 1
    assert setup.processor.stats()["tool_spans_started"] == 1  # read again once, counted once
    (span,) = [
        s
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get("langfuse.observation.type") == "tool"
    ]
    assert span.name == "Found cust-1"


def test_observe_spans_that_are_not_tools_are_left_alone() -> None:
    exporter = InMemorySpanExporter()
    setup = configure(
        langfuse={
            "public_key": f"pk-lf-{uuid.uuid4().hex[:12]}", "secret_key": "sk-lf-test",
            "base_url": "http://127.0.0.1:9", "span_exporter": exporter, "flush_at": 1000,
        },
        provider=TracerProvider(), set_global=False, ledger=False, registry=REGISTRY,
        options=IntentOptions(in_thread=False),
    )  # fmt: skip

    @observe()
    def plan(step: str) -> str:
        span: Any = trace.get_current_span()
        assert "set_attributes" not in vars(span)  # no longer watched
        return step

    plan("first")
    assert setup.langfuse is not None
    setup.langfuse.flush()
    setup.shutdown()
    assert [s.name for s in exporter.get_finished_spans()] == ["plan"]
    assert setup.processor.stats().get("tool_spans_started", 0) == 0
