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

import asyncio
import contextlib
import json
import random
import time
import warnings
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Tracer

from tracing._instrument import ToolCall, activity, session, tool_call
from tracing._intent import IntentRegistry, inject_intent
from tracing.ledger import Anchor, Ledger, open_ledger

DEFAULT_SEED: Final = 7
DEFAULT_SESSIONS: Final = 3
DEMO_AGENT: Final = "coder"

DEMO_POLICY: Final = """\
# The demo's redaction policy: customer records never leave the process.
[tools.query_customers]
args = "redact"
output = "redact"
"""
"""The redaction policy the demo runs with (TOML): ``query_customers`` args and output are
redacted, so its intent is hidden too; everything else is kept and scrubbed for secrets."""


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_STR: Final = {"type": "string"}
_INT: Final = {"type": "integer"}

DEMO_TOOLS: Final[list[Any]] = [
    _fn("search_code", "Search the repository.", {"query": _STR, "path": _STR}, ["query"]),
    _fn("read_file", "Read a file.", {"path": _STR, "start": _INT, "end": _INT}, ["path"]),
    _fn("edit_file", "Replace text in a file.", {"path": _STR, "old": _STR, "new": _STR}, ["path"]),
    _fn("run_tests", "Run tests with pytest.", {"target": _STR, "flags": _STR}, ["target"]),
    _fn("run_shell", "Run a shell command.", {"command": _STR, "cwd": _STR}, ["command"]),
    _fn("git_diff", "Show the working tree diff.", {"paths": {"type": "array"}}, []),
    _fn("fetch_url", "Fetch a URL.", {"url": _STR}, ["url"]),
    _fn("query_customers", "Run SQL on the customer DB.", {"sql": _STR}, ["sql"]),
    _fn("spawn_agent", "Delegate a task to a subagent.", {"agent": _STR, "task": _STR}, ["task"]),
    _fn(
        "open_issue",
        "Open an issue in the tracker.",
        {
            "intent": {"type": "string", "enum": ["bug", "feature", "chore"]},
            "title": _STR,
            "body": _STR,
        },
        ["intent", "title"],
    ),
]
"""The simulated agent's tools (OpenAI format). ``open_issue`` has its own business parameter
``intent`` (the issue kind), so no label is injected into it and its calls keep the neutral
label."""


# --------------------------------------------------------------------------------------------
# what the simulation needs: a seeded id generator, a controllable clock, one scripted call


class SeededIds(IdGenerator):
    """Trace and span ids drawn from a seeded generator (the same ids on every run)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"ids-{seed}")

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


@dataclass(frozen=True)
class Call:
    """One scripted tool call."""

    tool: str
    intent: str | None
    args: Mapping[str, Any]
    seconds: float
    result: Any = None
    outcome: str | None = None
    patch: tuple[str, str] | None = None
    """``outcome_patch`` (from, to): an in-place edit of the intent."""
    error: BaseException | str | None = None
    """An exception the tool raises, or the text of a failure it reports."""
    cancelled: bool = False


@dataclass
class SessionPlan:
    """What one scripted session is about (for the narrative)."""

    session_id: str
    title: str
    language: str


@dataclass
class DemoReport:
    """What ``run_demo`` wrote."""

    ledger_url: str
    seed: int
    sessions: list[SessionPlan] = field(default_factory=list[SessionPlan])
    calls: int = 0
    elapsed_s: float = 0.0


class _Sim:
    """A scripted agent on a simulated clock."""

    def __init__(
        self, tracer: Tracer, clock: Any, rng: random.Random, registry: IntentRegistry
    ) -> None:
        self.tracer = tracer
        self.clock = clock
        self.rng = rng
        self.registry = registry
        self.calls = 0
        self.session_id = ""
        self.turn_no = 0

    # the clock -----------------------------------------------------------------------------
    @property
    def now(self) -> int:
        return int(self.clock.now_ns)

    def at(self, ns: int) -> None:
        self.clock.now_ns = max(int(ns), int(self.clock.now_ns))

    def wait(self, seconds: float) -> None:
        self.at(self.now + int(seconds * 1e9))

    def secs(self, low: float, high: float) -> float:
        return round(self.rng.uniform(low, high), 3)

    # structure -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def turn(self, number: int, agent: str = DEMO_AGENT) -> Generator[None]:
        self.turn_no = number
        self.wait(self.secs(20, 90))  # the user reads, thinks, types
        with session(self.session_id, agent_id=agent, turn=number):
            yield
        self.wait(self.secs(2, 6))  # the model writes its answer

    @contextlib.contextmanager
    def step(self, label: str | None = None) -> Generator[None]:
        """One model step: a block of sibling calls, headed by ``label`` when given."""
        self.wait(self.secs(0.8, 3.5))  # the model thinks before it calls
        if label is not None:
            with activity(label, tracer=self.tracer):
                yield
        else:
            with self.tracer.start_as_current_span("agent step", attributes={"demo.step": True}):
                yield
        self.wait(0.05)

    # calls -------------------------------------------------------------------------------------
    def _start(self, call: Call) -> ToolCall:
        self.calls += 1
        bearing = self.registry.is_label_bearing(call.tool)
        args = dict(call.args)
        if bearing and call.intent is not None:
            args = {"intent": call.intent, **args}
        call_id = f"call_{self.rng.getrandbits(96):024x}"
        return tool_call(
            call.tool,
            json.dumps(args, ensure_ascii=False),
            call_id=call_id,
            label_bearing=bearing,
            tracer=self.tracer,
        ).start()

    def _finish(self, handle: ToolCall, call: Call) -> None:
        try:
            with handle:
                if call.cancelled:
                    raise asyncio.CancelledError()
                if isinstance(call.error, BaseException):
                    raise call.error
                if isinstance(call.error, str):
                    handle.set_result(call.result)
                    handle.fail(call.error)
                    return
                patch = {"from": call.patch[0], "to": call.patch[1]} if call.patch else None
                handle.set_result(call.result, outcome=call.outcome, outcome_patch=patch)
        except (Exception, asyncio.CancelledError):
            pass  # the agent sees the failure and carries on

    def parallel(self, *calls: Call) -> None:
        """Sibling calls of one model step, started together, settling as each finishes."""
        t0 = self.now
        started: list[tuple[int, ToolCall, Call]] = []
        for n, call in enumerate(calls):
            self.at(t0 + n * 2_000_000)
            started.append((self.now + int(call.seconds * 1e9), self._start(call), call))
        for end, handle, call in sorted(started, key=lambda s: s[0]):
            self.at(end)
            self._finish(handle, call)

    def call(self, call: Call) -> None:
        self.parallel(call)

    def background(self, call: Call) -> ToolCall:
        """Dispatch a call to the background: it stays in flight until ``harvest``."""
        handle = self._start(call)
        with handle:
            handle.to_background()
        self.wait(0.02)
        return handle

    def harvest(self, handle: ToolCall, call: Call) -> None:
        self.wait(0.01)
        patch = {"from": call.patch[0], "to": call.patch[1]} if call.patch else None
        if call.error is not None:
            handle.harvest(error=call.error)
        else:
            handle.harvest(call.result, outcome=call.outcome, outcome_patch=patch)

    @contextlib.contextmanager
    def subagent(self, spawn: Call, agent: str) -> Generator[Callable[[], None]]:
        """A call that spawns a subagent; the subagent's own calls run inside it.

        Yields a function that settles the spawning call (with ``spawn``'s result).
        """
        handle = self._start(spawn)
        with handle, session(self.session_id, agent_id=agent, turn=self.turn_no):
            settled = False

            def settle() -> None:
                nonlocal settled
                if not settled:
                    settled = True
                    self.wait(0.3)
                    patch = {"from": spawn.patch[0], "to": spawn.patch[1]} if spawn.patch else None
                    handle.set_result(spawn.result, outcome=spawn.outcome, outcome_patch=patch)

            yield settle
            settle()


# --------------------------------------------------------------------------------------------
# the scripted sessions


def _oauth(sim: _Sim, rng: random.Random) -> SessionPlan:
    """English: fix a failing test; parallel siblings, a duplicate pair, a failure, a
    background test run, a reviewer subagent, an issue with a business ``intent``."""
    handlers = rng.randint(6, 15)
    module = rng.choice(["src/auth/callback.py", "src/auth/oauth_router.py"])
    settings = rng.choice(["config/settings.py", "src/settings/base.py"])
    failing = rng.choice(
        ["test_callback_rejects_foreign_redirect", "test_callback_keeps_state_param"]
    )
    with sim.turn(1):
        with sim.step("Exploring the auth flow"):
            sim.parallel(
                Call(
                    "search_code",
                    "Searching for the OAuth callback handler",
                    {"query": "def oauth_callback", "path": "src/"},
                    sim.secs(0.3, 0.9),
                    {"matches": handlers, "files": [module]},
                    outcome=f"Found {handlers} OAuth handlers",
                ),
                Call(
                    "search_code",
                    "Searching for where redirect URIs are validated",
                    {"query": "redirect_uri", "path": "src/"},
                    sim.secs(0.4, 1.2),
                    {"matches": 3},
                    patch=("Searching for", "Found"),
                ),
                Call(
                    "read_file",
                    "Reading the failing test",
                    {"path": "tests/auth/test_callback.py"},
                    sim.secs(0.05, 0.2),
                    {"lines": 212},
                    outcome="Read the failing test (212 lines)",
                ),
            )
        with sim.step():  # the model asks for the same file twice in one step
            same = "Reading the OAuth settings"
            sim.parallel(
                Call("read_file", same, {"path": settings}, sim.secs(0.05, 0.2), {"lines": 88}),
                Call("read_file", same, {"path": settings}, sim.secs(0.05, 0.2), {"lines": 88}),
            )
        with sim.step():
            sim.call(
                Call(
                    "run_tests",
                    "Running the auth tests",
                    {"target": "tests/auth", "flags": "-x -q"},
                    sim.secs(4, 9),
                    {"passed": 41, "failed": 1},
                    error=f"1 failed: tests/auth/test_callback.py::{failing}",
                )
            )
    with sim.turn(2):
        with sim.step("Fixing the redirect check"):
            sim.call(
                Call(
                    "edit_file",
                    "Tightening the redirect URI comparison",
                    {"path": module, "old": "startswith(allowed)", "new": "== allowed"},
                    sim.secs(0.05, 0.15),
                    {"ok": True},
                    outcome=f"Tightened the redirect URI comparison in {module}",
                )
            )
        with sim.step():
            suite = Call(
                "run_tests",
                "Running the full test suite",
                {"target": "tests", "flags": "-q -n 4"},
                0.0,
                {"passed": 1184, "failed": 0},
                outcome="All 1184 tests passed",
            )
            running = sim.background(suite)
        with sim.step():
            spawn = Call(
                "spawn_agent",
                "Asking a reviewer to check the fix",
                {"agent": "reviewer", "task": "Review the redirect URI fix"},
                0.0,
                {"verdict": "approve"},
                outcome="The reviewer approved the fix",
            )
            with sim.subagent(spawn, "reviewer"):
                with sim.step():
                    sim.call(
                        Call(
                            "git_diff",
                            "Reviewing the diff",
                            {"paths": [module]},
                            sim.secs(0.05, 0.2),
                            {"files": 1, "insertions": 1, "deletions": 1},
                            outcome="Reviewed a one-line diff",
                        )
                    )
                with sim.step():
                    sim.parallel(
                        Call(
                            "search_code",
                            "Looking for other callers of validate_redirect",
                            {"query": "validate_redirect("},
                            sim.secs(0.3, 0.8),
                            {"matches": 2},
                            outcome="Found 2 other callers, both safe",
                        ),
                        Call(
                            "read_file",
                            "Reading the redirect allow-list",
                            {"path": "config/allowed_redirects.yaml"},
                            sim.secs(0.05, 0.2),
                            error=FileNotFoundError(
                                "[Errno 2] No such file or directory: "
                                "'config/allowed_redirects.yaml'"
                            ),
                        ),
                    )
        sim.wait(sim.secs(15, 40))
        sim.harvest(running, suite)
    with sim.turn(3), sim.step():
        sim.call(
            Call(
                "open_issue",
                None,
                {
                    "intent": "bug",
                    "title": "Redirect URIs were compared by prefix",
                    "body": f"Fixed in {module}; see {failing}.",
                },
                sim.secs(0.4, 1.0),
                {"number": rng.randint(300, 900)},
            )
        )
    return SessionPlan(sim.session_id, "Fix the failing OAuth callback test", "en")


def _pagination(sim: _Sim, rng: random.Random) -> SessionPlan:
    """French: add pagination; a missing file, a cancelled test run, outcome patches."""
    routes = rng.randint(3, 7)
    with sim.turn(1):
        with sim.step("Exploration de l'API des commandes"):
            sim.parallel(
                Call(
                    "search_code",
                    "Recherche des routes de l'API des commandes",
                    {"query": '@router.get("/orders', "path": "api/"},
                    sim.secs(0.3, 0.9),
                    {"matches": routes},
                    patch=("Recherche des", f"{routes} trouvées :"),
                ),
                Call(
                    "read_file",
                    "Lecture du modèle Commande",
                    {"path": "api/models/order.py"},
                    sim.secs(0.05, 0.2),
                    {"lines": 140},
                    outcome="Modèle Commande lu (140 lignes)",
                ),
                Call(
                    "read_file",
                    "Lecture de la migration des commandes",
                    {"path": "migrations/0007_orders.py"},
                    sim.secs(0.05, 0.2),
                    error=FileNotFoundError(
                        "[Errno 2] No such file or directory: 'migrations/0007_orders.py'"
                    ),
                ),
            )
        with sim.step():
            sim.call(
                Call(
                    "edit_file",
                    "Ajout des paramètres limit et offset",
                    {"path": "api/routes/orders.py", "old": "def list_orders(", "new": "..."},
                    sim.secs(0.05, 0.2),
                    {"ok": True},
                    outcome="Paramètres limit et offset ajoutés",
                )
            )
        with sim.step():
            sim.call(
                Call(
                    "run_tests",
                    "Exécution des tests d'intégration",
                    {"target": "tests/integration", "flags": "-q"},
                    sim.secs(6, 12),
                    cancelled=True,  # the user stopped it: too slow
                )
            )
    with sim.turn(2), sim.step("Vérification ciblée"):
        sim.parallel(
            Call(
                "run_tests",
                "Exécution des tests de l'API des commandes",
                {"target": "tests/api/test_orders.py", "flags": "-q"},
                sim.secs(1.5, 3.0),
                {"passed": 18, "failed": 0},
                outcome="18 tests réussis",
            ),
            Call(
                "run_shell",
                "ページネーションの応答時間を計測しています",
                {"command": "python bench/orders.py --pages 50"},
                sim.secs(2.0, 4.0),
                {"p95_ms": 41},
                outcome="p95 は 41 ms でした",
            ),
        )
    return SessionPlan(sim.session_id, "Ajoute la pagination à l'API des commandes", "fr")


def _checkout(sim: _Sim, rng: random.Random) -> SessionPlan:
    """Japanese: a slow checkout; a redacted tool, a scrubbed secret, a timeout."""
    slow_ms = rng.randint(1800, 4200)
    with sim.turn(1), sim.step("チェックアウトの遅延を調査"):
        sim.parallel(
            Call(
                "query_customers",
                "注文4411の顧客情報を確認しています",
                {"sql": "SELECT * FROM customers WHERE email = 'yuki.tanaka@example.jp'"},
                sim.secs(0.2, 0.6),
                {"rows": 1, "name": "Yuki Tanaka"},
                outcome="顧客情報を確認しました",
            ),
            Call(
                "run_shell",
                "遅いクエリのログを取得しています",
                {
                    "command": "psql postgresql://app:hunter2-s3cret@db.internal:5432/shop "
                    "-c 'SELECT * FROM pg_stat_statements LIMIT 5'",
                },
                sim.secs(0.8, 2.0),
                {"slowest_ms": slow_ms},
                outcome=f"最も遅いクエリは {slow_ms} ms",
            ),
            Call(
                "fetch_url",
                "決済プロバイダーの状態ページを確認しています",
                {"url": "https://status.payments.example.com/api/v2/status.json"},
                10.0,
                error=TimeoutError("timed out after 10 s"),
            ),
        )
    with sim.turn(2):
        with sim.step():
            sim.call(
                Call(
                    "edit_file",
                    "注文テーブルにインデックスを追加しています",
                    {"path": "migrations/0012_order_index.py", "old": "", "new": "CREATE INDEX"},
                    sim.secs(0.05, 0.2),
                    {"ok": True},
                    patch=("追加しています", "追加しました"),
                )
            )
        with sim.step():
            sim.call(
                Call(
                    "run_tests",
                    "Running the checkout tests",
                    {"target": "tests/checkout", "flags": "-q"},
                    sim.secs(2, 5),
                    {"passed": 57, "failed": 0},
                    outcome="57 checkout tests passed",
                )
            )
    return SessionPlan(sim.session_id, "チェックアウトが遅い原因を調べて", "ja")


_SCRIPTS: Final[tuple[tuple[str, Callable[[_Sim, random.Random], SessionPlan]], ...]] = (
    ("oauth", _oauth),
    ("pagination", _pagination),
    ("checkout", _checkout),
)


def session_ids(seed: int = DEFAULT_SEED, sessions: int = DEFAULT_SESSIONS) -> list[str]:
    """The session ids the demo writes for this seed (stable: re-running updates them)."""
    return [
        f"demo-{seed}-{n + 1}-{_SCRIPTS[n % len(_SCRIPTS)][0]}" for n in range(max(1, sessions))
    ]


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
    import os

    from redaction import RedactionPolicy
    from tracing._options import IntentOptions
    from tracing._setup import configure
    from tracing.testing import FakeClock, deterministic_clock

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
                sim = _Sim(tracer, clock, rng, registry)
                sim.session_id = session_id
                sim.at(end - (count - n) * 15 * 60 * 1_000_000_000)
                report.sessions.append(_SCRIPTS[n % len(_SCRIPTS)][1](sim, rng))
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


_MARKS: Final = {
    "success": "✓",
    "error": "✗",
    "cancelled": "⊘",
    "background": "…",
    "in_flight": "…",
    "abandoned": "?",
}


def narrative(ledger: Ledger, report: DemoReport, *, story_lines: int = 14) -> list[str]:
    """A short story of what the demo wrote, read back from the ledger (plain text lines)."""
    from tracing._status import HeaderCall, group_header

    lines: list[str] = []
    all_anchors = {s.session_id: ledger.session_anchors(s.session_id) for s in report.sessions}
    total = sum(len(a) for a in all_anchors.values())
    failed = sum(1 for a in all_anchors.values() for x in a if x["status"] == "error")
    cancelled = sum(1 for a in all_anchors.values() for x in a if x["status"] == "cancelled")
    lines.append(
        f"intentrace demo (seed {report.seed}): {len(report.sessions)} sessions, "
        f"{total} tool calls ({failed} failed, {cancelled} cancelled) "
        f"in {report.elapsed_s:.1f} s"
    )
    for index, plan in enumerate(report.sessions):
        anchors = all_anchors[plan.session_id]
        agents = sorted({a["agent_id"] for a in anchors if a["agent_id"]})
        turns = max((a["turn"] or 0 for a in anchors), default=0)
        errors = sum(1 for a in anchors if a["status"] in ("error", "cancelled"))
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
                lines.append(f"    ▸ {header}")
                shown += 1
            mark = _MARKS.get(anchor["status"], "·")
            indent = "        " if anchor["parent_call_id"] else "      "
            lines.append(
                f"{indent}{mark} {anchor['label']}  [{anchor['tool_name']} {_seconds(anchor)}]"
            )
            shown += 1
    return lines


def summary_counts(anchors: Sequence[Anchor]) -> dict[str, int]:
    """Calls per status (for tests and the narrative)."""
    out: dict[str, int] = {}
    for anchor in anchors:
        out[anchor["status"]] = out.get(anchor["status"], 0) + 1
    return out
