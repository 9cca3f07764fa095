"""A simulated coding agent run through the real pipeline into the ledger (``intentrace demo``).

No LLM and no network: a scripted agent, deterministic from a seed, makes its tool calls with
our instrumentation (``session``, ``activity``, ``tool_call``) on a ``TracerProvider`` set up by
``configure(...)`` — so ``IntentSpanProcessor`` names, redacts and writes every call to the
ledger exactly as it would in an app (and exports OTLP too when ``OTEL_EXPORTER_OTLP_*`` is
set). Only the clock is simulated (``tracing.testing.deterministic_clock``): calls take their
realistic durations without the demo waiting for them, and the sessions end about now.

The sessions show every case the viewer and the analytics have to tell apart: parallel sibling
calls with distinct intents, a sibling pair with the same intent, failures, a cancellation, a
call sent to the background and harvested later, a subagent with its own calls, intents in
French and Japanese, a tool whose own business parameter is called ``intent``, a tool whose
args the demo's redaction policy hides, a secret scrubbed from args, activity labels heading
some blocks, several turns.

Idempotent: session ids, call ids and span ids all derive from the seed, so running the demo
again with the same seed updates the same anchors in place (with fresh times) instead of adding
new ones; another seed adds other sessions.
"""

from __future__ import annotations

import os
import random
import time
import warnings
from dataclasses import dataclass, field

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from redaction import RedactionPolicy
from tracing.demo._scripts import SCRIPTS, session_ids
from tracing.demo._sim import (
    DEFAULT_SEED,
    DEFAULT_SESSIONS,
    DEMO_POLICY,
    DEMO_TOOLS,
    SeededIds,
    SessionPlan,
    Sim,
)
from tracing.intent import IntentRegistry, inject_intent
from tracing.ledger import Anchor, Ledger, open_ledger
from tracing.otel import IntentOptions, configure
from tracing.status import GLYPHS, HeaderCall, Status, group_header
from tracing.testing import FakeClock, deterministic_clock


@dataclass
class DemoReport:
    """What ``run_demo`` wrote."""

    ledger_url: str
    seed: int
    sessions: list[SessionPlan] = field(default_factory=list[SessionPlan])
    calls: int = 0
    elapsed_s: float = 0.0


# --------------------------------------------------------------------------------------------
# running it


def run_demo(
    ledger: Ledger | str | None = None,
    *,
    seed: int = DEFAULT_SEED,
    sessions: int = DEFAULT_SESSIONS,
    end_ns: int | None = None,
) -> DemoReport:
    """Run the simulated agent through the real pipeline into the ledger.

    Args:
        ledger: a ledger, or its URL (default: ``$INTENTRACE_LEDGER_URL``, else the default
            SQLite file). A ledger given as an object stays open; one opened here is closed.
        seed: everything (ids, file names, durations) follows from it.
        sessions: how many sessions (the three scripts repeat with other details).
        end_ns: when the last session ends (default: now).

    Raises:
        LedgerError: the ledger cannot be opened.
    """
    started = time.monotonic()
    own = not isinstance(ledger, Ledger)
    target: Ledger = open_ledger(ledger) if not isinstance(ledger, Ledger) else ledger
    report = DemoReport(ledger_url=target.url, seed=seed)
    registry = IntentRegistry()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # open_issue's own `intent` parameter: not injected
        inject_intent(DEMO_TOOLS, registry=registry)
    provider = TracerProvider(
        resource=Resource.create({"service.name": "intentrace-demo"}), id_generator=SeededIds(seed)
    )
    otlp = any(
        os.environ.get(k)
        for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    setup = configure(
        provider=provider,
        ledger=target,
        policy=RedactionPolicy.from_toml(DEMO_POLICY, source="<demo policy>"),
        registry=registry,
        otlp=otlp,
        set_global=False,
        # settle in the agent's thread: one thread writes, so the ledger's sequence numbers
        # come out the same on every run of a seed
        options=IntentOptions(in_thread=False),
    )
    tracer = provider.get_tracer("intentrace.demo")
    count = max(1, sessions)
    ids = session_ids(seed, count)
    end = end_ns if end_ns is not None else time.time_ns()
    # sessions a few minutes apart, the last one ending about `end`
    clock = FakeClock(start_ns=end - count * 15 * 60 * 1_000_000_000, step_ns=1_000)
    try:
        with deterministic_clock(clock):
            for n, session_id in enumerate(ids):
                rng = random.Random(f"{seed}-{n}")
                sim = Sim(tracer, clock, rng, registry)
                sim.session_id = session_id
                sim.at(end - (count - n) * 15 * 60 * 1_000_000_000)
                report.sessions.append(SCRIPTS[n % len(SCRIPTS)][1](sim, rng))
                report.calls += sim.calls
            setup.processor.force_flush()
        target.flush(30.0)
    finally:
        setup.processor.shutdown()
        provider.shutdown()
        if own:
            target.close()
    report.elapsed_s = time.monotonic() - started
    return report


# --------------------------------------------------------------------------------------------
# the narrative


def _seconds(anchor: Anchor) -> str:
    ms = anchor["duration_ms"]
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def narrative(ledger: Ledger, report: DemoReport, *, story_lines: int = 24) -> list[str]:
    """A short story of what the demo wrote, read back from the ledger (plain text lines)."""
    lines: list[str] = []
    all_anchors = {s.session_id: ledger.session_anchors(s.session_id) for s in report.sessions}
    total = sum(len(a) for a in all_anchors.values())
    failed = sum(1 for a in all_anchors.values() for x in a if x["status"] == Status.ERROR)
    cancelled = sum(1 for a in all_anchors.values() for x in a if x["status"] == Status.CANCELLED)
    lines.append(
        f"intentrace demo (seed {report.seed}): {len(report.sessions)} sessions, "
        f"{total} tool calls ({failed} failed, {cancelled} cancelled) "
        f"in {report.elapsed_s:.1f} s"
    )
    for index, plan in enumerate(report.sessions):
        anchors = all_anchors[plan.session_id]
        agents = sorted({a["agent_id"] for a in anchors if a["agent_id"]})
        turns = max((a["turn"] or 0 for a in anchors), default=0)
        errors = sum(1 for a in anchors if a["status"] in (Status.ERROR, Status.CANCELLED))
        lines.append("")
        lines.append(f"  {plan.title}")
        lines.append(
            f"    {plan.session_id} · {' + '.join(agents) or '-'} · {turns} turns · "
            f"{len(anchors)} calls · {errors} failed or cancelled"
        )
        if index > 0:
            continue
        labels = {b["batch_id"]: b["activity_label"] for b in ledger.blocks(plan.session_id)}
        shown = 0
        last_batch: str | None = None
        for anchor in anchors:
            if shown >= story_lines:
                lines.append("      …")
                break
            batch = anchor["batch_id"] or ""
            if batch != last_batch:
                last_batch = batch
                block = [a for a in anchors if (a["batch_id"] or "") == batch]
                header = group_header(
                    [
                        HeaderCall(a["status"], a["intent"], a["label"], a["seq"], a["settle_seq"])
                        for a in block
                    ],
                    labels.get(batch),
                )
                nested = "  " if anchor["parent_call_id"] else ""
                lines.append(f"    {nested}▸ {header}")
                shown += 1
            mark = GLYPHS.get(anchor["status"], "·")
            indent = "        " if anchor["parent_call_id"] else "      "
            lines.append(
                f"{indent}{mark} {anchor['label']}  [{anchor['tool_name']} {_seconds(anchor)}]"
            )
            shown += 1
    return lines
