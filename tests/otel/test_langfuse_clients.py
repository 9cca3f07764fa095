"""Two Langfuse clients: ``configure(langfuse={...})`` beside an app's own client with other
keys makes the real Langfuse SDK skip every ``@observe`` call without a word. We say so once,
and the two supported ways (pass your client; create it after ``configure``) export the
``@observe`` tool spans named by their intent. Real Langfuse SDK, in-memory span exporters."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langfuse import Langfuse, observe
from langfuse._client.resource_manager import LangfuseResourceManager
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing import IntentRegistry, configure
from tracing.otel import _langfuse

REGISTRY = IntentRegistry(["lookup_customer"])
HINT = "configure(langfuse=<your Langfuse client>)"


@observe(as_type="tool")
def lookup_customer(intent: str, customer: str) -> dict[str, str]:
    return {"customer": customer, "outcome": f"Found {customer}"}


@pytest.fixture(autouse=True)
def no_langfuse_clients() -> Iterator[None]:
    """Each test starts with no Langfuse client in the process (the SDK keeps one per key)."""
    LangfuseResourceManager.reset()
    _langfuse._warned.clear()
    yield
    LangfuseResourceManager.reset()
    _langfuse._warned.clear()


def _client_args(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {
        "public_key": f"pk-lf-{uuid.uuid4().hex[:12]}",
        "secret_key": "sk-lf-test",
        "base_url": "http://127.0.0.1:9",
        "span_exporter": exporter,
        "flush_at": 1000,
    }


def _tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get("langfuse.observation.type") == "tool"
    ]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Langfuse: " in r.getMessage()]


def test_a_second_client_with_other_keys_skips_observe_and_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    app_exporter, our_exporter = InMemorySpanExporter(), InMemorySpanExporter()
    app = Langfuse(**_client_args(app_exporter), tracer_provider=provider)  # the app's own
    caplog.set_level(logging.WARNING, logger="tracing.langfuse")
    setup = configure(
        langfuse=_client_args(our_exporter), provider=provider, set_global=False,
        ledger=False, registry=REGISTRY,
    )  # fmt: skip
    lookup_customer("Looking up the customer", "cust-1")
    lookup_customer("Looking up the customer again", "cust-1")
    app.flush()
    assert setup.langfuse is not None
    setup.langfuse.flush()
    setup.shutdown()
    # what the SDK does: neither client exports the @observe calls (no error, no span)
    assert _tool_spans(app_exporter) == [] and _tool_spans(our_exporter) == []
    (message,) = _warnings(caplog)  # said once, naming the fix
    assert "2 clients with different public keys" in message and HINT in message
    assert "create it after configure(...)" in message


def test_passing_the_apps_client_exports_observe_named_by_intent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    app = Langfuse(**_client_args(exporter), tracer_provider=provider)
    caplog.set_level(logging.WARNING, logger="tracing.langfuse")
    setup = configure(
        langfuse=app, provider=provider, set_global=False, ledger=False, registry=REGISTRY
    )
    assert setup.langfuse is app
    lookup_customer("Looking up the customer", "cust-1")
    app.flush()
    setup.shutdown()
    (span,) = _tool_spans(exporter)
    assert span.name == "Found cust-1"
    assert _warnings(caplog) == []


def test_a_client_created_after_configure_exports_observe_named_by_intent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    caplog.set_level(logging.WARNING, logger="tracing.langfuse")
    setup = configure(provider=provider, set_global=False, ledger=False, registry=REGISTRY)
    exporter = InMemorySpanExporter()
    app = Langfuse(**_client_args(exporter), tracer_provider=provider)  # its processor: wrapped
    lookup_customer("Looking up the customer", "cust-1")
    app.flush()
    setup.shutdown()
    (span,) = _tool_spans(exporter)
    assert span.name == "Found cust-1"
    assert _warnings(caplog) == []


def test_a_second_client_made_after_configure_is_reported_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    caplog.set_level(logging.WARNING, logger="tracing.langfuse")
    setup = configure(
        langfuse=_client_args(InMemorySpanExporter()), provider=provider, set_global=False,
        ledger=False, registry=REGISTRY,
    )  # fmt: skip
    assert _warnings(caplog) == []
    Langfuse(**_client_args(InMemorySpanExporter()), tracer_provider=provider)
    Langfuse(**_client_args(InMemorySpanExporter()), tracer_provider=provider)
    setup.shutdown()
    (message,) = _warnings(caplog)  # once a process
    assert "2 clients" in message and HINT in message
