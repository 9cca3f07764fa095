"""``IntentSpanProcessor``: tool spans named by intent, in every exporter it wraps.

It *is* a ``SpanProcessor`` that wraps the processors that export (``BatchSpanProcessor``,
Langfuse's): ``on_start`` sees the live span (rename it when the args are start attributes or
a model span already listed the call; write the in-flight anchor), ``on_end`` hands a shaped
copy — a new ``ReadableSpan`` with the label as name and every data-bearing attribute redacted —
to the wrapped processors (in opentelemetry-sdk 1.45 an ended span cannot be changed).

Hot-path hooks never raise into the app: internal errors are reported to ``tracing.diagnostics``
(logged once, counted in ``stats()``, kept for ``internal_errors()``). A tool span whose
redaction fails is dropped (fail closed).

The app thread never waits on the processor: it stamps the session and enqueues. When the
queue is full (``IntentOptions.max_queue``) the span's processing is shed, counted and logged
once; its exported copy is a stub (name scrubbed, identifiers only) and its anchor is settled
without outcome, or missing; the ledger counts those calls (``Ledger.dropped``). The
processor's own thread never waits on its queue either (a background call it times out ends
through ``on_end`` on that thread).
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from redaction import RedactionPolicy
from tracing import attributes as A
from tracing._context import SESSION, SessionInfo
from tracing.anchor import LedgerSink
from tracing.derive._call import Naming, PolicyLike, RegistryLike
from tracing.derive._conventions import DEFAULT_CONVENTIONS, Convention, match_convention
from tracing.diagnostics import ErrorLog
from tracing.intent import IntentRegistry, default_registry
from tracing.otel._calls import CallTracker
from tracing.otel._options import IntentOptions
from tracing.otel._spans import (
    is_langfuse_processor,
    plain_attributes,
    span_view,
    stub_span,
)

__all__ = ["IntentSpanProcessor", "LedgerSink", "notify_background", "span_view"]

logger = logging.getLogger("tracing.processor")

_PROCESSORS: Final[weakref.WeakSet[IntentSpanProcessor]] = weakref.WeakSet()


THREAD_NAME: Final = "intentrace-processor"
"""The processor's thread (one per processor)."""
_BACKOFF: Final = 3.0
"""While the app makes spans, the processor's thread sleeps this many times as long as its last
item took (it holds the GIL at most a quarter of the time), up to ``_BACKOFF_FULL`` times as
the queue fills: an app thread rarely waits for the GIL (each wait lasts at most one item;
bench/processor.py: app thread wall clock, the burst's p99 wait)."""
_BACKOFF_FULL: Final = 30.0
"""With the queue full the app outruns the processor whatever it does (spans are shed): it
takes at most a thirtieth of the time, and drains the backlog once the app pauses."""
_BACKOFF_MAX_S: Final = 0.05
_MARKER_ROOM: Final = 4
"""Shed-span markers may fill the queue to this many times ``max_queue`` (each is a few ids)."""
_NAMES_CACHED: Final = 4096
LATE_ARGS_SCOPES: Final = frozenset({"langfuse-sdk"})
"""Tracers whose tool spans get their attributes just after start (Langfuse ``@observe`` sets
the observation type, then its input, once the span exists): the processor reads such a span
again when the attributes that make it a tool span with args arrive."""
_LATE_ARGS_SETS: Final = 8
"""How many ``set_attributes`` calls of such a span are looked at before giving up."""


class _EndedSpanRace(logging.Filter):
    """Our thread renames live spans; one may end between our check and the call. The SDK then
    warns; that race is expected and harmless, so its warnings from our thread are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            threading.current_thread().name == THREAD_NAME and "ended span" in str(record.msg)
        )


_filter_lock = threading.Lock()
_filter_installed = False


def _install_log_filter() -> None:
    """Once per process, when a processor's thread first starts (never at import)."""
    global _filter_installed
    with _filter_lock:
        if not _filter_installed:
            logging.getLogger("opentelemetry.sdk.trace").addFilter(_EndedSpanRace())
            _filter_installed = True


def _default_policy() -> PolicyLike:
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
        options: naming mode, Langfuse tag, background timeout, threading, queue size.
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
        self._in_thread = self._options.in_thread
        self._max_queue = max(1, self._options.max_queue)
        self._max_markers = self._max_queue * _MARKER_ROOM
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
        """Guards counters (held for nanoseconds, safe on the app thread)."""
        self._processors: tuple[SpanProcessor, ...] = ()
        self._langfuse: set[int] = {id(p) for p in langfuse_processors}
        for processor in (*processors, *langfuse_processors):
            self.add_processor(processor)
        self._counts: dict[str, int] = {}
        self._errors = ErrorLog("processor", logger)
        self._warned_shed = False
        self._names: dict[str, str] = {}
        """Span names as scrubbed for stubs (names repeat: OpenTelemetry wants them few)."""
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._puts = itertools.count(1)
        self._put = 0
        """Items enqueued so far (``next(self._puts)`` is atomic: no lock on the app thread)."""
        self._done = 0
        """Items handled so far (written by the processor's thread only)."""
        self._worker: threading.Thread | None = None
        self._worker_ident: int | None = None
        if hasattr(os, "register_at_fork"):
            weak = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (m := weak()) and m())
        self._shutdown = False
        self._calls = CallTracker(
            self,
            policy=self._policy,
            registry=self._registry,
            ledger=ledger,
            options=self._options,
            naming=self._naming,
            langfuse_tag=self._tag,
            conventions=self._conventions,
        )
        _PROCESSORS.add(self)

    # ----------------------------------------------------------------------------- wrapping
    @property
    def processors(self) -> tuple[SpanProcessor, ...]:
        """The wrapped processors."""
        return self._processors

    @property
    def naming(self) -> str:
        return self._naming

    @property
    def registry(self) -> RegistryLike:
        """The label-bearing tool names this processor reads (``tool_call`` strips by it)."""
        return self._registry

    def add_processor(self, processor: SpanProcessor, *, langfuse: bool | None = None) -> None:
        """Wrap one more exporting processor (``langfuse=None``: detect Langfuse's)."""
        if processor is self:
            return
        with self._small:
            if any(p is processor for p in self._processors):
                return
            self._processors = (*self._processors, processor)
            if langfuse or (langfuse is None and is_langfuse_processor(processor)):
                self._langfuse.add(id(processor))

    @property
    def has_langfuse(self) -> bool:
        return bool(self._langfuse)

    # ----------------------------------------------------------------------------- errors
    def count(self, key: str, n: int = 1) -> None:
        """Add to a counter (see ``stats()``)."""
        with self._small:
            self._counts[key] = self._counts.get(key, 0) + n

    def fail(self, where: str, exc: BaseException) -> None:
        """Record an internal error (``tracing.diagnostics``): counted, kept, logged once."""
        self.count("internal_errors")
        self._errors.report(where, exc)

    def stats(self) -> dict[str, int]:
        """Counters: tool spans, named at start/settle, learned/matched calls, dropped, errors,
        and what was shed under load: ``shed_spans`` (ends exported as stubs), ``shed_starts``,
        ``anchors_shed`` (tool calls among the shed spans: anchor settled without outcome, or
        missing; also counted in the ledger), ``shed_untracked`` (shed past the markers' room)."""
        with self._small:
            counts = dict(self._counts)
        counts["live_calls"] = self._calls.live_calls
        counts["background_calls"] = self._calls.background_calls
        counts["queue_depth"] = max(0, self._put - self._done)
        return counts

    def internal_errors(self) -> list[tuple[str, str]]:
        """The latest internal errors (where, message) — tests assert this stays empty."""
        return [(e.where, e.error) for e in self._errors.recent()]

    # ----------------------------------------------------------------------------- hooks
    # The app thread only stamps the session and enqueues; everything else happens in
    # the ``CallTracker``, one item at a time, in the processor's thread (or inline, under the lock,
    # with ``in_thread=False``). One FIFO queue keeps the order that matters: a model span's
    # end (learning its calls) before the tool spans it requested start, a span's start
    # before its end, a parent's start before its children's.

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            session = SESSION.get()
            if session is not None:
                self._stamp_session(span, session)
            if not self._submit(("start", span, session)):
                self.count("shed_starts")  # named at settle (if its end finds room)
            scope = span.instrumentation_scope
            if scope is not None and scope.name in LATE_ARGS_SCOPES:
                self._watch_late_args(span, session)
        except Exception as exc:
            self.fail("on_start", exc)
        for processor in self._processors:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception as exc:
                self.fail(f"{type(processor).__name__}.on_start", exc)

    def _watch_late_args(self, span: Span, session: SessionInfo | None) -> None:
        """Read the span once more (a second start event) when a ``set_attributes`` call just
        after start makes it a tool span with args: ``@observe`` sets them then, so the live
        span is named (and its in-flight anchor written) before the tool body runs, in both
        modes. Only this span's own method is wrapped, and only until then."""
        attrs = plain_attributes(span.attributes)
        found = match_convention(span.name, attrs, self._conventions)
        if found is not None and any(k in attrs for k in found.args_keys):
            return  # (its args were there at start)
        original = span.set_attributes
        lock = threading.Lock()  # (our thread may set attributes on it too)
        calls = 0

        def set_attributes(attributes: Any) -> None:
            nonlocal calls
            original(attributes)
            try:
                with lock:
                    if calls < 0:
                        return  # (done: another thread's call restored the method)
                    calls += 1
                    now = plain_attributes(span.attributes)
                    convention = match_convention(span.name, now, self._conventions)
                    ready = convention is not None and any(k in now for k in convention.args_keys)
                    other = convention is None and A.LANGFUSE_OBSERVATION_TYPE in now
                    if not (ready or other or calls >= _LATE_ARGS_SETS or span.end_time):
                        return
                    calls = -1
                    vars(span).pop("set_attributes", None)  # the class's method again
                if ready and not self._submit(("start", span, session)):
                    self.count("shed_starts")
            except Exception as exc:
                self.fail("late args", exc)

        span.set_attributes = set_attributes

    def _on_ending(self, span: Span) -> None:
        for processor in self._processors:
            try:
                processor._on_ending(span)
            except Exception as exc:
                self.fail(f"{type(processor).__name__}._on_ending", exc)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if self._submit(("end", span)):
                return
        except Exception as exc:  # could not even enqueue: export what is safe to export
            self.fail("on_end", exc)
        self._shed_end(span)

    def mark_background(self, span: Span, timeout_s: float | None = None) -> bool:
        """A live tool span was dispatched to the background: frame it, keep it in flight.

        It settles when it ends (the harvest); if it is still live after ``timeout_s``
        (default ``options.background_timeout_s``) it ends as an error (``· timed out``).
        Returns False when the span has no context, the processor is shut down, or its queue
        is full (the call is then framed at settle only, and never times out).
        """
        if span.context is None or self._shutdown:
            return False
        limit = timeout_s if timeout_s is not None else self._options.background_timeout_s
        if not self._submit(("background", span, limit)):
            self.count("shed_background")
            return False
        if not self._in_thread:  # no thread handles the queue: one reaps the deadlines
            self._ensure_worker()
            self._queue.put("wake")
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
        if session.user_id and A.OI_USER_ID not in attrs and A.LANGFUSE_USER_ID not in attrs:
            own[A.OI_USER_ID] = session.user_id  # (as OpenInference's using_attributes does)
        span.set_attributes(own)

    # ----------------------------------------------------------------------------- shedding
    def _shed_end(self, span: ReadableSpan) -> None:
        """No room for the span's end: export a stub (on the app thread: a scrubbed name,
        identifiers only, never raw data), and queue a marker of a few ids so the processor's
        thread settles the call's in-flight anchor and counts it in the ledger."""
        self.count("shed_spans")
        if not self._warned_shed:
            self._warned_shed = True
            logger.warning(
                "intentrace processor: its queue is full (%d span events): shedding the "
                "processing of spans under load (exported as stubs, counted in stats() and "
                "in the ledger); raise IntentOptions(max_queue=...) if this is a burst",
                self._max_queue,
            )
        attrs = plain_attributes(span.attributes)
        tool = match_convention(span.name, attrs, self._conventions) is not None
        context = span.context
        if context is not None:
            session = attrs.get(A.SESSION_ID)
            marker = ("shed", context.span_id, session if isinstance(session, str) else "", tool)
            if not self._submit(marker, marker=True):
                self.count("shed_untracked")
                if tool:
                    self.count("anchors_shed")
                    self.report_dropped(marker[2])
        try:
            name = self._stub_name(span.name)
            resource = self._calls.shaper.resource(span.resource)  # (redacted once, cached)
            stub = stub_span(span, name, attrs, scrub=self._calls.short_text, resource=resource)
        except Exception as exc:  # redaction could not run: export nothing (fail closed)
            self.count("dropped")
            self.fail("stub", exc)
            return
        self.forward(stub, None)

    def _stub_name(self, name: str) -> str:
        known = self._names.get(name)
        if known is None:
            known = self._policy.scrub_text(name)
            if len(self._names) >= _NAMES_CACHED:
                self._names.clear()
            self._names[name] = known
        return known

    def report_dropped(self, session_id: str) -> None:
        """One tool call's anchor shed: count it where users look (``Ledger.record_dropped``;
        a ledger sink without that method only has ``stats()``)."""
        record = getattr(self._ledger, "record_dropped", None)
        if record is None:
            return
        try:
            record(session_id, 1)
        except Exception as exc:
            self.fail("ledger.record_dropped", exc)

    # ----------------------------------------------------------------------------- the queue
    def _submit(self, item: tuple[Any, ...], *, marker: bool = False) -> bool:
        """Hand one span event to the processor's thread; False when it was shed (the queue is
        full). The app thread's whole share of the work: a comparison, a counter and a put."""
        if not self._in_thread:
            self._process(item)
            return True
        if self._worker is None:
            self._ensure_worker()
        room = self._max_markers if marker else self._max_queue
        if self._put - self._done >= room and threading.get_ident() != self._worker_ident:
            return False  # (the processor's own thread never waits on, nor sheds, its events)
        self._put = next(self._puts)
        self._queue.put(item)
        return True

    def _process(self, item: tuple[Any, ...]) -> None:
        with self._lock:
            try:
                kind = item[0]
                if kind == "start":
                    self._calls.start(item[1], item[2])
                elif kind == "end":
                    self._calls.end(item[1])
                elif kind == "shed":
                    if self._calls.shed(item[1], item[2], is_tool=item[3]):
                        self.count("anchors_shed")
                elif kind == "background":
                    self._calls.background(item[1], item[2])
            except Exception as exc:
                self.fail(f"handle {item[0]}", exc)

    def _worker_alive(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _after_fork(self) -> None:
        """In a forked child the thread did not survive: start afresh on first use."""
        self._queue = queue.SimpleQueue()
        self._puts = itertools.count(1)
        self._put = self._done = 0
        self._worker = None
        self._worker_ident = None
        self._lock = threading.RLock()
        self._small = threading.Lock()

    def _ensure_worker(self) -> None:
        with self._small:
            if self._worker_alive():
                return
            _install_log_filter()
            self._worker = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._worker.start()

    def _run(self) -> None:
        """The processor's thread: handles span events in order (``in_thread=False``: only
        reaps background calls), and ends background calls past their deadline."""
        self._worker_ident = threading.get_ident()
        timeout: float | None = None
        seen = 0
        clock, sleep = time.perf_counter, time.sleep
        while True:
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            try:
                if isinstance(item, tuple):
                    began = clock()
                    self._process(item)  # pyright: ignore[reportUnknownArgumentType]
                    self._done += 1
                    if self._put != seen:
                        seen = self._put
                        # The app made spans since the last one: it is busy. Hand it the GIL
                        # for a while rather than hold it until the interpreter's switch
                        # interval (5 ms) forces us to: a busy app thread keeps most of the GIL
                        # (bench/processor.py: app thread wall clock, the burst's p99 wait).
                        # With the app idle, or waiting on I/O, the backlog drains at full
                        # speed; when it falls behind, spans are shed, never waited for.
                        fill = min(1.0, (self._put - self._done) / self._max_queue)
                        backoff = _BACKOFF + (_BACKOFF_FULL - _BACKOFF) * fill
                        sleep(min(_BACKOFF_MAX_S, (clock() - began) * backoff))
                elif isinstance(item, threading.Event):
                    item.set()
                elif item == "stop":
                    return
                with self._lock:  # (inline mode: app threads handle spans under it too)
                    timeout = self._calls.reap()
            except Exception as exc:  # never let the thread die
                self.fail("processor thread", exc)

    # ----------------------------------------------------------------------------- export
    def forward_plain(self, span: ReadableSpan) -> None:
        """Export a span that is not a tool span, redacted as every span is (its name,
        attributes, events, status, links and resource scrubbed; the tool calls it lists
        redacted by their tools' policies); dropped when redaction cannot run."""
        self._calls.forward_other(span)

    def forward(self, span: ReadableSpan, langfuse_span: ReadableSpan | None) -> None:
        """Hand a shaped copy to every wrapped processor (Langfuse ones get theirs, when it
        differs)."""
        for processor in self._processors:
            try:
                if langfuse_span is not None and id(processor) in self._langfuse:
                    processor.on_end(langfuse_span)
                else:
                    processor.on_end(span)
            except Exception as exc:
                self.fail(f"{type(processor).__name__}.on_end", exc)

    # ----------------------------------------------------------------------------- lifecycle
    def _drain(self, timeout_s: float) -> bool:
        if not self._worker_alive():
            return True
        if threading.get_ident() == self._worker_ident:
            return False  # (a flush from a wrapped processor in our thread: never wait on us)
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
                self.fail(f"{type(processor).__name__}.force_flush", exc)
                ok = False
        return ok

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        self._drain(30.0)
        if self._worker_alive() and threading.get_ident() != self._worker_ident:
            self._queue.put("stop")
            assert self._worker is not None
            self._worker.join(5.0)
        for processor in self._processors:
            try:
                processor.shutdown()
            except Exception as exc:
                self.fail(f"{type(processor).__name__}.shutdown", exc)


def notify_background(span: Span, timeout_s: float | None = None) -> bool:
    """Tell every live ``IntentSpanProcessor`` that ``span`` went to the background."""
    handled = False
    for processor in list(_PROCESSORS):
        handled = processor.mark_background(span, timeout_s) or handled
    return handled
