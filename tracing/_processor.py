"""``IntentSpanProcessor``: tool spans named by intent, in every exporter it wraps.

It *is* a ``SpanProcessor`` that wraps the processors that export (``BatchSpanProcessor``,
Langfuse's): ``on_start`` sees the live span (rename it when the args are start attributes or
a model span already listed the call; write the in-flight anchor), ``on_end`` hands a shaped
copy — a new ``ReadableSpan`` with the label as name and every data-bearing attribute redacted —
to the wrapped processors (in opentelemetry-sdk 1.45 an ended span cannot be changed).

Hot-path hooks never raise into the app: errors are logged once, counted (``stats()``) and kept
for tests (``internal_errors()``). A tool span whose redaction fails is dropped (fail closed).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import Status, StatusCode, format_span_id, format_trace_id

from tracing import attributes as A
from tracing._context import SESSION, SessionInfo
from tracing._conventions import (
    DEFAULT_CONVENTIONS,
    Convention,
    EventView,
    SpanView,
    ToolFacts,
    is_model_span,
    match_convention,
    requested_calls,
)
from tracing._derive import (
    CallContext,
    Naming,
    PolicyLike,
    RegistryLike,
    StartCall,
    derive_call,
    derive_start,
    langfuse_attributes,
    raw_intent_of,
    safe_text,
)
from tracing._intent import IntentRegistry, default_registry, read_intent, sanitize_label
from tracing._learn import MAX_TRACES, Pending, RequestedCalls
from tracing._options import IntentOptions
from tracing._status import default_label, frame_label
from tracing.ledger._model import AnchorWrite

logger = logging.getLogger("tracing.processor")

_PROCESSORS: Final[weakref.WeakSet[IntentSpanProcessor]] = weakref.WeakSet()
_MAX_ERRORS: Final = 100
_MAX_SCOPES: Final = 200_000


class LedgerSink(Protocol):
    """Where anchors go (``tracing.ledger.Ledger`` satisfies it). Must not block or raise."""

    def record(self, write: AnchorWrite) -> None: ...

    def set_activity(
        self, session_id: str, batch_id: str, label: str, *, turn: int | None = None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class _Scope:
    """What descendants of a span inherit."""

    session_id: str | None
    agent_id: str | None
    turn: int | None
    call_id: str | None
    """Anchor id of this span (when it is a tool span) or of its nearest tool ancestor."""
    parent_call_id: str | None
    """Anchor id of the nearest tool ancestor (excluding this span)."""


@dataclass(slots=True)
class _Live:
    span: Span
    facts: ToolFacts
    ctx: CallContext
    start: StartCall
    pending: Pending | None = None
    """The learned call this span was matched to by tool name and order (not by call id)."""
    claimed: bool = False


def span_view(span: ReadableSpan) -> SpanView:
    """A :class:`SpanView` of an SDK span (live or ended)."""
    ctx = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    return SpanView(
        name=span.name,
        attributes=span.attributes or {},
        events=tuple(EventView(e.name, e.attributes or {}, e.timestamp) for e in span.events),
        status_code=span.status.status_code.value,
        status_message=span.status.description,
        trace_id=format_trace_id(ctx.trace_id) if ctx is not None else None,
        span_id=format_span_id(ctx.span_id) if ctx is not None else None,
        parent_span_id=format_span_id(parent.span_id) if parent is not None else None,
        start_ns=span.start_time,
        end_ns=span.end_time,
        resource=span.resource.attributes,
        scope_name=scope.name if scope is not None else None,
    )


def _is_langfuse_processor(processor: SpanProcessor) -> bool:
    return any(cls.__name__ == "LangfuseSpanProcessor" for cls in type(processor).__mro__)


def _default_policy() -> PolicyLike:
    from redaction import RedactionPolicy

    return RedactionPolicy.load()


class IntentSpanProcessor(SpanProcessor):
    """Names tool spans by intent and forwards a redacted, shaped copy to the processors it wraps.

    Args:
        *processors: the exporting processors to wrap (e.g.
            ``BatchSpanProcessor(OTLPSpanExporter())``, Langfuse's ``LangfuseSpanProcessor``).
        policy: the redaction policy (default ``RedactionPolicy.load()``: the file named by
            ``$INTENTRACE_REDACTION_POLICY``, else keep everything and scrub secrets).
        registry: label-bearing tool names (default: ``default_registry()``, which
            ``inject_intent`` fills). A span flag ``intentrace.label_bearing`` wins.
        ledger: where anchors go (``record``/``set_activity``), e.g. ``open_ledger(...)``.
        options: naming mode, Langfuse tag, background timeout, threading.
        conventions: how tool spans are recognised (default: GenAI semconv, OpenInference,
            OpenLLMetry/Traceloop, Langfuse); put your own first.
        langfuse_processors: wrapped processors that feed a Langfuse server (detected
            automatically for ``LangfuseSpanProcessor``): they get copies whose
            ``gen_ai.tool.name`` moved to ``intentrace.tool.name`` so the server shows the label.
    """

    def __init__(
        self,
        *processors: SpanProcessor,
        policy: PolicyLike | None = None,
        registry: RegistryLike | IntentRegistry | None = None,
        ledger: LedgerSink | None = None,
        options: IntentOptions | None = None,
        conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
        langfuse_processors: Iterable[SpanProcessor] = (),
    ) -> None:
        self._options = options or IntentOptions()
        self._naming: Naming = self._options.resolved_naming()
        self._tag = self._options.resolved_langfuse_tag()
        self._policy: PolicyLike = policy if policy is not None else _default_policy()
        self._registry: RegistryLike = registry if registry is not None else default_registry()
        self._ledger = ledger
        self._conventions = tuple(conventions)
        self._lock = threading.RLock()
        """Guards the call state; held while one item is handled (never by the app thread
        in threaded mode)."""
        self._small = threading.Lock()
        """Guards counters and the queue depth (held for nanoseconds, safe on the app thread)."""
        self._processors: tuple[SpanProcessor, ...] = ()
        self._langfuse: set[int] = {id(p) for p in langfuse_processors}
        for processor in (*processors, *langfuse_processors):
            self.add_processor(processor)
        self._live: dict[int, _Live] = {}
        self._scopes: dict[int, _Scope] = {}
        self._requested = RequestedCalls()
        self._background: dict[int, tuple[Span, float]] = {}
        self._activity_seen: set[int] = set()
        self._by_name: dict[int, list[_Live]] = {}
        self._counts: dict[str, int] = {}
        self._errors: deque[tuple[str, str]] = deque(maxlen=_MAX_ERRORS)
        self._logged: set[str] = set()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending = 0
        self._room = threading.Condition(self._small)
        self._seen: set[int] = set()
        """Span ids started and not yet ended (for ``mark_background``)."""
        self._worker: threading.Thread | None = None
        self._pid = os.getpid()
        self._shutdown = False
        _PROCESSORS.add(self)

    # ----------------------------------------------------------------------------- wrapping
    @property
    def processors(self) -> tuple[SpanProcessor, ...]:
        """The wrapped processors."""
        return self._processors

    @property
    def naming(self) -> str:
        return self._naming

    def add_processor(self, processor: SpanProcessor, *, langfuse: bool | None = None) -> None:
        """Wrap one more exporting processor (``langfuse=None``: detect Langfuse's)."""
        if processor is self:
            return
        with self._small:
            if any(p is processor for p in self._processors):
                return
            self._processors = (*self._processors, processor)
            if langfuse or (langfuse is None and _is_langfuse_processor(processor)):
                self._langfuse.add(id(processor))

    # ----------------------------------------------------------------------------- errors
    def _count(self, key: str, n: int = 1) -> None:
        with self._small:
            self._counts[key] = self._counts.get(key, 0) + n

    def _fail(self, where: str, exc: BaseException) -> None:
        self._count("internal_errors")
        self._errors.append((where, f"{type(exc).__name__}: {exc}"))
        if where not in self._logged:
            self._logged.add(where)
            logger.warning("intentrace: internal error in %s (logged once)", where, exc_info=exc)

    def stats(self) -> dict[str, int]:
        """Counters: tool spans, named at start/settle, learned/matched calls, dropped, errors..."""
        with self._small:
            counts = dict(self._counts)
        counts["live_calls"] = len(self._live)
        counts["background_calls"] = len(self._background)
        counts["queue_depth"] = self._pending
        return counts

    def internal_errors(self) -> list[tuple[str, str]]:
        """The latest internal errors (where, message) — tests assert this stays empty."""
        return list(self._errors)

    # ----------------------------------------------------------------------------- hooks
    # The app thread only stamps the session and enqueues; everything else happens in
    # ``_handle``, one item at a time, in the processor's thread (or inline, under the lock,
    # with ``in_thread=False``). One FIFO queue keeps the order that matters: a model span's
    # end (learning its calls) before the tool spans it requested start, a span's start
    # before its end, a parent's start before its children's.

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            session = SESSION.get()
            if session is not None:
                self._stamp_session(span, session)
            self._submit(("start", span, session))
        except Exception as exc:
            self._fail("on_start", exc)
        for processor in self._processors:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception as exc:
                self._fail(f"{type(processor).__name__}.on_start", exc)

    def _on_ending(self, span: Span) -> None:
        for processor in self._processors:
            try:
                processor._on_ending(span)  # pyright: ignore[reportPrivateUsage]
            except Exception as exc:
                self._fail(f"{type(processor).__name__}._on_ending", exc)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._submit(("end", span))
        except Exception as exc:  # could not even enqueue: export the span as it is
            self._fail("on_end", exc)
            if match_convention(span.name, span.attributes or {}, self._conventions) is None:
                self._forward_plain(span)
            else:
                self._count("dropped")

    def mark_background(self, span: Span, timeout_s: float | None = None) -> bool:
        """A live tool span was dispatched to the background: frame it, keep it in flight.

        It settles when it ends (the harvest); if it is still live after ``timeout_s``
        (default ``options.background_timeout_s``) it ends as an error (``· timed out``).
        Returns False when this processor did not see the span start.
        """
        context = span.context
        if context is None or context.span_id not in self._seen:
            return False
        limit = timeout_s if timeout_s is not None else self._options.background_timeout_s
        self._submit(("background", span, limit))
        return True

    @staticmethod
    def _stamp_session(span: Span, session: SessionInfo) -> None:
        attrs = span.attributes or {}
        own: dict[str, Any] = {A.SESSION_ID: session.session_id}
        if A.SESSION_ID_KEY not in attrs:
            own[A.SESSION_ID_KEY] = session.session_id
        if session.agent_id:
            own[A.AGENT_ID] = session.agent_id
        if session.turn is not None:
            own[A.TURN] = session.turn
        span.set_attributes(own)

    # ----------------------------------------------------------------------------- the queue
    def _submit(self, item: tuple[Any, ...]) -> None:
        if item[0] == "start":
            context = item[1].context
            if context is not None:
                self._seen.add(context.span_id)
        if not self._options.in_thread:
            self._process(item)
            return
        self._ensure_worker()
        if self._pending >= self._options.max_queue:  # back-pressure, never a drop
            self._count("waited_for_queue")
            with self._room:
                while self._pending >= self._options.max_queue and self._worker_alive():
                    self._room.wait(0.05)
        with self._small:
            self._pending += 1
        self._queue.put(item)

    def _process(self, item: tuple[Any, ...]) -> None:
        with self._lock:
            try:
                kind = item[0]
                if kind == "start":
                    self._handle_start(item[1], item[2])
                elif kind == "end":
                    self._handle_end(item[1])
                elif kind == "background":
                    self._handle_background(item[1], item[2])
            except Exception as exc:
                self._fail(f"handle {item[0]}", exc)

    def _worker_alive(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _ensure_worker(self) -> None:
        if self._worker_alive() and self._pid == os.getpid():
            return
        with self._small:
            if self._worker_alive() and self._pid == os.getpid():
                return
            if self._pid != os.getpid():  # forked: the queue and its thread stayed behind
                self._pid = os.getpid()
                self._queue = queue.SimpleQueue()
                self._pending = 0
            self._worker = threading.Thread(
                target=self._run, name="intentrace-processor", daemon=True
            )
            self._worker.start()

    def _run(self) -> None:
        timeout: float | None = None
        while True:
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            try:
                if isinstance(item, tuple):
                    self._process(item)  # pyright: ignore[reportUnknownArgumentType]
                    with self._room:
                        self._pending -= 1
                        self._room.notify_all()
                elif isinstance(item, threading.Event):
                    item.set()
                elif item == "stop":
                    return
                timeout = self._reap()
            except Exception as exc:  # never let the thread die
                self._fail("processor thread", exc)

    # ----------------------------------------------------------------------------- start
    def _handle_start(self, span: Span, session: SessionInfo | None) -> None:
        context = span.context
        if context is None:
            return
        attrs: Mapping[str, Any] = span.attributes or {}
        parent = span.parent
        inherited = self._scopes.get(parent.span_id) if parent is not None else None
        session_id = session.session_id if session else None
        agent_id = session.agent_id if session else None
        turn = session.turn if session else None
        if inherited is not None:
            session_id = session_id or inherited.session_id
            agent_id = agent_id or inherited.agent_id
            turn = turn if turn is not None else inherited.turn

        if A.ACTIVITY in attrs:
            self._activity(span, attrs, session_id, turn)
            self._activity_seen.add(context.span_id)

        name = span.name
        convention = match_convention(name, attrs, self._conventions)
        learned_ok = self._options.learn_from_model_spans and self._requested.has(context.trace_id)
        pending: Pending | None = None
        facts: ToolFacts | None = None
        view: SpanView | None = None
        if convention is not None:
            view = span_view(span)
            facts = convention.facts(view)
            if learned_ok:
                pending = self._requested.take(
                    context.trace_id, call_id=facts.call_id, tool_name=facts.tool_name
                )
        elif learned_ok:
            # instrumentations that start tool spans with no attributes, named by the tool
            pending = self._requested.take(context.trace_id, call_id=None, tool_name=name)
            if pending is not None:
                view = span_view(span)
                facts = ToolFacts(
                    convention="learned", tool_name=pending.tool_name, call_id=pending.call_id
                )
        parent_call = inherited.call_id if inherited is not None else None
        if facts is None or view is None:
            if session_id or agent_id or turn is not None or parent_call:
                self._scope(
                    context.span_id, _Scope(session_id, agent_id, turn, parent_call, parent_call)
                )
            return

        self._count("tool_spans_started")
        if pending is not None:
            self._count("learned_matched")
        ctx = CallContext(
            session_id=session_id,
            agent_id=agent_id,
            turn=turn,
            parent_call_id=parent_call,
            call_id=pending.call_id if pending is not None else None,
            learned_intent=pending.raw_intent if pending is not None else None,
            batch_id=pending.batch_id if pending is not None else None,
        )
        start = derive_start(
            view, facts, policy=self._policy, registry=self._registry, ctx=ctx, naming=self._naming
        )
        ctx = replace(ctx, call_id=start.call_id)
        by_name = pending is not None and not (
            convention is not None and facts.call_id and facts.call_id == pending.call_id
        )
        live = _Live(span, facts, ctx, start, pending if by_name else None)
        self._live[context.span_id] = live
        if by_name:
            self._by_name.setdefault(context.trace_id, []).append(live)
            while len(self._by_name) > MAX_TRACES:
                del self._by_name[next(iter(self._by_name))]
        self._scope(context.span_id, _Scope(session_id, agent_id, turn, start.call_id, parent_call))
        if start.name is not None:
            self._count("named_at_start")  # the label was known at start (in-flight anchor)
        if span.end_time is None:  # (in the processor's thread it may have ended already)
            marks: dict[str, Any] = {A.TOOL_CALL_ID: start.call_id, A.LABEL: start.label}
            if start.intent:
                marks[A.INTENT] = start.intent
            if start.name is not None:
                marks[A.ORIGINAL_NAME] = safe_text(self._policy.scrub_text(name))
                span.update_name(start.name)
                self._count("renamed_live")
            span.set_attributes(marks)
        self._record(start.anchor.copy())  # the ledger owns the dict it gets

    def _scope(self, span_id: int, scope: _Scope) -> None:
        if len(self._scopes) >= _MAX_SCOPES:  # spans that never end: forget the oldest
            del self._scopes[next(iter(self._scopes))]
        self._scopes[span_id] = scope

    def _activity(
        self, span: ReadableSpan, attrs: Mapping[str, Any], session_id: str | None, turn: int | None
    ) -> None:
        label = attrs.get(A.ACTIVITY)
        context = span.context
        if not isinstance(label, str) or not label or self._ledger is None or context is None:
            return
        shown = sanitize_label(self._policy.scrub_text(label))
        if shown:
            try:
                self._ledger.set_activity(
                    session_id or "", format_span_id(context.span_id), shown, turn=turn
                )
            except Exception as exc:
                self._fail("ledger.set_activity", exc)

    def _record(self, write: AnchorWrite) -> None:
        if self._ledger is None:
            return
        try:
            self._ledger.record(write)
        except Exception as exc:
            self._fail("ledger.record", exc)

    # ----------------------------------------------------------------------------- background
    def _handle_background(self, span: Span, timeout_s: float) -> None:
        context = span.context
        live = self._live.get(context.span_id) if context is not None else None
        if live is None or context is None or span.end_time is not None:
            return
        start = live.start
        label = frame_label(
            tool_name=start.anchor["tool_name"], status="background", intent=start.intent
        )
        if self._naming == "intent" and start.intent:
            span.update_name(label)
        span.set_attributes({A.BACKGROUND: True, A.LABEL: label})
        anchor = start.anchor.copy()
        anchor["status"] = "background"
        anchor["label"] = label
        self._record(anchor)
        self._background[context.span_id] = (span, time.monotonic() + timeout_s)
        self._count("background_dispatched")

    def _reap(self) -> float | None:
        """End overdue background calls; returns seconds until the next deadline."""
        if not self._background:
            return None
        now = time.monotonic()
        due = [(sid, s) for sid, (s, deadline) in list(self._background.items()) if deadline <= now]
        for span_id, span in due:
            self._background.pop(span_id, None)
            try:
                if span.end_time is None:
                    span.set_attribute(A.TIMED_OUT, True)
                    span.set_status(Status(StatusCode.ERROR, "background call timed out"))
                    self._count("background_timed_out")
                    span.end()  # its end item is queued behind us
            except Exception as exc:
                self._fail("reap", exc)
        deadlines = [d for _, d in self._background.values()]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    # ----------------------------------------------------------------------------- end
    def _handle_end(self, span: ReadableSpan) -> None:
        context = span.context
        span_id = context.span_id if context is not None else 0
        self._seen.discard(span_id)
        live = self._live.pop(span_id, None)
        scope = self._scopes.pop(span_id, None)
        self._background.pop(span_id, None)
        reported = span_id in self._activity_seen
        self._activity_seen.discard(span_id)
        attrs: Mapping[str, Any] = span.attributes or {}
        if self._options.learn_from_model_spans and context is not None and is_model_span(attrs):
            self._learn(context.trace_id, span_id, attrs)
        convention = match_convention(span.name, attrs, self._conventions)
        if live is None and convention is None:
            if A.ACTIVITY in attrs and not reported:
                self._activity(
                    span, attrs, scope.session_id if scope else None, scope.turn if scope else None
                )
            self._forward_plain(span)
            return
        self._settle(span, live, scope, convention)

    def _learn(self, trace_id: int, span_id: int, attrs: Mapping[str, Any]) -> None:
        try:
            calls = requested_calls(attrs)
            if calls:
                added = self._requested.add(
                    trace_id, calls, read_intent, batch_id=format_span_id(span_id)
                )
                self._count("learned_calls", added)
        except Exception as exc:
            self._fail("learn", exc)

    def _forward_plain(self, span: ReadableSpan) -> None:
        name = span.name
        if not name.isascii() and safe_text(name) != name:
            span = _copy(span, name=safe_text(name))
        self._forward(span, span)

    def _forward(self, span: ReadableSpan, langfuse_span: ReadableSpan) -> None:
        for processor in self._processors:
            try:
                processor.on_end(langfuse_span if id(processor) in self._langfuse else span)
            except Exception as exc:
                self._fail(f"{type(processor).__name__}.on_end", exc)

    def _settle(
        self,
        span: ReadableSpan,
        live: _Live | None,
        scope: _Scope | None,
        convention: Convention | None,
    ) -> None:
        try:
            view = span_view(span)
            if live is not None:
                ctx = live.ctx
            else:
                ctx = CallContext(
                    session_id=scope.session_id if scope else None,
                    agent_id=scope.agent_id if scope else None,
                    turn=scope.turn if scope else None,
                    parent_call_id=scope.parent_call_id if scope else None,
                )
            facts = convention.facts(view) if convention is not None else None
            if facts is None and live is not None:
                facts = live.facts
            if facts is None:
                self._forward_plain(span)
                return
            if live is not None and live.pending is not None:
                ctx = self._reconcile(live, facts, span)
            derived = derive_call(
                view,
                policy=self._policy,
                facts=facts,
                registry=self._registry,
                ctx=ctx,
                naming=self._naming,
                langfuse_tag=self._tag,
            )
        except Exception as exc:
            # redaction could not run (RedactionError) or a bug: fail closed
            self._count("dropped")
            self._fail("settle", exc)
            if live is not None:
                self._settle_minimal(span, live)
            return
        if derived is None:
            self._forward_plain(span)
            return
        self._count("tool_spans_settled")
        if derived.renamed and (live is None or live.start.name is None):
            self._count("named_at_settle")
        try:
            shaped = _copy(
                span,
                name=derived.name,
                attributes=derived.attributes,
                events=derived.events,
                status_message=derived.status_message,
            )
            for_langfuse = shaped
            if self._langfuse:
                for_langfuse = _copy(shaped, attributes=langfuse_attributes(derived))
        except Exception as exc:
            self._count("dropped")
            self._fail("shape", exc)
            return
        self._record(derived.anchor)
        self._forward(shaped, for_langfuse)

    def _reconcile(self, live: _Live, facts: ToolFacts, span: ReadableSpan) -> CallContext:
        """A span matched to a learned call by tool name may have got a sibling's call (parallel
        calls of one tool start in any order). Its own args, known now, tell which one it was:
        take that call's id and intent, and give ours to the sibling still waiting for it."""
        own = raw_intent_of(facts, gate=True, full=True)
        context = span.context
        trace_id = context.trace_id if context is not None else 0
        live.claimed = True
        mine = live.pending
        siblings = self._by_name.get(trace_id, [])
        if mine is not None and own and own != mine.raw_intent:
            for other in siblings:
                theirs = other.pending
                if (
                    other is not live
                    and not other.claimed
                    and theirs is not None
                    and theirs.tool_name == mine.tool_name
                    and theirs.raw_intent == own
                ):
                    other.pending, live.pending = mine, theirs
                    other.ctx = _with_learned(other.ctx, mine)
                    live.ctx = _with_learned(live.ctx, theirs)
                    self._count("learned_reassigned")
                    break
            else:  # the call it really was has not started yet: trade with the queue
                theirs = self._requested.exchange(trace_id, mine, own)
                if theirs is not None:
                    live.pending = theirs
                    live.ctx = _with_learned(live.ctx, theirs)
                    self._count("learned_reassigned")
        if live in siblings:
            siblings.remove(live)
        if not siblings:
            self._by_name.pop(trace_id, None)
        return live.ctx

    def _settle_minimal(self, span: ReadableSpan, live: _Live) -> None:
        """Redaction failed: settle the in-flight anchor with nothing model- or tool-written."""
        status = "error" if span.status.status_code == StatusCode.ERROR else "success"
        write = live.start.anchor.copy()
        write["status"] = status
        write["label"] = default_label(write["tool_name"], status)
        write["intent"] = None
        write["end_ns"] = span.end_time
        self._record(write)

    # ----------------------------------------------------------------------------- lifecycle
    def _drain(self, timeout_s: float) -> bool:
        if not self._worker_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout_s)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        ok = self._drain(timeout_millis / 1000)
        for processor in self._processors:
            remaining = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                ok = processor.force_flush(remaining) and ok
            except Exception as exc:
                self._fail(f"{type(processor).__name__}.force_flush", exc)
                ok = False
        return ok

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        self._drain(30.0)
        if self._worker_alive():
            self._queue.put("stop")
            assert self._worker is not None
            self._worker.join(5.0)
        for processor in self._processors:
            try:
                processor.shutdown()
            except Exception as exc:
                self._fail(f"{type(processor).__name__}.shutdown", exc)


def _with_learned(ctx: CallContext, pending: Pending) -> CallContext:
    if pending.call_id:
        return replace(ctx, call_id=pending.call_id, learned_intent=pending.raw_intent)
    return replace(ctx, learned_intent=pending.raw_intent)


def _copy(
    span: ReadableSpan,
    *,
    name: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    events: Sequence[EventView] | None = None,
    status_message: str | None = None,
) -> ReadableSpan:
    """A new ``ReadableSpan`` like ``span`` with some parts replaced."""
    status = span.status
    if status_message is not None or events is not None:
        status = (
            Status(StatusCode.ERROR, status_message)
            if status.status_code == StatusCode.ERROR
            else Status(status.status_code)
        )
    return ReadableSpan(
        name=name if name is not None else span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=dict(attributes) if attributes is not None else span.attributes,
        events=tuple(Event(e.name, dict(e.attributes), e.time_ns) for e in events)
        if events is not None
        else span.events,
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def notify_background(span: Span, timeout_s: float | None = None) -> bool:
    """Tell every live ``IntentSpanProcessor`` that ``span`` went to the background."""
    handled = False
    for processor in list(_PROCESSORS):
        handled = processor.mark_background(span, timeout_s) or handled
    return handled
