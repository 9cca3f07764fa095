"""The live demo agent: the simulated coding agent in real time, while the viewer is open.

``intentrace demo --view --live`` (what ``scripts/demo.sh`` runs) starts it in a thread after
loading the recorded sessions, and stops it when the viewer stops. Turn after turn it writes, in
one session of its own, what the Live page and a followed Session page must show: intents the
model is still writing (a ``StreamTap`` fed Anthropic-shaped stream events chunk by chunk, so
the anchors are ``streaming`` and grow), sibling calls in flight, a call sent to the background
and harvested turns later, a subagent with its own calls, failures. Every call goes through the
real pipeline (our instrumentation, ``IntentSpanProcessor``, the ledger), on the real clock.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from redaction import RedactionPolicy
from tracing.demo._sim import DEFAULT_SEED, DEMO_AGENT, DEMO_POLICY, DEMO_TOOLS
from tracing.intent import IntentRegistry, inject_intent
from tracing.ledger import Ledger
from tracing.otel import configure
from tracing.otel._instrument import ToolCall, activity, session, tool_call
from tracing.taps import StreamTap

LIVE_AGENT: Final = "reviewer"
"""The subagent the live agent delegates to."""
TURNS_PER_SESSION: Final = 12
"""After this many turns the live agent starts another session (pages stay small)."""


def live_session_id(seed: int = DEFAULT_SEED, number: int = 1) -> str:
    """The id of the live agent's ``number``-th session."""
    return f"demo-{seed}-live-{number}"


@dataclass(frozen=True)
class _Step:
    """One model step of the live script: sibling calls (tool, intent, args, seconds, outcome
    or error)."""

    label: str | None
    calls: tuple[tuple[str, str, dict[str, Any], float, str | None, str | None], ...]


_STEPS: Final = (
    _Step(
        "Exploring the payment retry logic",
        (
            ("search_code", "Searching for where payment retries are scheduled",
             {"query": "schedule_retry"}, 3.0, "Found 4 places that schedule retries", None),
            ("read_file", "Reading the retry policy module", {"path": "src/pay/retry.py"},
             2.0, "Read the retry policy (180 lines)", None),
        ),
    ),
    _Step(
        None,
        (
            ("run_tests", "Running the payment tests", {"target": "tests/pay"}, 5.0, None,
             "2 failed: tests/pay/test_retry.py"),
        ),
    ),
    _Step(
        "Fixing the backoff computation",
        (
            ("edit_file", "Capping the exponential backoff at five minutes",
             {"path": "src/pay/retry.py", "old": "2 ** n", "new": "min(2 ** n, 300)"}, 1.5,
             "Capped the backoff at five minutes", None),
            ("git_diff", "Reviewing the change", {"paths": ["src/pay/retry.py"]}, 1.0, None,
             None),
        ),
    ),
)  # fmt: skip


class _Agent:
    """One live agent run: its tracer, tap and pace, and what is left in the background."""

    def __init__(
        self, ledger: Ledger, stop: threading.Event, seed: int, pace: float, tracer: Any
    ) -> None:
        self.stop = stop
        self.pace = pace
        self.tracer = tracer
        self.rng = random.Random(f"live-{seed}")
        self.registry = IntentRegistry()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # open_issue's own `intent` parameter
            inject_intent(DEMO_TOOLS, registry=self.registry)
        self.tap = StreamTap(
            ledger=ledger,
            policy=RedactionPolicy.from_toml(DEMO_POLICY, source="<demo policy>"),
            registry=self.registry,
        )
        self.background: list[tuple[ToolCall, int]] = []
        self.calls = 0
        self._ids = itertools.count(1)

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` (times the pace); True when the demo is stopping."""
        return self.stop.wait(max(0.0, seconds * self.pace))

    def call_id(self) -> str:
        return f"toolu_live_{self.rng.getrandbits(64):016x}{next(self._ids):04d}"

    # --- one model step: intents streamed, then the calls run --------------------------------
    def step(self, step: _Step) -> None:
        ids = [self.call_id() for _ in step.calls]
        self.stream(list(zip(ids, step.calls, strict=True)))
        scope = (
            activity(step.label, tracer=self.tracer)
            if step.label
            else self.tracer.start_as_current_span("agent step")
        )
        with scope:
            handles = [self._start(cid, tool, intent, args) for cid, (tool, intent, args, *_)
                       in zip(ids, step.calls, strict=True)]  # fmt: skip
            order = sorted(range(len(handles)), key=lambda n: step.calls[n][3])
            waited = 0.0
            for n in order:
                _, _, _, seconds, outcome, error = step.calls[n]
                self.wait(seconds - waited)
                waited = seconds
                self._settle(handles[n], outcome, error)

    def stream(self, calls: list[tuple[str, tuple[str, str, dict[str, Any], float, Any, Any]]]):
        """The model writes the calls' arguments: Anthropic Messages events, a few words at a
        time, through a ``StreamTap`` (``streaming`` anchors whose intent grows)."""
        tracker = self.tap.tracker()
        ns = SimpleNamespace
        tracker.observe(ns(type="message_start", message=ns(id=f"msg_{self.call_id()}")))
        for index, (cid, (tool, _, _, _, _, _)) in enumerate(calls):
            block = ns(type="tool_use", id=cid, name=tool)
            tracker.observe(ns(type="content_block_start", index=index, content_block=block))
        pieces = [(index, _chunks(intent, args)) for index, (_, (_, intent, args, *_))
                  in enumerate(calls)]  # fmt: skip
        while any(chunks for _, chunks in pieces):
            for index, chunks in pieces:
                if chunks:
                    delta = ns(type="input_json_delta", partial_json=chunks.pop(0))
                    tracker.observe(ns(type="content_block_delta", index=index, delta=delta))
            if self.wait(0.35):
                break
        for index, _ in enumerate(calls):
            tracker.observe(ns(type="content_block_stop", index=index))
        tracker.close()

    def _start(self, cid: str, tool: str, intent: str, args: dict[str, Any]) -> ToolCall:
        self.calls += 1
        text = json.dumps({"intent": intent, **args})
        return tool_call(tool, text, call_id=cid, label_bearing=True, tracer=self.tracer).start()

    @staticmethod
    def _settle(handle: ToolCall, outcome: str | None, error: str | None) -> None:
        with handle:
            if error is not None:
                handle.fail(error)
            else:
                handle.set_result({"ok": True}, outcome=outcome)

    # --- a background call and a subagent ----------------------------------------------------
    def dispatch_background(self, turn: int) -> None:
        cid = self.call_id()
        intent = "Rebuilding the search index"
        self.stream([(cid, ("run_shell", intent, {"command": "make index"}, 0, None, None))])
        with self.tracer.start_as_current_span("agent step"):
            handle = self._start(cid, "run_shell", intent, {"command": "make index"})
            with handle:
                handle.to_background()
        self.background.append((handle, turn))

    def harvest(self, turn: int, *, all_of_them: bool = False) -> None:
        for handle, since in list(self.background):
            if all_of_them or turn - since >= 2:
                self.background.remove((handle, since))
                if all_of_them:
                    handle.harvest(error="the demo stopped before the index was rebuilt")
                else:
                    handle.harvest({"files": 1204}, outcome="Rebuilt the search index")

    def delegate(self, session_id: str, turn: int) -> None:
        spawn = self.call_id()
        intent = "Delegating the review of the retry fix"
        self.stream([(spawn, ("spawn_agent", intent, {"task": "review"}, 0, None, None))])
        with self.tracer.start_as_current_span("agent step"):
            handle = self._start(spawn, "spawn_agent", intent, {"task": "review the fix"})
            with handle, session(session_id, agent_id=LIVE_AGENT, turn=turn):
                for tool, child, args, seconds, outcome in (
                    ("read_file", "Reading the diff of the retry fix", {"path": "retry.py"},
                     2.5, "Read the diff (12 lines)"),
                    ("search_code", "Looking for other callers of the backoff",
                     {"query": "backoff("}, 3.0, "No other callers of the backoff"),
                ):  # fmt: skip
                    cid = self.call_id()
                    self.stream([(cid, (tool, child, args, seconds, outcome, None))])
                    with self.tracer.start_as_current_span("agent step"):
                        inner = self._start(cid, tool, child, args)
                        self.wait(seconds)
                        self._settle(inner, outcome, None)
                    if self.stop.is_set():
                        break
                self.wait(0.5)
                handle.set_result({"approved": True}, outcome="The review approved the fix")


def _chunks(intent: str, args: dict[str, Any]) -> list[str]:
    """The JSON text of the args (intent first), cut a couple of words at a time."""
    text = json.dumps({"intent": intent, **args})
    words = text.split(" ")
    cut = [" ".join(words[i : i + 2]) for i in range(0, len(words), 2)]
    return [part + (" " if n < len(cut) - 1 else "") for n, part in enumerate(cut)]


def run_live(
    ledger: Ledger,
    stop: threading.Event,
    *,
    seed: int = DEFAULT_SEED,
    pace: float = 1.0,
    max_turns: int | None = None,
    on_turn: Callable[[str, int], None] | None = None,
) -> int:
    """Run the live agent into ``ledger`` until ``stop`` is set; returns how many calls it made.

    Args:
        ledger: where the calls go (stays open).
        stop: set it to stop (the call in progress settles, a call left in the background is
            harvested as failed).
        seed: its ids follow from it.
        pace: multiplies every wait (1.0: the real durations of a few seconds).
        max_turns: stop after this many turns (None: until ``stop``).
        on_turn: called with (session id, turn) as each turn starts.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": "intentrace-demo-live"}))
    agent: _Agent | None = None
    setup = None
    try:
        tracer = provider.get_tracer("intentrace.demo.live")
        agent = _Agent(ledger, stop, seed, pace, tracer)
        setup = configure(
            provider=provider,
            ledger=ledger,
            policy=RedactionPolicy.from_toml(DEMO_POLICY, source="<demo policy>"),
            registry=agent.registry,
            otlp=False,
            set_global=False,
        )
        for count in itertools.count():
            if stop.is_set() or (max_turns is not None and count >= max_turns):
                break
            number, turn = divmod(count, TURNS_PER_SESSION)
            session_id = live_session_id(seed, number + 1)
            turn += 1
            if on_turn is not None:
                on_turn(session_id, turn)
            with session(session_id, agent_id=DEMO_AGENT, turn=turn):
                _turn(agent, session_id, turn)
            if agent.wait(2.0):
                break
    finally:
        if agent is not None:
            agent.harvest(0, all_of_them=True)
        if setup is not None:
            setup.processor.force_flush()
            setup.processor.shutdown()
        provider.shutdown()
        ledger.flush(10.0)
    return agent.calls if agent is not None else 0


def _turn(agent: _Agent, session_id: str, turn: int) -> None:
    """One turn: a step of the script, a background call every third turn, a subagent every
    other turn, and the harvest of a background call dispatched two turns ago."""
    for action in _actions(agent, session_id, turn):
        if agent.stop.is_set():
            return
        action()
        if agent.wait(1.0):
            return


def _actions(agent: _Agent, session_id: str, turn: int) -> Iterator[Callable[[], None]]:
    yield lambda: agent.step(_STEPS[(turn - 1) % len(_STEPS)])
    if turn % 3 == 1:
        yield lambda: agent.dispatch_background(turn)
    if turn % 2 == 0:
        yield lambda: agent.delegate(session_id, turn)
    yield lambda: agent.harvest(turn)
