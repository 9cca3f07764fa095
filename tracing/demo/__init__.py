"""The demo: a simulated coding agent run through the real pipeline into a ledger.

No LLM and no network: a scripted agent, deterministic from a seed, makes its tool calls with
our own instrumentation on a ``TracerProvider`` set up by ``configure(...)``. ``intentrace demo``
and ``scripts/demo.sh`` run it; see docs/collect.md#the-demo.
"""

from __future__ import annotations

from tracing.demo._run import (
    DEFAULT_SEED,
    DEFAULT_SESSIONS,
    DEMO_POLICY,
    DEMO_TOOLS,
    DemoReport,
    narrative,
    run_demo,
    session_ids,
)

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_SESSIONS",
    "DEMO_POLICY",
    "DEMO_TOOLS",
    "DemoReport",
    "narrative",
    "run_demo",
    "session_ids",
]
