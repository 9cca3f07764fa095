"""The state of tool calls between their start and their settle, for ``IntentSpanProcessor``.

One ``CallTracker`` per processor, driven one span event at a time (in the processor's thread,
or inline under its lock): it recognises tool spans, learns requested calls from model spans,
names live spans, writes anchors, keeps background calls and their deadlines, trades learned
calls between parallel siblings, and hands shaped copies back to the processor to export.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import Status as SpanStatus
from opentelemetry.trace import StatusCode, format_span_id

from tracing import attributes as A
from tracing._context import SessionInfo
from tracing.anchor import AnchorWrite, LedgerSink
from tracing.derive import (
    CallContext,
    Convention,
    Naming,
    PolicyLike,
    RegistryLike,
    RequestedCalls,
    SpanView,
    StartCall,
    ToolFacts,
    derive_call,
    derive_start,
    is_model_span,
    match_convention,
    requested_calls,
    settle_status,
)
from tracing.derive._call import label_name, langfuse_attributes, raw_intent_of
from tracing.derive._learn import MAX_TRACES, Pending
from tracing.derive._listed import Resolve
from tracing.derive._redact import trace_redactor, with_tag
from tracing.intent import read_intent, sanitize_label
from tracing.otel._options import IntentOptions
from tracing.otel._spans import Shaper, copy_span, encodable, span_view
from tracing.status import Status, default_label, frame_label

_MAX_SCOPES: Final = 200_000
_MAX_CALL_NAMES: Final = 50_000
"""Tool names of call ids seen (model spans, tool spans), for results listed by id only."""


class Owner(Protocol):
    """What the tracker needs from its processor."""

    @property
    def has_langfuse(self) -> bool: ...

    def count(self, key: str, n: int = 1) -> None: ...

    def fail(self, where: str, exc: BaseException) -> None: ...

    def forward(self, span: ReadableSpan, langfuse_span: ReadableSpan | None) -> None: ...

    def report_dropped(self, session_id: str) -> None: ...


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
    view: SpanView | None = None
    """The span's final view, when it had ended before its start was handled (the usual case
    for a short call in the processor's thread): its settle reads it again, not the span (an
    ended span's name, attributes, events and status no longer change)."""


class CallTracker:
    """Tool calls in flight and what they inherit (not thread-safe: one event at a time)."""

    def __init__(
        self,
        owner: Owner,
        *,
        policy: PolicyLike,
        registry: RegistryLike,
        ledger: LedgerSink | None,
        options: IntentOptions,
        naming: Naming,
        langfuse_tag: str | None,
        conventions: Sequence[Convention],
    ) -> None:
        self._owner = owner
        self._policy = policy
        self._registry = registry
        self._ledger = ledger
        self._options = options
        self._naming: Naming = naming
        self._tag = langfuse_tag
        self._activity_tag = options.resolved_activity_tag()
        self._conventions = tuple(conventions)
        self._live: dict[int, _Live] = {}
        self._scopes: dict[int, _Scope] = {}
        self._requested = RequestedCalls()
        self._by_name: dict[int, list[_Live]] = {}
        self._background: dict[int, tuple[Span, float]] = {}
        self._call_names: OrderedDict[tuple[int, str], str] = OrderedDict()
        self._redactor = trace_redactor(policy)
        self.shaper = Shaper(self._redactor)
        """Redacted copies of spans that are not tool spans, and of every span's resource."""

    def short_text(self, text: str) -> str:
        """A short text (a name, an id) scrubbed by the policy and made safe (remembered)."""
        return self._redactor.short_text(text)

    @property
    def live_calls(self) -> int:
        return len(self._live)

    @property
    def background_calls(self) -> int:
        return len(self._background)

    # ----------------------------------------------------------------------------- start
    def start(self, span: Span, session: SessionInfo | None) -> None:
        """A span started (in the processor's thread, or inline)."""
        context = span.context
        if context is None:
            return
        if context.span_id in self._live:
            return  # read again for its late args (Langfuse @observe), but found at start
        ended = span.end_time is not None  # (before the view is read: then it is final)
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

        self._owner.count("tool_spans_started")
        if facts.call_id:
            self._name_call(context.trace_id, facts.call_id, facts.tool_name)
        if pending is not None:
            self._owner.count("learned_matched")
        known: dict[str, Any] = {
            "session_id": session_id,
            "agent_id": agent_id,
            "turn": turn,
            "parent_call_id": parent_call,
            "provider_call_id": pending.call_id if pending is not None else None,
            "learned_intent": pending.raw_intent if pending is not None else None,
            "batch_id": pending.batch_id if pending is not None else None,
        }
        start = derive_start(
            view,
            facts,
            policy=self._policy,
            registry=self._registry,
            ctx=CallContext(**known),
            naming=self._naming,
        )
        ctx = CallContext(**known, call_id=start.call_id)  # (dataclasses.replace costs 5 µs)
        by_name = pending is not None and not (
            convention is not None and facts.call_id and facts.call_id == pending.call_id
        )
        live = _Live(span, facts, ctx, start, pending if by_name else None)
        if ended:
            live.view = view
        if len(self._live) >= _MAX_SCOPES:  # spans that never end: forget the oldest
            del self._live[next(iter(self._live))]
        self._live[context.span_id] = live
        if by_name:
            self._by_name.setdefault(context.trace_id, []).append(live)
            while len(self._by_name) > MAX_TRACES:
                del self._by_name[next(iter(self._by_name))]
        self._scope(context.span_id, _Scope(session_id, agent_id, turn, start.call_id, parent_call))
        if start.name is not None:
            self._owner.count("named_at_start")  # the label was known at start (in-flight anchor)
        if span.end_time is None:  # (in the processor's thread it may have ended already)
            marks: dict[str, Any] = {A.TOOL_CALL_ID: start.call_id, A.LABEL: start.label}
            if start.intent:
                marks[A.INTENT] = start.intent
            if start.name is not None:
                marks[A.ORIGINAL_NAME] = self._redactor.short_text(name)
                span.update_name(start.name)
                self._owner.count("renamed_live")
            span.set_attributes(marks)
        self._record(start.anchor.copy())  # the ledger owns the dict it gets

    def _name_call(self, trace_id: int, call_id: str, tool_name: str) -> None:
        names = self._call_names
        names[(trace_id, call_id)] = tool_name
        if len(names) > _MAX_CALL_NAMES:
            names.popitem(last=False)

    def resolver(self, trace_id: int) -> Resolve:
        """Call id -> tool name of calls of this trace seen so far."""
        names = self._call_names
        return lambda call_id: names.get((trace_id, call_id))

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
                self._owner.fail("ledger.set_activity", exc)

    def _record(self, write: AnchorWrite) -> None:
        if self._ledger is None:
            return
        try:
            self._ledger.record(write)
        except Exception as exc:
            self._owner.fail("ledger.record", exc)

    # ----------------------------------------------------------------------------- background
    def background(self, span: Span, timeout_s: float) -> None:
        """A live tool span went to the background: frame it, keep it in flight."""
        context = span.context
        live = self._live.get(context.span_id) if context is not None else None
        if live is None or context is None or span.end_time is not None:
            return
        start = live.start
        label = frame_label(
            tool_name=start.anchor["tool_name"], status=Status.BACKGROUND, intent=start.intent
        )
        if self._naming == "intent" and start.intent:
            span.update_name(label_name(label))
        span.set_attributes({A.BACKGROUND: True, A.LABEL: label})
        anchor = start.anchor.copy()
        anchor["status"] = Status.BACKGROUND
        anchor["label"] = label
        self._record(anchor)
        self._background[context.span_id] = (span, time.monotonic() + timeout_s)
        self._owner.count("background_dispatched")

    def reap(self) -> float | None:
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
                    span.set_status(SpanStatus(StatusCode.ERROR, "background call timed out"))
                    self._owner.count("background_timed_out")
                    span.end()  # its end item is queued behind us
            except Exception as exc:
                self._owner.fail("reap", exc)
        deadlines = [d for _, d in self._background.values()]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    # ----------------------------------------------------------------------------- shed
    def shed(self, span_id: int, session_id: str, *, is_tool: bool) -> bool:
        """A span ended while the queue was full: its end was not queued (a stub was exported
        instead). Forget the span; settle its in-flight anchor from what is known without its
        end's data (status, the intent read at start; no outcome, args or result), and count
        the call in the ledger. True when it was a tool call."""
        live = self._live.pop(span_id, None)
        scope = self._scopes.pop(span_id, None)
        self._background.pop(span_id, None)
        if live is None and not is_tool:
            return False
        session = (
            (live.ctx.session_id if live is not None else None)
            or (scope.session_id if scope is not None else None)
            or session_id
        )
        if live is not None:
            context = live.span.context
            siblings = self._by_name.get(context.trace_id) if context is not None else None
            if siblings and live in siblings:
                siblings.remove(live)
            status = settle_status(span_view(live.span), live.ctx)
            write = live.start.anchor.copy()
            write["status"] = status
            write["label"] = frame_label(
                tool_name=write["tool_name"], status=status, intent=live.start.intent
            )
            if status != Status.BACKGROUND:
                write["end_ns"] = live.span.end_time
            self._record(write)
        self._owner.report_dropped(session or "")
        return True

    # ----------------------------------------------------------------------------- end
    def end(self, span: ReadableSpan) -> None:
        """A span ended: settle it (tool span) or pass it on."""
        context = span.context
        span_id = context.span_id if context is not None else 0
        live = self._live.pop(span_id, None)
        scope = self._scopes.pop(span_id, None)
        self._background.pop(span_id, None)
        attrs: Mapping[str, Any] = span.attributes or {}
        if self._options.learn_from_model_spans and context is not None and is_model_span(attrs):
            self._learn(context.trace_id, span_id, attrs)
        convention = match_convention(span.name, attrs, self._conventions)
        if live is None and convention is None:
            if A.ACTIVITY in attrs and span.status.status_code != StatusCode.ERROR:
                # written once the block settled, and only when it resolved (no error): while
                # its calls run the header is their latest intent (tracing.status.group_header)
                self._activity(
                    span, attrs, scope.session_id if scope else None, scope.turn if scope else None
                )
            self.forward_other(
                span, scope.agent_id if scope else None, activity=A.ACTIVITY in attrs
            )
            return
        self._settle(span, live, scope, convention)

    def forward_other(
        self, span: ReadableSpan, agent: str | None = None, *, activity: bool = False
    ) -> None:
        """Export a span that is not a tool span, redacted (``Shaper.plain``); dropped when
        redaction cannot run (fail closed). An activity-label span gains the activity tag."""
        context = span.context
        try:
            resolve = self.resolver(context.trace_id) if context is not None else None
            shaped = self.shaper.plain(span, agent=agent, resolve=resolve)
            if activity and self._activity_tag:
                attrs = dict(shaped.attributes or {})
                attrs[A.LANGFUSE_TRACE_TAGS] = with_tag(
                    attrs.get(A.LANGFUSE_TRACE_TAGS), self._activity_tag
                )
                shaped = copy_span(shaped, attributes=attrs)
        except Exception as exc:
            self._owner.count("dropped")
            self._owner.fail("redact span", exc)
            return
        self._owner.forward(encodable(shaped), None)

    def _learn(self, trace_id: int, span_id: int, attrs: Mapping[str, Any]) -> None:
        try:
            calls = requested_calls(attrs)
            for call in calls:
                if call.call_id:
                    self._name_call(trace_id, call.call_id, call.tool_name)
            if calls:
                added = self._requested.add(
                    trace_id, calls, read_intent, batch_id=format_span_id(span_id)
                )
                self._owner.count("learned_calls", added)
        except Exception as exc:
            self._owner.fail("learn", exc)

    def _settle(
        self,
        span: ReadableSpan,
        live: _Live | None,
        scope: _Scope | None,
        convention: Convention | None,
    ) -> None:
        try:
            if live is not None and live.view is not None:
                view, facts = live.view, live.facts  # (read at start, the span had ended)
            else:
                view = span_view(span)
                facts = convention.facts(view) if convention is not None else None
            if facts is None and live is not None:
                facts = live.facts
            if facts is None:
                agent = live.ctx.agent_id if live is not None else scope.agent_id if scope else None
                self.forward_other(span, agent)
                return
            if live is not None:
                ctx = live.ctx
            else:
                # Recognised only now (it had no attributes when its start was handled): the
                # same match against the calls its model span requested as at start, so its
                # id never depends on when this thread saw the start.
                pending = self._take_settled(span, facts)
                ctx = CallContext(
                    session_id=scope.session_id if scope else None,
                    agent_id=scope.agent_id if scope else None,
                    turn=scope.turn if scope else None,
                    parent_call_id=scope.parent_call_id if scope else None,
                    provider_call_id=pending.call_id if pending is not None else None,
                    learned_intent=pending.raw_intent if pending is not None else None,
                    batch_id=pending.batch_id if pending is not None else None,
                )
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
            self._owner.count("dropped")
            self._owner.fail("settle", exc)
            if live is not None:
                self._settle_minimal(span, live)
            return
        if derived is None:
            self.forward_other(span, ctx.agent_id)
            return
        self._owner.count("tool_spans_settled")
        if derived.renamed and (live is None or live.start.name is None):
            self._owner.count("named_at_settle")
        try:
            agent = ctx.agent_id or facts.agent_id
            shaped = copy_span(
                span,
                name=derived.name,
                attributes=derived.attributes,
                events=derived.events,
                status_message=derived.status_message,
                resource=self.shaper.resource(span.resource),
                links=self.shaper.links(span, agent),
            )
            for_langfuse = shaped
            if self._owner.has_langfuse:
                for_langfuse = copy_span(shaped, attributes=langfuse_attributes(derived))
        except Exception as exc:
            self._owner.count("dropped")
            self._owner.fail("shape", exc)
            return
        self._record(derived.anchor)
        self._owner.forward(shaped, for_langfuse)

    def _take_settled(self, span: ReadableSpan, facts: ToolFacts) -> Pending | None:
        """The requested call an ended tool span that was not recognised at start matches:
        by call id, else by tool name and order; its own args (all known now) say which of
        several waiting calls of that tool it was."""
        context = span.context
        if not self._options.learn_from_model_spans or context is None:
            return None
        trace = context.trace_id
        if not self._requested.has(trace):
            return None
        pending = self._requested.take(trace, call_id=facts.call_id, tool_name=facts.tool_name)
        if pending is None or (facts.call_id and facts.call_id == pending.call_id):
            if pending is not None:
                self._owner.count("learned_matched")
            return pending
        self._owner.count("learned_matched")
        own = raw_intent_of(facts, gate=True, full=True)
        if own and own != pending.raw_intent:
            swapped = self._requested.exchange(trace, pending, own)
            if swapped is not None:
                self._owner.count("learned_reassigned")
                return swapped
        return pending

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
                    self._owner.count("learned_reassigned")
                    break
            else:  # the call it really was has not started yet: trade with the queue
                theirs = self._requested.exchange(trace_id, mine, own)
                if theirs is not None:
                    live.pending = theirs
                    live.ctx = _with_learned(live.ctx, theirs)
                    self._owner.count("learned_reassigned")
        if live in siblings:
            siblings.remove(live)
        if not siblings:
            self._by_name.pop(trace_id, None)
        return live.ctx

    def _settle_minimal(self, span: ReadableSpan, live: _Live) -> None:
        """Redaction failed: settle the in-flight anchor with nothing model- or tool-written."""
        status = Status.ERROR if span.status.status_code == StatusCode.ERROR else Status.SUCCESS
        write = live.start.anchor.copy()
        write["status"] = status
        write["label"] = default_label(write["tool_name"], status)
        write["intent"] = None
        write["end_ns"] = span.end_time
        self._record(write)


def _with_learned(ctx: CallContext, pending: Pending) -> CallContext:
    if pending.call_id:
        # the anchor id follows the call it really was (made again from its provider id)
        return replace(
            ctx, call_id=None, provider_call_id=pending.call_id, learned_intent=pending.raw_intent
        )
    return replace(ctx, learned_intent=pending.raw_intent)
