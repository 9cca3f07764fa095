"""One tapped stream: its tool calls, their intent readers, and what gets published.

SDK-agnostic: ``_events`` turns each SDK's stream events into ``start``/``feed``/``end`` calls
keyed by a per-stream key (the call's index in the response). Everything here runs on the
application's thread between two stream events, so the common path (a delta for a call whose
intent is already complete, or a delta that does not change the visible label) is a dict
lookup and an attribute test. Nothing here raises into the application: errors are counted
(``tap_stats()``) and logged once.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from redaction import secret_tail
from tracing.anchor import anchor_id, safe_id
from tracing.diagnostics import ErrorLog
from tracing.intent import (
    INTENT_MAX_CHARS,
    IntentRegistry,
    IntentStreamReader,
    StreamingIntent,
    sanitize_label,
)
from tracing.status import Status
from tracing.taps._events import ROUTES, route_for
from tracing.taps._options import TapOptions

if TYPE_CHECKING:
    from redaction import RedactionPolicy
    from tracing.ledger import AnchorWrite

_log = logging.getLogger("tracing.taps")

IntentCallback = Callable[[str, str, StreamingIntent], None]
"""``on_intent(call_id, tool_name, intent)``: called on the application's thread each time the
visible intent of a label-bearing call grows, and once when it is complete."""

_PENDING: Final = 0  # id or name not known yet
_TAPPED: Final = 1  # label-bearing: its intent is read and published
_IGNORED: Final = 2  # not label-bearing (or given up): deltas are dropped at once

_MAX_BUFFER: Final = 1 << 16
"""Argument text kept for a call whose id or name has not arrived yet (then it is ignored)."""

_TRAILING_TOKEN: Final = re.compile(r"[!-~]+\Z")
"""A trailing run of printable ASCII: a word (or a secret) the model may still be writing."""

_MIN_PAUSE: Final = 0.05
"""Seconds without a delta that make a pause (when the interval is shorter, or 0)."""

_MAX_ERROR: Final = 300
"""Characters of a provider's error message kept in an abandoned call's ``error``."""


class AnchorRecorder(Protocol):
    """Where anchors go: a ``tracing.ledger.Ledger`` or anything with its ``record``."""

    def record(self, write: AnchorWrite) -> None: ...


@dataclass(frozen=True, slots=True)
class TapContext:
    """Session, agent, turn and batch written on the anchors of one stream."""

    session_id: str | None = None
    agent_id: str | None = None
    turn: int | None = None
    batch_id: str | None = None


class _Stats:
    """Process-wide counters (``tap_stats()``); updated off the per-event path."""

    KEYS: Final = (
        "streams", "calls", "tapped_calls", "writes", "abandoned", "redaction_dropped",
        "callback_errors", "internal_errors",
    )  # fmt: skip

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[str, int] = dict.fromkeys(self.KEYS, 0)
        self.logged: set[str] = set()
        self.errors = ErrorLog("taps", _log)

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.values[key] += n

    def error(self, key: str, where: str, exc: BaseException) -> None:
        """Count a failure; ``internal_errors`` (our bugs) go to ``tracing.diagnostics``, the
        rest (the app's callback raised, redaction could not run) are logged once here."""
        if key == "internal_errors":
            self.add(key)
            self.errors.report(where, exc)
            return
        with self.lock:
            self.values[key] += 1
            first = where not in self.logged
            self.logged.add(where)
        if first:
            _log.warning("intentrace taps: %s failed (counted, not raised)", where, exc_info=exc)


STATS: Final = _Stats()


def tap_stats() -> dict[str, int]:
    """Counters of every tap in this process: ``streams``, ``calls`` (tool calls seen),
    ``tapped_calls`` (label-bearing), ``writes`` (ledger writes), ``abandoned``,
    ``redaction_dropped`` (writes dropped because redaction could not run: fail closed),
    ``callback_errors`` (raised by ``on_intent``), ``internal_errors`` (bugs, never raised)."""
    with STATS.lock:
        return dict(STATS.values)


def _describe(error: BaseException | str) -> str:
    """``Type: message`` of a stream's failure, cut to ``_MAX_ERROR`` characters."""
    if isinstance(error, str):
        text = error
    else:
        message = str(error).strip()
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 1] + "…"


class _Call:
    __slots__ = (
        "anchor_id", "buffer", "call_id", "clean", "ended", "fed", "held_at", "last_t", "live",
        "pending", "published", "reader", "scheduled", "seen", "seen_at", "seen_t", "shown",
        "start_ns", "state", "superseded", "tool_name", "updates", "visible", "wrote",
    )  # fmt: skip

    def __init__(self) -> None:
        self.state = _PENDING
        self.call_id: str | None = None
        self.anchor_id: str | None = None
        """The anchor's id (``tracing.anchor.anchor_id`` of session, turn and the call id)."""
        self.tool_name: str | None = None
        self.buffer: list[str | bytes] | None = None
        self.reader: IntentStreamReader | None = None
        self.seen: StreamingIntent | None = None
        self.published: str | None = None
        self.wrote = False
        self.updates = 0
        self.last_t = float("-inf")
        self.ended = False
        self.superseded = False
        """A later call of the same choice started (Chat Completions): these arguments are
        complete, unless the provider turns out to interleave its calls' deltas."""
        self.fed = False
        self.live = True  # counted in ToolCallTracker.active
        self.start_ns = time.time_ns()
        self.pending: StreamingIntent | None = None
        """Growth held back by the interval, for the flusher (None: nothing pending)."""
        self.scheduled = False
        self.seen_t = 0.0
        """When the pending growth arrived (``TapOptions.clock``)."""
        self.seen_at = 0.0
        """The same, in ``time.monotonic`` (the flusher's clock)."""
        self.held_at = -1
        """The last candidate checked for secrets (its result is cached in ``visible``)."""
        self.visible = 0
        self.clean = 0
        """A prefix of the intent this long ends inside no possible secret."""
        self.shown = 0
        """Characters of the intent published so far (a label never shrinks)."""


class _Flusher:
    """One daemon thread that publishes growth the interval held back, once it is due, so
    that a model pausing mid-intent does not leave the ledger behind the application."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, ToolCallTracker, _Call]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """In a forked child: the thread did not survive, and its lock may be held."""
        self._cond = threading.Condition(threading.Lock())
        self._heap = []
        self._thread = None

    def schedule(self, delay_s: float, tracker: ToolCallTracker, call: _Call) -> None:
        due = time.monotonic() + max(0.0, delay_s)
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._order), tracker, call))
            thread = self._thread
            if thread is None or not thread.is_alive():
                thread = self._thread = threading.Thread(
                    target=self._run, name="intentrace-taps-flush", daemon=True
                )
                thread.start()
            elif self._heap[0][3] is call:
                self._cond.notify()

    def _run(self) -> None:
        heap, cond = self._heap, self._cond
        while True:
            with cond:
                while True:
                    if not heap:
                        cond.wait()
                        continue
                    wait = heap[0][0] - time.monotonic()
                    if wait <= 0:
                        _, _, tracker, call = heapq.heappop(heap)
                        break
                    cond.wait(wait)
            tracker._flush(call)  # pyright: ignore[reportPrivateUsage]


FLUSHER: Final = _Flusher()
os.register_at_fork(after_in_child=FLUSHER.reset)


class ToolCallTracker:
    """Reads the intent of each tool call of ONE streamed model response as it arrives.

    ``StreamTap.wrap`` makes one per stream and feeds it for you. Use it directly as an event
    handler when you consume the stream some other way: call ``observe(event)`` with each
    event of an ``openai`` or ``anthropic`` stream (or ``start``/``feed``/``end`` for another
    provider), then ``close()`` at the end (``close(error)`` when the stream failed). Never
    raises; not thread-safe (one stream is read by one thread).
    """

    __slots__ = (
        "_abandon", "_calls", "_clock", "_closed", "_context", "_failure", "_flushes",
        "_interval", "_lock", "_max_updates", "_on_intent", "_pause", "_policy", "_recorder",
        "_registry", "_whole_words", "active", "batch_id", "counts", "interleaved", "tops",
    )  # fmt: skip

    def __init__(
        self,
        *,
        recorder: AnchorRecorder | None,
        policy: RedactionPolicy,
        registry: IntentRegistry,
        context: TapContext,
        on_intent: IntentCallback | None = None,
        options: TapOptions | None = None,
    ) -> None:
        opts = options or TapOptions()
        self._recorder = recorder
        self._policy = policy
        self._registry = registry
        self._context = context
        self._on_intent = on_intent
        self._interval = max(0, opts.publish_interval_millis) / 1000
        self._max_updates = max(0, opts.max_updates_per_call)
        self._whole_words = opts.whole_words
        self._abandon = opts.abandon_incomplete
        self._flushes = opts.flush_pending
        self._pause = max(self._interval, _MIN_PAUSE)
        self._clock = opts.clock
        self._calls: dict[Hashable, _Call] = {}
        self._closed = False
        self._failure: str | None = None
        self._lock = threading.Lock()
        """Between the application's thread and the flusher (publishing, never per delta)."""
        self.counts: dict[Hashable, int] = {}
        """Calls seen so far per group (Gemini: per candidate), for positions and ids."""
        self.tops: dict[Hashable, int] = {}
        """Chat Completions: the index of the latest call started in each choice."""
        self.interleaved = False
        """Chat Completions: a call's deltas came after a later call had started (a provider
        that interleaves parallel calls): a later call no longer proves an earlier complete."""
        self.active = 0
        """Calls whose arguments are still read (identity pending, or intent not complete):
        when 0, the events' argument deltas can be skipped unread."""
        self.batch_id: str | None = context.batch_id
        """Sibling calls of this response share it: the given one, else the response id."""
        STATS.add("streams")

    # --- SDK events ----------------------------------------------------------------------------
    def observe(self, event: object) -> None:
        """Take one event of any stream ``StreamTap.wrap`` reads (others are ignored)."""
        try:
            route = ROUTES.get(event.__class__)
            if route is None:
                route = route_for(event)
            route(self, event)
        except Exception as exc:
            STATS.error("internal_errors", "ToolCallTracker.observe", exc)

    # --- provider-neutral steps ----------------------------------------------------------------
    def start(
        self,
        key: Hashable,
        call_id: str | None = None,
        tool_name: str | None = None,
        *,
        batch: object = None,
    ) -> bool:
        """A tool call appears (or more of its identity arrives): ``key`` is its position in
        the response; ``call_id`` the provider's tool call id; ``tool_name`` the tool;
        ``batch`` the response id, when the response has no event of its own that says it.
        True when this identified a new call (its id and name are both known now)."""
        call = self._calls.get(key)
        if call is None:
            call = self._new(key)
        elif call.state != _PENDING:
            if not call_id or call_id == call.call_id or call.call_id is None:
                return False
            # The position is reused by another call (the next response of a multi-response
            # stream): the earlier one's arguments were complete.
            self._finish(call)
            call = self._new(key)
        if call_id:
            call.call_id = call_id
        if tool_name:
            call.tool_name = tool_name
        if call.call_id is None or call.tool_name is None:
            return False
        if batch is not None:
            self.response(batch)
        if not self._registry.is_label_bearing(call.tool_name):
            self._ignore(call)
            return True
        call.state = _TAPPED
        ctx = self._context
        # the identity the span processor gives the same call (same session, turn, call id)
        call.anchor_id = anchor_id(call.call_id, session_id=ctx.session_id, turn=ctx.turn)
        call.reader = IntentStreamReader()
        STATS.add("tapped_calls")
        self._publish(call, None, first=True)
        buffered, call.buffer = call.buffer, None
        for piece in buffered or ():
            self.feed(key, piece)
        return True

    def whole(
        self,
        key: Hashable,
        call_id: str,
        tool_name: str,
        arguments: str | bytes | Mapping[str, Any] | None,
    ) -> None:
        """A tool call that arrives in one piece (Gemini): one streaming row, written at first
        sight with the whole intent. ``arguments``: its JSON text, or the parsed object."""
        if key in self._calls:
            old = self._calls[key]
            if old.call_id == call_id:
                return  # seen already (a provider that repeats a finished call)
            self._finish(old)
        call = self._new(key)
        call.call_id, call.tool_name = call_id, tool_name
        if not self._registry.is_label_bearing(tool_name):
            self._ignore(call)
            return
        call.state = _TAPPED
        ctx = self._context
        call.anchor_id = anchor_id(call_id, session_id=ctx.session_id, turn=ctx.turn)
        STATS.add("tapped_calls")
        if isinstance(arguments, Mapping):
            arguments = json.dumps(arguments, ensure_ascii=False, default=str)
        seen = IntentStreamReader().feed(arguments) if arguments else None
        call.fed = bool(arguments)
        complete = seen if seen is not None and seen.complete else None
        call.seen = complete
        self._finish(call)
        if complete is not None:
            self._tell(call, complete)
        self._publish(call, complete.text if complete else None, first=True, final=True)

    def feed(self, key: Hashable, delta: str | bytes) -> None:
        """The next piece of the arguments of the call at ``key``."""
        call = self._calls.get(key)
        if call is None:
            call = self._new(key)
        if call.state != _TAPPED:
            if call.state == _PENDING:
                buffer = call.buffer
                if buffer is None:
                    buffer = call.buffer = []
                if sum(len(p) for p in buffer) + len(delta) > _MAX_BUFFER:
                    self._ignore(call)  # never identified: give up on it
                else:
                    buffer.append(delta)
            return
        call.fed = True
        reader = call.reader
        if reader is None:
            return
        result = reader.feed(delta)
        if reader.done:  # complete, or no intent to read: nothing more to learn
            call.reader = None
            self._retire(call)
        if result is call.seen:
            return
        call.seen = result
        if result is not None:
            self._grew(call, result)

    def end(self, key: Hashable) -> None:
        """The arguments of the call at ``key`` are complete."""
        call = self._calls.get(key)
        if call is not None:
            self._finish(call)

    def done(self, key: Hashable, arguments: str | bytes | None = None) -> None:
        """The call at ``key`` is complete with ``arguments`` (its whole argument text; read
        only when no delta was fed, as when a provider sends a short call in one piece)."""
        call = self._calls.get(key)
        if call is None:
            return
        if arguments and not call.fed:
            self.feed(key, arguments)
        self.end(key)

    def end_id(self, call_id: str | None) -> None:
        """The call whose provider id is ``call_id`` is complete (a framework's "tool called"
        event: its arguments were whole)."""
        if call_id:
            for call in self._calls.values():
                if call.call_id == call_id:
                    self._finish(call)

    def end_all(self, group: Hashable = None) -> None:
        """End every call, or (``group`` given) those keyed by a tuple that starts with it
        (the calls of one choice of a Chat Completions response)."""
        for key, call in self._calls.items():
            if group is None or (isinstance(key, tuple) and key and key[0] == group):
                self._finish(call)

    def supersede(self, group: Hashable, index: int) -> None:
        """Chat Completions: the call at index ``index`` of choice ``group`` started, so the
        choice's earlier calls' arguments are complete (their tool may run now)."""
        self.tops[group] = index
        for key, call in self._calls.items():
            if (
                isinstance(key, tuple)
                and len(key) == 2  # pyright: ignore[reportUnknownArgumentType]
                and key[0] == group
                and isinstance(key[1], int)
                and key[1] < index
            ):
                call.superseded = True

    def fail(self, reason: str) -> None:
        """The provider reported an error (an ``error`` event, a failed or incomplete
        response): calls left incomplete are abandoned with ``reason`` when the stream ends."""
        if self._failure is None:
            self._failure = _describe(reason)

    def response(self, response_id: object) -> None:
        """A (new) response of the stream starts: its id is the batch of its calls (unless
        a batch was given)."""
        if self._context.batch_id is None and isinstance(response_id, str) and response_id:
            self.batch_id = response_id

    def _new(self, key: Hashable) -> _Call:
        call = self._calls[key] = _Call()
        self.active += 1
        STATS.add("calls")
        return call

    def _retire(self, call: _Call) -> None:
        if call.live:
            call.live = False
            self.active -= 1

    def _ignore(self, call: _Call) -> None:
        call.state = _IGNORED
        call.buffer = None
        self._retire(call)

    def _finish(self, call: _Call) -> None:
        call.ended = True
        call.reader = None
        call.pending = None
        if call.state == _PENDING:
            self._ignore(call)  # its arguments ended before we learnt what it is
        self._retire(call)

    def close(self, error: BaseException | None = None, *, early: bool = False) -> None:
        """The stream is over (``error``: it failed; ``early``: the application stopped
        reading). Calls whose arguments never completed are settled as ``abandoned``
        (``TapOptions.abandon_incomplete``) with the reason in ``error`` (the provider's
        message when it sent one). Idempotent; never raises."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            if error is not None:
                why = f"the stream failed before the arguments were complete: {_describe(error)}"
            elif self._failure is not None:
                why = f"the provider stopped before the arguments were complete: {self._failure}"
            elif early:
                why = "the stream was closed before the arguments were complete"
            else:
                why = "the stream ended before the arguments were complete"
            interleaved = self.interleaved
            for call in self._calls.values():
                call.pending = None
                if call.state != _TAPPED or call.ended or not call.wrote:
                    continue
                if call.superseded and not interleaved:
                    continue  # a later call started: these arguments were complete
                seen = call.seen
                text = seen.text if seen is not None else None
                if seen is not None and not seen.complete:
                    # what the model wrote, but for a trailing part that could be a secret
                    text = self._visible(call, seen.text, words=False)
                    if text is None:
                        text = seen.text[: call.shown] or None
                if self._abandon:
                    self._publish(call, text, status=Status.ABANDONED, error=why)
                    STATS.add("abandoned")
                elif text:
                    self._publish(call, text)  # what the flusher had pending
        except Exception as exc:
            STATS.error("internal_errors", "ToolCallTracker.close", exc)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    # --- publishing ------------------------------------------------------------------------------
    def _tell(self, call: _Call, result: StreamingIntent) -> None:
        callback = self._on_intent
        if callback is not None:
            try:
                callback(
                    call.call_id or "",
                    call.tool_name or "",
                    StreamingIntent(sanitize_label(result.text, INTENT_MAX_CHARS), result.complete),
                )
            except Exception as exc:
                STATS.error("callback_errors", "the on_intent callback", exc)

    def _grew(self, call: _Call, result: StreamingIntent) -> None:
        if not result.text and not result.complete:
            return  # the opening quote: nothing to show yet
        if self._on_intent is not None:
            self._tell(call, result)
        if self._recorder is None:
            return
        if result.complete:
            with self._lock:
                call.pending = None
                self._publish(call, result.text, final=True)
            return
        if call.updates >= self._max_updates:
            return
        now = self._clock()
        if now - call.last_t >= self._interval:
            with self._lock:
                call.pending = None
                text = self._visible(call, result.text, words=self._whole_words)
                if text and call.updates < self._max_updates and self._publish(call, text):
                    call.shown = len(text)
                    call.updates += 1
                    call.last_t = now
            if call.shown >= len(result.text) or call.updates >= self._max_updates:
                return
        if not self._flushes:
            return
        # Held back (too soon after the last write, or a word still being written): if the
        # model pauses here, the flusher shows it once the interval has passed with no delta.
        call.pending = result
        call.seen_t = now
        call.seen_at = time.monotonic()
        if not call.scheduled:
            with self._lock:
                if not call.scheduled and not self._closed:
                    call.scheduled = True
                    FLUSHER.schedule(self._pause, self, call)

    def _visible(self, call: _Call, text: str, *, words: bool) -> str | None:
        """What of a growing intent may be published now, or None when nothing new: ``text``
        cut before any trailing part that could still become a secret under the policy's
        rules (``redaction.secret_tail``: a half-written token, the groups of a spaced card
        number so far), and, with ``words``, before a word still being written (a trailing
        run of printable ASCII). Never shorter than what was published already."""
        cut = len(text)
        if words:
            m = _TRAILING_TOKEN.search(text)
            if m is not None:
                cut = m.start()
        key = cut * 2 + words
        if key != call.held_at:  # a new candidate (the text only grows: check its new part)
            call.held_at = key
            scrub = self._policy.scrubbing
            at = cut
            while True:
                tail = secret_tail(text[:at], min(call.clean, at), scrub)
                if tail >= at:
                    break
                at = tail
                if words:  # back to the start of the word the secret would begin in
                    m = _TRAILING_TOKEN.search(text, 0, at)
                    if m is not None:
                        at = m.start()
            call.clean = max(call.clean, at)
            call.visible = at
        if call.visible <= call.shown:
            return None
        return text[: call.visible]

    def _flush(self, call: _Call) -> None:
        """The flusher's turn (its thread): if no delta came for the interval, publish the
        growth that was held back, all of it but what could still become a secret."""
        try:
            with self._lock:
                call.scheduled = False
                pending = call.pending
                if pending is None or self._closed or call.ended:
                    return
                if call.updates >= self._max_updates:
                    return
                idle = time.monotonic() - call.seen_at
                if idle < self._pause * 0.95:  # the stream goes on: look again later
                    call.scheduled = True
                    FLUSHER.schedule(self._pause - idle, self, call)
                    return
                text = self._visible(call, pending.text, words=False)
                if text and self._publish(call, text):
                    call.shown = len(text)
                    call.updates += 1
                    call.last_t = call.seen_t + self._interval
        except Exception as exc:
            STATS.error("internal_errors", "ToolCallTracker._flush", exc)

    def _publish(
        self,
        call: _Call,
        text: str | None,
        *,
        first: bool = False,
        final: bool = False,
        status: Status = Status.STREAMING,
        error: str | None = None,
    ) -> bool:
        """Redact, sanitize and write one anchor update; False when nothing was written."""
        recorder = self._recorder
        if recorder is None:
            return False
        tool = call.tool_name or ""
        ctx = self._context
        try:
            red = self._policy.redact_call(
                tool_name=tool, agent_id=ctx.agent_id, intent=text, error=error
            )
        except Exception as exc:  # RedactionError: fail closed, the update is dropped
            STATS.error("redaction_dropped", "redaction of a streaming intent", exc)
            return False
        intent = (sanitize_label(red.intent, INTENT_MAX_CHARS) if red.intent else None) or None
        if intent == call.published and status == Status.STREAMING and not first and not final:
            return False
        write: dict[str, Any] = {
            "tool_call_id": call.anchor_id,
            "tool_name": tool,
            "status": status,
            "intent": intent,
        }
        if first:
            # (ids coerced as the processor's are: a lone surrogate would fail the write)
            write["provider_call_id"] = safe_id(call.call_id) if call.call_id else call.call_id
            write["session_id"] = safe_id(ctx.session_id or "")
            write["start_ns"] = call.start_ns
            if ctx.agent_id is not None:
                write["agent_id"] = safe_id(ctx.agent_id)
            if ctx.turn is not None:
                write["turn"] = ctx.turn
            if self.batch_id is not None:
                write["batch_id"] = safe_id(self.batch_id)
        if first or final or status != Status.STREAMING:
            decision = red.decision
            write["redaction"] = json.dumps(
                {
                    "args": str(decision.args),
                    "output": str(decision.output),
                    "intent_hidden": bool(text) and intent is None,
                    "outcome_hidden": False,
                    "scrubbed": red.scrubbed,
                }
            )
        if status != Status.STREAMING:
            write["end_ns"] = time.time_ns()
            write["error"] = red.error
        try:
            recorder.record(write)  # pyright: ignore[reportArgumentType]
        except Exception as exc:  # a Ledger never raises; another recorder might
            STATS.error("internal_errors", "recording a streaming anchor", exc)
            return False
        call.published = intent
        call.wrote = True
        STATS.add("writes")
        return True
