"""The demo's simulation: its tools and redaction policy, seeded ids, and a scripted agent on a
simulated clock that makes its calls with our real instrumentation (see ``tracing.demo._run``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Tracer

from tracing.intent import IntentRegistry
from tracing.otel._instrument import ToolCall, activity, session, tool_call

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


class Sim:
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
