"""An agent instrumented the way users do it: ``configure`` with a ledger and a registry of
its own, on a provider of its own (not the global one), the processor inline."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from tracing import IntentOptions, IntentRegistry, TracingSetup, configure
from tracing.anchor import LedgerSink


def instrumented(ledger: LedgerSink, *tools: str) -> TracingSetup:
    """``configure`` writing ``ledger``, with ``tools`` label-bearing."""
    return configure(
        provider=TracerProvider(),
        set_global=False,
        ledger=ledger,
        registry=IntentRegistry(tools),
        options=IntentOptions(in_thread=False),
    )
