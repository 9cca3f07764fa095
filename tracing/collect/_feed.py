"""Received spans to anchors: what ``intentrace collect`` and ``intentrace import`` run.

Spans arrive ended, in export batches, children usually before their parents. For each tool
span the feed rebuilds the :class:`~tracing.derive._call.CallContext` the in-process
``IntentSpanProcessor`` would have had, then calls the processor's own pure derivation
(:func:`tracing.derive._call.derive_call`): the same conventions, label-bearing gate, intent,
outcome, framing and redaction, so the anchors are the same. What the processor knows from
the live process, the feed reconstructs:

* **what our processor already wrote on the span** (``intentrace.tool_call.id``,
  ``intentrace.parent_call.id``, session, agent, turn, batch, the shown intent) is taken as is;
* **the span tree**: a bounded index of the spans seen gives a call its nearest ancestor tool
  call (subagents) and, when the span has none of its own, the session/agent/turn of its
  nearest ancestor that has them. A call whose ancestor has not arrived yet (a subagent's
  calls end, and are exported, before the call that spawned them) is written at once and
  updated in place when the ancestor arrives;
* **calls requested by model spans** (``gen_ai.output.messages``,
  ``llm.output_messages.*``): remembered per trace and matched to the tool spans that start
  after the model span ended, as the processor does (call id, else tool name and order);
* **activity labels** (``intentrace.activity`` on a model step's span) head their block.

Every received span has ended, so its anchor is settled (a span that ended at dispatch with
the ``background`` hint stays in flight until the span that harvests it arrives). Within one
batch, calls are recorded in start order, so their ``seq`` follows the order the calls began.

Never raises: a span whose redaction fails is dropped (fail closed) and counted as rejected.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from redaction import RedactionPolicy
from tracing import attributes as A
from tracing.anchor import AnchorWrite, LedgerSink
from tracing.derive import (
    DEFAULT_CONVENTIONS,
    CallContext,
    Convention,
    PolicyLike,
    RegistryLike,
    RequestedCalls,
    SpanView,
    ToolFacts,
    derive_call,
    is_model_span,
    match_convention,
    requested_calls,
)
from tracing.derive._call import call_anchor_id, int_or_none, raw_intent_of
from tracing.derive._conventions import GENAI, STATUS_ERROR
from tracing.derive._learn import Pending
from tracing.diagnostics import ErrorLog
from tracing.intent import IntentRegistry, read_intent, sanitize_label
from tracing.intent._args import first_str

logger = logging.getLogger("tracing.feed")

MAX_SPANS: Final = 200_000
"""Spans remembered for the tree (oldest forgotten first)."""
MAX_WAITING: Final = 50_000
"""Calls and activity labels waiting for an ancestor that has not arrived yet."""
MAX_DEPTH: Final = 256
"""Ancestors looked at for one call, at most (a client may send a cycle)."""

_SESSION_KEYS: Final = GENAI.session_keys
# What descendants inherit: the values our ``session(...)`` puts on every span, as in the
# processor (whose scopes carry the ``session(...)`` context, not other conventions' keys).
_INHERITED_SESSION: Final = (A.SESSION_ID,)
_INHERITED_AGENT: Final = (A.AGENT_ID,)

_Key = tuple[str, str]
"""(trace id, span id) in hex."""


@dataclass(frozen=True, slots=True)
class FeedResult:
    """What one ``ingest`` made of its spans."""

    spans: int
    calls: int
    """Tool calls recorded (settled anchors written)."""
    rejected: int
    """Tool spans dropped because redaction or derivation failed (fail closed)."""
    reasons: tuple[str, ...] = ()


@dataclass(slots=True)
class _Node:
    """What descendants need to know about one span."""

    parent: str | None
    call_id: str | None
    session_id: str | None
    agent_id: str | None
    turn: int | None
    provisional: tuple[SpanView, ToolFacts] | None = None
    """A tool span of the batch being ingested whose call id is not known yet: its derivation
    (in start order, so usually before any descendant asks) sets ``call_id``; a descendant
    that asks first, or a call whose derivation failed, gets the provisional id made from
    these (``SpanFeed._call_id_of``)."""


@dataclass(slots=True)
class _Waiter:
    """A call (or activity label) whose context is still being looked for up the tree."""

    need_parent: bool
    need_session: bool
    need_agent: bool
    need_turn: bool
    found: dict[str, Any] = field(default_factory=dict[str, Any])
    """Fields found since the anchor was written (the next update carries them)."""
    write: AnchorWrite | None = None
    """The written anchor's identity (id, tool, status, label) for updates; None: activity."""
    activity: tuple[str, str, int | None] | None = None
    """(batch id, label, turn) of an activity label not set yet."""
    origin: str | None = None
    """The span whose context this is (met again going up: a cycle)."""

    def pending(self) -> bool:
        return self.need_parent or self.need_session or self.need_agent or self.need_turn

    def take(self, node: _Node) -> None:
        if self.need_parent and node.call_id is not None:
            self.need_parent = False
            self.found["parent_call_id"] = node.call_id
        if self.need_session and node.session_id:
            self.need_session = False
            self.found["session_id"] = node.session_id
        if self.need_agent and node.agent_id:
            self.need_agent = False
            self.found["agent_id"] = node.agent_id
        if self.need_turn and node.turn is not None:
            self.need_turn = False
            self.found["turn"] = node.turn


def _default_policy() -> PolicyLike:
    return RedactionPolicy.load()


class SpanFeed:
    """Turns received (ended) spans into anchors with the in-process processor's logic.

    Args:
        sink: where anchors go (``record``/``set_activity``), e.g. a ``tracing.ledger.Ledger``.
        policy: the redaction policy (default ``RedactionPolicy.load()``).
        registry: label-bearing tool names for spans that do not carry the
            ``intentrace.label_bearing`` flag (``intentrace collect --tool NAME``); the flag
            wins. Default: none (only flagged spans are named by their intent).
        conventions: how tool spans are recognised (the processor's defaults).
        max_spans: spans remembered for parent/child relations.
        max_waiting: calls waiting for an ancestor, at most.

    Thread-safe: ``ingest`` calls are serialised.
    """

    def __init__(
        self,
        sink: LedgerSink,
        *,
        policy: PolicyLike | None = None,
        registry: RegistryLike | None = None,
        conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
        max_spans: int = MAX_SPANS,
        max_waiting: int = MAX_WAITING,
    ) -> None:
        self._sink = sink
        self._policy: PolicyLike = policy if policy is not None else _default_policy()
        self._registry: RegistryLike = registry if registry is not None else IntentRegistry()
        self._conventions = tuple(conventions)
        self._max_spans = max(1, max_spans)
        self._max_waiting = max(1, max_waiting)
        self._lock = threading.Lock()
        self._nodes: OrderedDict[_Key, _Node] = OrderedDict()
        self._waiting: OrderedDict[_Key, list[_Waiter]] = OrderedDict()
        self._n_waiting = 0
        self._requested = RequestedCalls()
        self._counts: dict[str, int] = {}
        self._errors = ErrorLog("feed", logger)

    # ------------------------------------------------------------------------------ counters
    def _count(self, key: str, n: int = 1) -> None:
        self._counts[key] = self._counts.get(key, 0) + n

    def _fail(self, where: str, exc: BaseException) -> None:
        self._count("internal_errors")
        self._errors.report(where, exc)

    def stats(self) -> dict[str, int]:
        """Counters: spans, calls, rejected, learned_matched, activities, deferred,
        resolved_late, unresolved, internal_errors; ``waiting`` and ``spans_indexed`` now."""
        with self._lock:
            counts = dict(self._counts)
            counts["waiting"] = self._n_waiting
            counts["spans_indexed"] = len(self._nodes)
        return counts

    def internal_errors(self) -> list[tuple[str, str]]:
        """The latest internal errors (where, message): tests assert this stays empty."""
        return [(e.where, e.error) for e in self._errors.recent()]

    # ------------------------------------------------------------------------------ ingest
    def ingest(self, spans: Sequence[SpanView]) -> FeedResult:
        """Derive and record the anchors of a batch of ended spans. Never raises."""
        with self._lock:
            try:
                return self._ingest(spans)
            except Exception as exc:  # a bug: count it, never take the receiver down
                self._fail("ingest", exc)
                return FeedResult(len(spans), 0, 0)

    def _ingest(self, spans: Sequence[SpanView]) -> FeedResult:
        self._count("spans", len(spans))
        arrived: list[_Key] = []
        facts_of: dict[int, ToolFacts] = {}
        for n, view in enumerate(spans):
            convention = self._convention(view)
            facts = convention.facts(view) if convention is not None else None
            if facts is not None:
                facts_of[n] = facts
            key = self._index(view, facts)
            if key is not None:
                arrived.append(key)

        # the processor's timeline: a model span's calls are known to the tool spans that
        # start after it ended; tool spans are handled in start order (ancestors first)
        events: list[tuple[int, int, int]] = []
        for n, view in enumerate(spans):
            if is_model_span(view.attributes):
                events.append((view.end_ns or view.start_ns or 0, 0, n))
            else:
                events.append((view.start_ns or 0, 1, n))
        events.sort()

        calls = rejected = 0
        reasons: list[str] = []
        for _, kind, n in events:
            view = spans[n]
            try:
                if kind == 0:
                    self._learn(view)
                    continue
                if A.ACTIVITY in view.attributes:
                    self._activity(view)
                outcome = self._call(view, facts_of.get(n))
            except Exception as exc:
                self._fail("span", exc)
                outcome = False if n in facts_of else None
            if outcome is True:
                calls += 1
            elif outcome is False:
                rejected += 1
                if len(reasons) < 5:
                    reasons.append(f"span {view.span_id}: redaction failed, call dropped")
        nodes = self._nodes
        for key in arrived:
            node = nodes.get(key)
            if node is not None and node.provisional is not None:
                self._call_id_of(node)  # (its derivation failed: the provisional id stays)
            if key in self._waiting:
                self._resume(key)
        self._count("calls", calls)
        self._count("rejected", rejected)
        return FeedResult(len(spans), calls, rejected, tuple(reasons))

    def _convention(self, view: SpanView) -> Convention | None:
        # our processor's exports say which convention recognised the span before it added
        # GenAI keys of its own: read the facts where that convention keeps them
        named = view.attributes.get(A.CONVENTION)
        if isinstance(named, str):
            for convention in self._conventions:
                if convention.name == named:
                    return convention
        found = match_convention(view.name, view.attributes, self._conventions)
        if found is None and isinstance(named, str) and A.TOOL_NAME in view.attributes:
            return GENAI  # our copy of a call named from a model span ("learned")
        return found

    def _index(self, view: SpanView, facts: ToolFacts | None) -> _Key | None:
        if not view.trace_id or not view.span_id:
            return None
        attrs = view.attributes
        key = (view.trace_id, view.span_id)
        turn = attrs.get(A.TURN)
        node = _Node(
            parent=view.parent_span_id,
            call_id=None,
            session_id=first_str(attrs, _INHERITED_SESSION),
            agent_id=first_str(attrs, _INHERITED_AGENT),
            turn=turn if turn.__class__ is int else int_or_none(turn),
        )
        previous = self._nodes.get(key)
        if previous is not None:  # a replayed span keeps what was learned about it
            node.call_id = self._call_id_of(previous)
            self._nodes.move_to_end(key)
        if node.call_id is None and facts is not None:
            node.provisional = (view, facts)  # (made when asked: usually never)
        self._nodes[key] = node
        while len(self._nodes) > self._max_spans:
            self._nodes.popitem(last=False)
        return key

    def _call_id_of(self, node: _Node) -> str | None:
        """The node's call id; a tool span not derived yet gets its provisional one (made from
        its own attributes: the id given upstream, else its provider id, session and turn)."""
        pending = node.provisional
        if pending is not None:
            node.provisional = None
            view, facts = pending
            own = view.attributes.get(A.TOOL_CALL_ID)
            given = own if isinstance(own, str) and own else None
            node.call_id = call_anchor_id(view, facts, CallContext(call_id=given), self._policy)
        return node.call_id

    def _learn(self, view: SpanView) -> None:
        if not view.trace_id:
            return
        calls = requested_calls(view.attributes)
        if calls:
            added = self._requested.add(
                int(view.trace_id, 16), calls, read_intent, batch_id=view.span_id
            )
            self._count("learned_calls", added)

    def _take(self, view: SpanView, facts: ToolFacts | None) -> Pending | None:
        if not view.trace_id:
            return None
        trace = int(view.trace_id, 16)
        if not self._requested.has(trace):
            return None
        if facts is None:
            return self._requested.take(trace, call_id=None, tool_name=view.name)
        pending = self._requested.take(trace, call_id=facts.call_id, tool_name=facts.tool_name)
        if pending is None or (facts.call_id and facts.call_id == pending.call_id):
            return pending
        # matched by tool name and order: the span's own args (all known, it has ended) say
        # which of the waiting calls it really was, as the processor settles it
        own = raw_intent_of(facts, gate=True, full=True)
        if own and own != pending.raw_intent:
            swapped = self._requested.exchange(trace, pending, own)
            if swapped is not None:
                self._count("learned_reassigned")
                return swapped
        return pending

    # ------------------------------------------------------------------------------ calls
    def _call(self, view: SpanView, facts: ToolFacts | None) -> bool | None:
        """Record one span's anchor: True when written, False when dropped, None: not a call."""
        attrs = view.attributes
        pending = self._take(view, facts)
        if facts is None:
            if pending is None:
                return None
            facts = ToolFacts(convention="learned", tool_name=pending.tool_name, call_id=None)
        if pending is not None:
            self._count("learned_matched")

        own_parent = attrs.get(A.PARENT_CALL_ID)
        has_parent = isinstance(own_parent, str) and bool(own_parent)
        waiter = _Waiter(
            need_parent=not has_parent,
            need_session=not (facts.session_id or first_str(attrs, _SESSION_KEYS)),
            need_agent=not facts.agent_id,
            need_turn=int_or_none(attrs.get(A.TURN)) is None,
            origin=view.span_id,
        )
        done = self._walk(view.trace_id, view.parent_span_id, waiter)
        found = waiter.found
        waiter.found = {}

        own_id = attrs.get(A.TOOL_CALL_ID)  # the anchor id our processor gave it upstream
        call_id = own_id if isinstance(own_id, str) and own_id else None
        learned = pending.raw_intent if pending is not None else None
        shown = attrs.get(A.INTENT)
        if learned is None and isinstance(shown, str) and shown:
            learned = shown  # named upstream (by our processor): the gate still applies
        ctx = CallContext(
            session_id=found.get("session_id"),
            agent_id=found.get("agent_id"),
            turn=found.get("turn"),
            parent_call_id=own_parent if has_parent else found.get("parent_call_id"),
            call_id=call_id,
            provider_call_id=pending.call_id if pending is not None else _provider_id(attrs),
            learned_intent=learned,
            batch_id=pending.batch_id if pending is not None else None,
        )
        try:
            derived = derive_call(
                view,
                policy=self._policy,
                facts=facts,
                registry=self._registry,
                ctx=ctx,
                langfuse_tag=None,
            )
        except Exception as exc:  # RedactionError (fail closed), or a bug
            self._fail("derive", exc)
            return False  # a waiter left behind has nothing to write: it is inert
        if derived is None:
            return None
        anchor = derived.anchor
        if A.REDACTION_ARGS in attrs:
            _merge_upstream_redaction(anchor, attrs)
        node = self._nodes.get((view.trace_id or "", view.span_id or ""))
        if node is not None:
            node.call_id = anchor["tool_call_id"]
            node.provisional = None
        if not done:
            waiter.write = {
                "tool_call_id": anchor["tool_call_id"],
                "tool_name": anchor["tool_name"],
                "status": anchor["status"],
                "label": anchor.get("label") or derived.label,
            }
            # (an update is a write of this span's call: the ledger tells it from another
            # call that reused the provider's id)
            if anchor.get("span_id"):
                waiter.write["span_id"] = anchor.get("span_id")
                waiter.write["trace_id"] = anchor.get("trace_id")
            self._count("deferred")
        self._record(anchor)
        return True

    def _activity(self, view: SpanView) -> None:
        label = view.attributes.get(A.ACTIVITY)
        if not isinstance(label, str) or not label or not view.span_id:
            return
        if view.status_code == STATUS_ERROR:  # the block did not resolve: no activity label
            return
        shown = sanitize_label(self._policy.scrub_text(label))
        if not shown:
            return
        attrs = view.attributes
        session = first_str(attrs, _INHERITED_SESSION)
        turn = int_or_none(attrs.get(A.TURN))
        waiter = _Waiter(
            need_parent=False,
            need_session=session is None,
            need_agent=False,
            need_turn=turn is None,
            activity=(view.span_id, shown, turn),
            origin=view.span_id,
        )
        waiter.found = {"session_id": session} if session else {}
        if self._walk(view.trace_id, view.parent_span_id, waiter):
            self._set_activity(waiter)

    def _set_activity(self, waiter: _Waiter) -> None:
        if waiter.activity is None:
            return
        batch_id, label, turn = waiter.activity
        session = waiter.found.get("session_id") or ""
        turn = turn if turn is not None else waiter.found.get("turn")
        try:
            self._sink.set_activity(session, batch_id, label, turn=turn)
            self._count("activities")
        except Exception as exc:
            self._fail("ledger.set_activity", exc)

    def _record(self, write: AnchorWrite) -> None:
        try:
            self._sink.record(write)
        except Exception as exc:
            self._fail("ledger.record", exc)

    # ------------------------------------------------------------------------------ the tree
    def _walk(self, trace_id: str | None, start: str | None, waiter: _Waiter) -> bool:
        """Look up the tree from span ``start``; True when done (nothing more to find)."""
        current = start
        steps = 0
        while current is not None and waiter.pending():
            steps += 1
            if steps > MAX_DEPTH or current == waiter.origin:  # a cycle (ids are what a client
                # sent) or an absurd depth: stop looking
                self._count("cycles")
                return True
            key = (trace_id or "", current)
            node = self._nodes.get(key)
            if node is None:
                self._wait(key, waiter)
                return False
            if node.provisional is not None and waiter.need_parent:
                self._call_id_of(node)
            waiter.take(node)
            current = node.parent
        return True

    def _wait(self, key: _Key, waiter: _Waiter) -> None:
        self._waiting.setdefault(key, []).append(waiter)
        self._n_waiting += 1
        while self._n_waiting > self._max_waiting and self._waiting:
            _, dropped = self._waiting.popitem(last=False)
            self._n_waiting -= len(dropped)
            self._count("unresolved", len(dropped))
            for item in dropped:
                self._finish(item)

    def _resume(self, key: _Key) -> None:
        """An awaited span arrived: continue the walks that stopped at it."""
        waiters = self._waiting.pop(key, [])
        self._n_waiting -= len(waiters)
        for waiter in waiters:
            if self._walk(key[0], key[1], waiter):
                self._finish(waiter)
            elif waiter.write is not None and waiter.found:
                self._update(waiter)  # found part of it: write that now

    def _finish(self, waiter: _Waiter) -> None:
        if waiter.activity is not None:
            self._set_activity(waiter)
        elif waiter.found:
            self._update(waiter)

    def _update(self, waiter: _Waiter) -> None:
        if waiter.write is None:
            return
        write: AnchorWrite = {**waiter.write, **waiter.found}  # pyright: ignore[reportAssignmentType]
        waiter.found = {}
        self._count("resolved_late")
        self._record(write)


_STRICTNESS: Final = {"keep": 0, "hash": 1, "redact": 2}


def _merge_upstream_redaction(anchor: AnchorWrite, attrs: Mapping[str, Any]) -> None:
    """A span shaped by our processor upstream was redacted there already: the anchor's
    redaction record says what happened on the whole way (the stricter action, secrets
    scrubbed upstream plus here, hidden upstream or here)."""
    try:
        mine = json.loads(anchor.get("redaction") or "{}")
    except ValueError:
        return
    for key, attr in (("args", A.REDACTION_ARGS), ("output", A.REDACTION_OUTPUT)):
        theirs = attrs.get(attr)
        if isinstance(theirs, str) and _STRICTNESS.get(theirs, -1) > _STRICTNESS.get(
            str(mine.get(key)), -1
        ):
            mine[key] = theirs
    for key, attr in (
        ("intent_hidden", A.REDACTION_INTENT_HIDDEN),
        ("outcome_hidden", A.REDACTION_OUTCOME_HIDDEN),
    ):
        if attrs.get(attr) is True:
            mine[key] = True
    scrubbed = attrs.get(A.REDACTION_SCRUBBED)
    if isinstance(scrubbed, int) and not isinstance(scrubbed, bool):
        mine["scrubbed"] = int(mine.get("scrubbed") or 0) + scrubbed
    anchor["redaction"] = json.dumps(mine)


def _provider_id(attrs: Mapping[str, Any]) -> str | None:
    """The provider's call id our processor kept upstream (learned ones too)."""
    value = attrs.get(A.PROVIDER_CALL_ID)
    return value if isinstance(value, str) and value else None
