"""From a tool span to its label, its anchor and its redacted, shaped attributes.

Pure functions over a :class:`~tracing.derive.SpanView`: the span processor calls them at
start and at settle, the OTLP receiver (``intentrace collect``) on decoded spans, and both make
the same anchors. No OpenTelemetry import here.

``derive_call`` raises ``RedactionError`` when redaction could not run: callers drop the span
and the anchor (fail closed). Any other exception is a bug; callers treat it the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as quote
from typing import Any, Final, Literal, Protocol, TypeAlias, cast

import jiter

from redaction import CallRedactor
from tracing import attributes as A
from tracing.anchor import AnchorWrite, anchor_id, tags_text
from tracing.derive._conventions import (
    DEFAULT_CONVENTIONS,
    FULL_PARSE_MAX_CHARS,
    PREFIX_CHARS,
    STATUS_ERROR,
    UNKNOWN_TOOL,
    Convention,
    EventView,
    SpanView,
    ToolFacts,
    match_convention,
    parse_json,
    result_outcome,
    to_json_text,
    unwrap_args,
)
from tracing.derive._redact import (
    SpanRedactor,
    redact_span_data,
    safe_text,
    trace_redactor,
    with_tag,
)
from tracing.intent import (
    INTENT_ARG,
    INTENT_MAX_CHARS,
    LABEL_MAX_CHARS,
    apply_outcome,
    read_intent,
    sanitize_label,
)
from tracing.intent._args import ArgsPath, args_without_intent, locate_candidate
from tracing.status import (
    FRAME_ABANDONED,
    FRAME_BACKGROUND,
    FRAME_CANCELLED,
    FRAME_ERROR,
    FRAME_TIMED_OUT,
    Status,
    frame_label,
)

Naming = Literal["intent", "stable"]
NAMINGS: Final[tuple[str, ...]] = ("intent", "stable")


PolicyLike: TypeAlias = CallRedactor
"""What we use of ``redaction.RedactionPolicy`` (which satisfies it)."""


class RegistryLike(Protocol):
    def is_label_bearing(self, tool_name: str | None) -> bool: ...


@dataclass(frozen=True, slots=True)
class CallContext:
    """What is known about a call beyond its own span attributes."""

    session_id: str | None = None
    agent_id: str | None = None
    turn: int | None = None
    parent_call_id: str | None = None
    """Anchor id of the nearest ancestor tool call (subagents)."""
    batch_id: str | None = None
    call_id: str | None = None
    """The anchor id fixed at start (settle must write the same one), or given on the span
    (``intentrace.tool_call.id``, written by our processor upstream)."""
    provider_call_id: str | None = None
    """The provider's call id learned elsewhere (the model span that requested the call),
    when the tool span does not carry one."""
    learned_intent: str | None = None
    """Raw intent learned from the model span that requested this call."""
    label_bearing: bool | None = None
    """The gate decided elsewhere (e.g. a learned call whose tool is label-bearing)."""
    timed_out: bool = False
    """A background call that never returned (also read from ``intentrace.timed_out``)."""


def is_label_bearing(
    attributes: Mapping[str, Any],
    tool_name: str,
    registry: RegistryLike | None,
    decided: bool | None = None,
) -> bool:
    """The label-bearing gate: the explicit span flag, else a decision made elsewhere, else the
    registry of tools we injected. A business ``intent`` argument alone never counts."""
    flag = attributes.get(A.LABEL_BEARING)
    if isinstance(flag, bool):
        return flag
    if decided is not None:
        return decided
    try:
        return registry is not None and registry.is_label_bearing(tool_name)
    except Exception:
        return False


def raw_intent_at(
    facts: ToolFacts, *, gate: bool, learned: str | None = None, full: bool = False
) -> tuple[str | None, ArgsPath | None]:
    """The raw (model-written) intent of a call behind the gate and where it sits in the args
    (None when it is learned or absent)."""
    if not gate:
        return None, None
    raw = facts.args
    path = facts.args_path
    hit = locate_candidate(raw, read=read_intent, max_chars=PREFIX_CHARS, path=path)
    if hit is None and full and isinstance(raw, str | bytes) and len(raw) > PREFIX_CHARS:
        hit = locate_candidate(raw, read=read_intent, max_chars=FULL_PARSE_MAX_CHARS, path=path)
    if hit is not None:
        return hit
    return learned, None


def raw_intent_of(
    facts: ToolFacts, *, gate: bool, learned: str | None = None, full: bool = False
) -> str | None:
    """The raw (model-written) intent of a call behind the gate, or None."""
    return raw_intent_at(facts, gate=gate, learned=learned, full=full)[0]


def _visible(text: str | None) -> str | None:
    """Model- or tool-written text as stored: whole (up to ``INTENT_MAX_CHARS``), one line,
    control characters removed. It is cut to a label's length only where shown as one."""
    if not text:
        return None
    label = sanitize_label(text, INTENT_MAX_CHARS)
    return label or None


_FRAMES: Final = (FRAME_TIMED_OUT, FRAME_ERROR, FRAME_CANCELLED, FRAME_BACKGROUND, FRAME_ABANDONED)


def label_name(label: str) -> str:
    """A label as a span name: its intent or outcome cut to ``LABEL_MAX_CHARS`` with ``…``,
    its framing (`` · failed``, ...) kept whole at the end."""
    for frame in _FRAMES:
        if label.endswith(frame) and len(label) > len(frame):
            return sanitize_label(label[: -len(frame)], LABEL_MAX_CHARS) + frame
    return sanitize_label(label, LABEL_MAX_CHARS)


def _exception_message(view: SpanView) -> str | None:
    for event in view.events:
        if event.name == A.EXCEPTION_EVENT:
            message = event.attributes.get(A.EXCEPTION_MESSAGE)
            kind = event.attributes.get(A.EXCEPTION_TYPE)
            if isinstance(message, str) and message:
                return f"{kind}: {message}" if isinstance(kind, str) and kind else message
            if isinstance(kind, str) and kind:
                return kind
    return None


def _cancelled(view: SpanView) -> bool:
    if view.attributes.get(A.STATUS) == Status.CANCELLED:
        return True
    for event in view.events:
        if event.name == A.EXCEPTION_EVENT:
            kind = event.attributes.get(A.EXCEPTION_TYPE)
            if isinstance(kind, str) and kind.rsplit(".", 1)[-1] == "CancelledError":
                return True
    return False


def settle_status(view: SpanView, ctx: CallContext) -> Status:
    """The status of an ended tool span: cancelled > error > background > success."""
    if _cancelled(view):
        return Status.CANCELLED
    level = view.attributes.get(A.LANGFUSE_OBSERVATION_LEVEL)
    timed_out = ctx.timed_out or view.attributes.get(A.TIMED_OUT) is True
    if view.status_code == STATUS_ERROR or level == "ERROR" or timed_out:
        return Status.ERROR
    if view.attributes.get(A.STATUS) == Status.BACKGROUND:
        return Status.BACKGROUND  # ended at dispatch: settles later under the same call id
    return Status.SUCCESS


def _outcome_inputs(
    attributes: Mapping[str, Any], result: Any
) -> tuple[str | None, Mapping[str, Any] | None]:
    outcome = attributes.get(A.OUTCOME)
    patch_raw = attributes.get(A.OUTCOME_PATCH)
    patch = parse_json(patch_raw) if patch_raw is not None else None
    text = outcome if isinstance(outcome, str) and outcome and not outcome.isspace() else None
    patch_map = cast("Mapping[str, Any]", patch) if isinstance(patch, Mapping) else None
    if text is None and patch_map is None and result is not None:
        return result_outcome(result)
    return text, patch_map


def shown_tool_name(policy: PolicyLike, tool_name: str) -> str:
    """The tool name as shown: scrubbed (a name taken from a span name may carry anything,
    and a key pasted as a tool name is an identifier too); ``unknown`` for no name at all
    (a convention of the application's own may find none)."""
    return trace_redactor(policy).short_text(tool_name) if tool_name else UNKNOWN_TOOL


def shown_id(policy: PolicyLike, value: str | None) -> str | None:
    """An identifier (call, session, agent id) as shown and stored: scrubbed like any text."""
    return trace_redactor(policy).short_text(value) if value else value


def call_anchor_id(view: SpanView, facts: ToolFacts, ctx: CallContext, policy: PolicyLike) -> str:
    """The anchor id of a tool call (``tracing.anchor.anchor_id``): fixed at start or given on
    the span, else made from (session, turn, provider id) as stored, else from the span."""
    return _CallIds(view, facts, ctx, policy).call_id


class _CallIds:
    """A call's identifiers as shown and stored (scrubbed once per call, not once per use)."""

    __slots__ = ("call_id", "provider", "session", "turn")

    def __init__(
        self, view: SpanView, facts: ToolFacts, ctx: CallContext, policy: PolicyLike
    ) -> None:
        short = trace_redactor(policy).short_text
        raw_session = ctx.session_id or facts.session_id
        self.session: str | None = short(raw_session) if raw_session else None
        self.turn = ctx.turn if ctx.turn is not None else int_or_none(view.attributes.get(A.TURN))
        raw_provider = facts.call_id or ctx.provider_call_id
        self.provider: str | None = short(raw_provider) if raw_provider else None
        if ctx.call_id:
            self.call_id = short(ctx.call_id) or ctx.call_id
        else:
            self.call_id = anchor_id(
                self.provider,
                session_id=self.session,
                turn=self.turn,
                trace_id=view.trace_id,
                span_id=view.span_id,
            )


@dataclass(frozen=True, slots=True)
class StartCall:
    """What is known about a tool call when its span starts."""

    facts: ToolFacts
    call_id: str
    raw_intent: str | None
    intent: str | None
    """Visible intent (redacted, sanitized)."""
    status: str
    label: str
    name: str | None
    """The new span name (naming mode ``intent`` with a visible intent), else None."""
    anchor: AnchorWrite


def _anchor_base(
    view: SpanView,
    facts: ToolFacts,
    ctx: CallContext,
    ids: _CallIds,
    *,
    policy: PolicyLike,
    tool: str,
    status: Status,
    label: str,
) -> AnchorWrite:
    short = trace_redactor(policy).short_text
    batch = view.attributes.get(A.BATCH_ID)
    write: AnchorWrite = {
        "tool_call_id": ids.call_id,
        "tool_name": tool,
        "status": status,
        "label": label,
    }
    agent = ctx.agent_id or facts.agent_id
    # What this span does not know is left out, not written as NULL: another writer of the
    # same call (a stream tap in this process, a processor elsewhere) may know it, and a
    # ledger write overwrites every column it carries.
    known: dict[str, Any] = {
        "provider_call_id": ids.provider,
        "session_id": ids.session,
        "turn": ids.turn,
        "batch_id": short(batch)
        if isinstance(batch, str) and batch
        else ctx.batch_id or view.parent_span_id,
        "parent_call_id": short(ctx.parent_call_id) if ctx.parent_call_id else None,
        "agent_id": short(agent) if agent else None,
        "trace_id": view.trace_id,
        "span_id": view.span_id,
    }
    for key, value in known.items():
        if value is not None and value != "":
            write[key] = value
    user, tags = user_and_tags(view.attributes, policy)
    if user is not None:
        write["user_id"] = user
    if tags is not None:
        write["tags"] = tags
    if view.start_ns:
        write["start_ns"] = view.start_ns
    return write


USER_KEYS: Final = (A.LANGFUSE_USER_ID, A.OI_USER_ID, A.ENDUSER_ID)
"""Where a span names the end user, first present wins: Langfuse's key, OpenInference's (also
read by Langfuse; our ``session(..., user_id=)`` stamps it on every span), OpenTelemetry's."""
TAG_KEYS: Final = (A.LANGFUSE_TRACE_TAGS, A.OI_TAG_TAGS)
"""Where a span lists its trace's tags (every key's tags are kept)."""
OUR_TAGS: Final = frozenset({A.DEFAULT_LANGFUSE_TAG, A.DEFAULT_ACTIVITY_TAG})
"""The tags our processor adds for Langfuse (not the app's: not stored)."""


def user_and_tags(attrs: Mapping[str, Any], policy: PolicyLike) -> tuple[str | None, str | None]:
    """The call's ``user_id`` and ``tags`` columns from its span's attributes, each as the
    span's exports show it: through the same attribute rule (a user key the policy finds
    sensitive, ``[scrub] keys``, stores the placeholder, as exported; a secret in a tag is
    scrubbed). None: the span says nothing (the stored value stays).

    Raises:
        RedactionError: scrubbing could not run (the caller drops the call, as for any text).
    """
    found: dict[str, Any] = {}
    for key in USER_KEYS:
        value = attrs.get(key)
        if value is not None and value != "":
            found[key] = value
            break
    for key in TAG_KEYS:
        value = attrs.get(key)
        if value:
            found[key] = value
    if not found:
        return None, None
    shown, _ = trace_redactor(policy).attributes(found)
    user: str | None = None
    tags: list[str] = []
    for key, value in shown.items():
        if key in USER_KEYS:
            text = value if isinstance(value, str) else str(value)
            user = " ".join(safe_text(text).split())[:256] or None
        elif key in TAG_KEYS:
            items: Any = value
            if isinstance(value, str):  # (JSON text of a list, or one tag)
                parsed = parse_json(value) if value.lstrip()[:1] == "[" else None
                items = parsed if parsed is not None else [value]
            if isinstance(items, list | tuple):
                listed = cast("Sequence[Any]", items)
                tags.extend(t for t in listed if isinstance(t, str) and t not in OUR_TAGS)
    return user, tags_text(tags)


def int_or_none(value: Any) -> int | None:
    """An integer attribute value (a decimal string counts; a bool does not), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def derive_start(
    view: SpanView,
    facts: ToolFacts,
    *,
    policy: PolicyLike,
    registry: RegistryLike | None = None,
    ctx: CallContext = CallContext(),
    naming: Naming = "intent",
) -> StartCall:
    """The in-flight state of a tool call at span start (raises ``RedactionError``)."""
    agent = ctx.agent_id or facts.agent_id
    gate = is_label_bearing(view.attributes, facts.tool_name, registry, ctx.label_bearing)
    raw = raw_intent_of(facts, gate=gate, learned=ctx.learned_intent)
    shown_tool = shown_tool_name(policy, facts.tool_name)
    intent: str | None = None
    if raw is not None:
        red = policy.redact_call(tool_name=facts.tool_name, agent_id=agent, intent=raw)
        intent = _visible(cast("str | None", red.intent))
    background = view.attributes.get(A.STATUS) == Status.BACKGROUND
    status = Status.BACKGROUND if background else Status.IN_FLIGHT
    label = frame_label(tool_name=shown_tool, status=status, intent=intent)
    ids = _CallIds(view, facts, ctx, policy)
    anchor = _anchor_base(
        view, facts, ctx, ids, policy=policy, tool=shown_tool, status=status, label=label
    )
    anchor["intent"] = intent
    return StartCall(
        facts=facts,
        call_id=ids.call_id,
        raw_intent=raw,
        intent=intent,
        status=status,
        label=label,
        name=label_name(label) if naming == "intent" and intent else None,
        anchor=anchor,
    )


@dataclass(frozen=True, slots=True)
class DerivedCall:
    """A settled tool call: its label, its anchor and the shaped (redacted) span data."""

    facts: ToolFacts
    status: str
    label: str
    intent: str | None
    outcome: str | None
    name: str
    """The span name to export (label in ``intent`` naming with a visible intent)."""
    renamed: bool
    """True when ``name`` is the label (not the original name)."""
    attributes: dict[str, Any]
    events: tuple[EventView, ...]
    status_message: str | None
    anchor: AnchorWrite
    scrubbed: int
    langfuse_extra: dict[str, Any] = field(default_factory=dict[str, Any])
    """GenAI keys the original span lacked that the Langfuse copy adds (operation name, the
    provider's call id, the conversation id): copies for other destinations add nothing."""


_FIRST_INTENT: Final = re.compile(
    r'\s*\{\s*"intent"\s*:\s*("(?:[^"\\]|\\.)*")\s*(,\s*)?', re.DOTALL
)
"""A JSON object's opening up to the end of its first member, when that member is the intent
(written first: it is injected as the first property); group 1 is the intent's JSON string."""


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed when it is one complete JSON object, else None."""
    try:
        parsed = jiter.from_json(text.encode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    return cast("dict[str, Any]", parsed) if isinstance(parsed, dict) else None


def _as_written(text: str, gate: bool) -> str | None:
    """JSON args text for the ledger as it was written (the intent member cut out when the
    gate says it is ours), or None when the text is not a complete JSON object of that shape.
    Re-serialising a 400 KB args text costs milliseconds; cutting the member out costs one
    parse of what is left (which checks it, and that no second top-level intent follows)."""
    if not gate:
        if text.lstrip()[:1] != "{":
            return None
        parsed = _json_object(text)
        if parsed is None or set(parsed) <= {"args", "kwargs"}:
            return None  # (an args/kwargs wrapper: the parsed way unwraps it)
        return text
    found = _FIRST_INTENT.match(text)
    if found is None:
        return None
    if found.group(2) is None:  # the only member: nothing may follow but the closing brace
        rest = text[found.end() :].lstrip()
        if rest[:1] != "}":
            return None
    written = "{" + text[found.end() :]
    try:  # (the intent's string is valid JSON too: the text as a whole is)
        jiter.from_json(found.group(1).encode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    parsed = _json_object(written)
    if parsed is None or "intent" in parsed:  # (a repeated key: the parsed way)
        return None
    return written


def _ledger_args(
    redacted: Any, action: str, gate: bool, path: ArgsPath | None = None
) -> str | None:
    """The args a settled call stores: without the intent (at ``path``, where it was read, with
    its copies in text members beside it, and a top-level ``intent`` when the gate says it is
    ours), wrappers of exactly
    ``args``/``kwargs`` unwrapped."""
    if redacted is None:
        return None
    if action != "keep":
        return to_json_text(redacted)
    if isinstance(redacted, str) and (path is None or path == (INTENT_ARG,)):
        written = _as_written(redacted, gate)
        if written is not None:
            return written
    parsed = parse_json(redacted)
    if gate and path:
        parsed = args_without_intent(parsed, path)
    kwargs, positional = unwrap_args(parsed)
    if kwargs is not None:
        kept = {k: v for k, v in kwargs.items() if not (gate and k == "intent")}
        if positional:
            return to_json_text({"args": list(positional), "kwargs": kept})
        return to_json_text(kept)
    if positional is not None:
        return to_json_text({"args": list(positional)})
    return to_json_text(redacted)


def derive_call(
    view: SpanView,
    *,
    policy: PolicyLike,
    facts: ToolFacts | None = None,
    registry: RegistryLike | None = None,
    ctx: CallContext = CallContext(),
    naming: Naming = "intent",
    langfuse_tag: str | None = A.DEFAULT_LANGFUSE_TAG,
    conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
) -> DerivedCall | None:
    """Settle a tool span: None when it is not a tool span. Raises ``RedactionError``.

    Args:
        view: the ended span.
        policy: the redaction policy (``redaction.RedactionPolicy``).
        facts: the recognised facts (recognised here when None).
        registry: label-bearing tool names (``IntentRegistry``); the span flag wins.
        ctx: session/agent/turn/parent/batch known from elsewhere, the anchor id fixed at start.
        naming: ``intent`` (the name becomes the label) or ``stable`` (names untouched).
        langfuse_tag: added to ``langfuse.trace.tags`` on intent-labelled spans (None: none).
        conventions: the conventions to recognise with (used when ``facts`` is None).
    """
    convention = None
    if facts is None:
        convention = match_convention(view.name, view.attributes, conventions)
        if convention is None:
            return None
        facts = convention.facts(view)
    attrs = view.attributes
    tool = facts.tool_name
    agent = ctx.agent_id or facts.agent_id
    session = ctx.session_id or facts.session_id
    gate = is_label_bearing(attrs, tool, registry, ctx.label_bearing)
    raw_intent, intent_path = raw_intent_at(facts, gate=gate, learned=ctx.learned_intent, full=True)
    status = settle_status(view, ctx)
    timed_out = ctx.timed_out or attrs.get(A.TIMED_OUT) is True
    error_text = view.status_message or facts.error or _exception_message(view)
    if status not in (Status.ERROR, Status.CANCELLED):
        error_text = None
    resolved: str | None = None
    if raw_intent and status == Status.SUCCESS:
        outcome, patch = _outcome_inputs(attrs, facts.result)
        if outcome or patch:
            applied = apply_outcome(raw_intent, outcome=outcome, outcome_patch=patch)
            resolved = applied if applied != raw_intent else None

    red = policy.redact_call(
        tool_name=tool, agent_id=agent, intent=raw_intent, outcome=resolved, error=error_text
    )
    shown_tool = shown_tool_name(policy, tool)
    decision = red.decision
    intent = _visible(cast("str | None", red.intent))
    outcome_v = _visible(cast("str | None", red.outcome)) if intent else None
    label = frame_label(
        tool_name=shown_tool, status=status, intent=intent, outcome=outcome_v, timed_out=timed_out
    )
    redactor = SpanRedactor(
        policy, tool, agent, str(decision.args), str(decision.output), scrubbed=int(red.scrubbed)
    )

    extra_args = convention.args_keys if convention is not None else ()
    extra_result = convention.result_keys if convention is not None else ()
    shaped, events, first_args, first_result = redact_span_data(
        view, redactor, args_keys=extra_args, result_keys=extra_result
    )
    if first_args is None and facts.args is not None:
        first_args = redactor.args(facts.args)  # args found in an event
    if first_result is None and facts.result is not None:
        first_result = redactor.output(facts.result)

    before = attrs.get(A.ORIGINAL_NAME)  # renamed at start by an in-process processor
    original = trace_redactor(policy).short_text(
        before if isinstance(before, str) and before else view.name
    )
    renamed = naming == "intent" and intent is not None
    name = label_name(label) if renamed else original
    status_message = (
        safe_text(policy.scrub_text(view.status_message)) if view.status_message else None
    )

    ids = _CallIds(view, facts, ctx, policy)
    call_id = ids.call_id
    shaped[A.TOOL_NAME] = shown_tool
    provider = ids.provider
    # Copies for other destinations add no GenAI key the span did not have (a Langfuse server
    # reached by plain OTLP would name an observation by gen_ai.tool.name before the span
    # name); the Langfuse copy gains these (langfuse_attributes).
    extra: dict[str, Any] = {}
    if provider:  # the provider's id, where GenAI keeps it (learned ones too), and in ours
        extra[A.GEN_AI_TOOL_CALL_ID] = provider
        shaped[A.PROVIDER_CALL_ID] = provider
    extra[A.GEN_AI_OPERATION_NAME] = A.GEN_AI_EXECUTE_TOOL
    shaped[A.CONVENTION] = facts.convention
    shaped[A.STATUS] = status
    shaped[A.LABEL] = label
    shaped[A.ORIGINAL_NAME] = original
    shaped[A.TOOL_CALL_ID] = safe_text(call_id)
    shaped[A.LABEL_BEARING] = gate
    if intent:
        shaped[A.INTENT] = intent
    if outcome_v:
        shaped[A.OUTCOME] = outcome_v
    anchor = _anchor_base(
        view, facts, ctx, ids, policy=policy, tool=shown_tool, status=status, label=label
    )
    if session:
        shown_session = ids.session or ""
        shaped[A.SESSION_ID] = shown_session
        extra[A.GEN_AI_CONVERSATION_ID] = shown_session
    if anchor.get("agent_id"):
        shaped[A.AGENT_ID] = safe_text(str(anchor.get("agent_id")))
    if anchor.get("turn") is not None:
        shaped[A.TURN] = anchor.get("turn")
    if anchor.get("batch_id"):
        shaped[A.BATCH_ID] = str(anchor.get("batch_id"))
    if ctx.parent_call_id:
        shaped[A.PARENT_CALL_ID] = shown_id(policy, ctx.parent_call_id) or ""
    if status == Status.BACKGROUND or attrs.get(A.BACKGROUND) is True:
        shaped[A.BACKGROUND] = True
    if timed_out:
        shaped[A.TIMED_OUT] = True
    shaped[A.REDACTION_ARGS] = str(decision.args)
    shaped[A.REDACTION_OUTPUT] = str(decision.output)
    shaped[A.REDACTION_INTENT_HIDDEN] = bool(raw_intent) and intent is None
    shaped[A.REDACTION_OUTCOME_HIDDEN] = bool(resolved) and outcome_v is None
    shaped[A.REDACTION_SCRUBBED] = redactor.scrubbed
    if intent and langfuse_tag:
        shaped[A.LANGFUSE_TRACE_TAGS] = with_tag(attrs.get(A.LANGFUSE_TRACE_TAGS), langfuse_tag)

    live = status == Status.BACKGROUND
    anchor["intent"] = intent
    anchor["outcome"] = outcome_v
    anchor["end_ns"] = None if live else view.end_ns
    anchor["error"] = cast("str | None", red.error) if error_text else None
    anchor["args"] = _ledger_args(first_args, str(decision.args), gate, intent_path)
    anchor["result"] = to_json_text(first_result)
    anchor["redaction"] = _redaction_json(
        str(decision.args),
        str(decision.output),
        bool(raw_intent) and intent is None,
        bool(resolved) and outcome_v is None,
        redactor.scrubbed,
    )
    return DerivedCall(
        facts=facts,
        status=status,
        label=label,
        intent=intent,
        outcome=outcome_v,
        name=name,
        renamed=renamed,
        attributes=shaped,
        events=tuple(events),
        status_message=status_message,
        anchor=anchor,
        scrubbed=redactor.scrubbed,
        langfuse_extra={k: v for k, v in extra.items() if k not in shaped},
    )


def _redaction_json(
    args: str, output: str, intent_hidden: bool, outcome_hidden: bool, scrubbed: int
) -> str:
    """The anchor's ``redaction`` column: what ``json.dumps`` gives, without its cost (4 µs,
    on every call)."""
    return (
        f'{{"args": {quote(args)}, "output": {quote(output)}, '
        f'"intent_hidden": {"true" if intent_hidden else "false"}, '
        f'"outcome_hidden": {"true" if outcome_hidden else "false"}, "scrubbed": {int(scrubbed)}}}'
    )


def langfuse_attributes(derived: DerivedCall) -> dict[str, Any]:
    """The attributes of the copy sent to a Langfuse destination.

    The Langfuse server names an observation from ``gen_ai.tool.name`` (then ``logfire.msg``)
    before the span name, so a renamed tool span keeps its tool name in
    ``intentrace.tool.name`` only, ``logfire.msg`` carries the label, and the type is set
    explicitly (``langfuse.observation.type=tool``) so the observation stays a TOOL.
    """
    attrs = dict(derived.attributes)
    for key, value in derived.langfuse_extra.items():
        attrs.setdefault(key, value)
    attrs.setdefault(A.LANGFUSE_OBSERVATION_TYPE, A.LANGFUSE_TOOL)
    session = attrs.get(A.SESSION_ID)
    if session:
        attrs.setdefault(A.SESSION_ID_KEY, session)
    if derived.renamed:
        attrs.pop(A.GEN_AI_TOOL_NAME, None)
        if A.LOGFIRE_MSG in attrs:  # the server's next choice after gen_ai.tool.name
            attrs[A.LOGFIRE_MSG] = derived.name
    elif isinstance(tool := attrs.get(A.TOOL_NAME), str):
        attrs.setdefault(A.GEN_AI_TOOL_NAME, tool)
    return attrs
