"""Recognising tool spans of every convention, and reading their args and results.

Pure functions over a :class:`SpanView` (name, attributes, events, status, ids, times, parent,
resource): the span processor builds views from live/ended SDK spans, the OTLP receiver from
decoded protobuf spans, and both get the same answers. No OpenTelemetry import here.

A :class:`Convention` says whether a span is a tool span (a cheap check on the name and the
attribute mapping) and where that convention keeps the tool name, call id, args, result and
session. Users add their own with :class:`AttributeConvention` (see ``docs/tracing.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, cast

from tracing import attributes as A
from tracing.intent._args import (
    FULL_PARSE_MAX_CHARS,
    PREFIX_CHARS,
    ArgsPath,
    first_str,
    intent_candidate,
    locate_intent,
    parse_json,
    result_outcome,
    to_json_text,
    unwrap_args,
)

# the args helpers moved to tracing.intent._args; still importable from here
__all__ = [
    "ALL_ARGS_KEYS",
    "ALL_RESULT_KEYS",
    "DEFAULT_CONVENTIONS",
    "FULL_PARSE_MAX_CHARS",
    "GENAI",
    "LANGFUSE",
    "OPENINFERENCE",
    "PREFIX_CHARS",
    "TRACELOOP",
    "ArgsPath",
    "AttributeConvention",
    "Convention",
    "EventView",
    "RequestedCall",
    "SpanView",
    "ToolFacts",
    "intent_candidate",
    "is_model_span",
    "locate_intent",
    "match_convention",
    "parse_json",
    "recognise",
    "requested_calls",
    "result_outcome",
    "to_json_text",
    "unwrap_args",
]

# --------------------------------------------------------------------------------------------
# the span view


@dataclass(frozen=True, slots=True)
class EventView:
    """One span event: name, attributes, time (unix ns, 0 when unknown)."""

    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict[str, Any])
    time_ns: int = 0


@dataclass(frozen=True, slots=True)
class SpanView:
    """What the derivation needs to know about one span, whatever produced it."""

    name: str
    attributes: Mapping[str, Any]
    events: Sequence[EventView] = ()
    status_code: int = 0
    """0 = UNSET, 1 = OK, 2 = ERROR (the OTLP numbering)."""
    status_message: str | None = None
    trace_id: str | None = None
    """32 lower-case hex characters."""
    span_id: str | None = None
    """16 lower-case hex characters."""
    parent_span_id: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    resource: Mapping[str, Any] = field(default_factory=dict[str, Any])
    scope_name: str | None = None


STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2

UNKNOWN_TOOL: Final = "unknown"
"""The tool name of a recognised tool span that names no tool: no tool-name attribute and an
empty span name (the ledger needs a name; ``unknown`` says what happened)."""


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What a convention found on a tool span (raw: nothing redacted yet)."""

    convention: str
    tool_name: str
    call_id: str | None = None
    args: Any = None
    """Raw args as found: JSON text, a mapping or a list (possibly wrapped or truncated)."""
    result: Any = None
    session_id: str | None = None
    agent_id: str | None = None
    error: str | None = None
    """Error text the convention keeps outside the status (Langfuse's status message)."""
    args_path: ArgsPath | None = None
    """Where the call's args sit inside the parsed args value (the convention's
    ``args_path``); None: found by rule."""


class Convention(Protocol):
    """A way of recognising tool spans. ``matches`` must be cheap: it runs on every span."""

    @property
    def name(self) -> str: ...

    @property
    def args_keys(self) -> tuple[str, ...]:
        """Attributes that may hold a tool call's args (redacted by the args decision)."""
        ...

    @property
    def result_keys(self) -> tuple[str, ...]:
        """Attributes that may hold a tool call's result (redacted by the output decision)."""
        ...

    def matches(self, name: str, attributes: Mapping[str, Any]) -> bool: ...

    def facts(self, view: SpanView) -> ToolFacts: ...


def _first_present(attributes: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            return value
    return None


def _event_value(view: SpanView, event_name: str | None, keys: Sequence[str]) -> Any:
    if event_name is None:
        return None
    for event in view.events:
        if event.name == event_name:
            value = _first_present(event.attributes, keys)
            if value is not None:
                return value
    return None


@dataclass(frozen=True)
class AttributeConvention:
    """A convention described by attribute keys (all the built-in ones are instances).

    Args:
        name: short identifier (goes to ``intentrace.convention``).
        match: cheap predicate ``(span name, attributes) -> bool``.
        tool_name_keys: attributes holding the tool name, first present wins.
        tool_name_from_span: fallback deriving the tool name from the span name.
        call_id_keys / args_keys / result_keys / session_keys / agent_keys: where the
            convention keeps those, first present wins (all args/result keys are redacted).
        args_event / result_event: event names carrying args/result in their attributes.
        event_value_keys: attribute keys read inside those events.
        error_keys: attributes holding error text kept outside the status.
        args_path: where the call's keyword args sit inside the parsed args value, as keys
            and list indexes (``("payload", "params")``); searched first, then the rule of
            ``locate_intent`` (wrapper members ``kwargs``/``args``/``input``/``arguments``, a
            first positional mapping). The ledger's args lose the intent at the same path.
    """

    name: str
    match: Callable[[str, Mapping[str, Any]], bool]
    tool_name_keys: tuple[str, ...] = ()
    tool_name_from_span: Callable[[str], str] = field(default=lambda name: name)
    call_id_keys: tuple[str, ...] = ()
    args_keys: tuple[str, ...] = ()
    result_keys: tuple[str, ...] = ()
    session_keys: tuple[str, ...] = ()
    agent_keys: tuple[str, ...] = ()
    args_event: str | None = None
    result_event: str | None = None
    event_value_keys: tuple[str, ...] = ("content", "arguments", "message", "result")
    error_keys: tuple[str, ...] = ()
    args_path: ArgsPath | None = None

    def matches(self, name: str, attributes: Mapping[str, Any]) -> bool:
        return self.match(name, attributes)

    def facts(self, view: SpanView) -> ToolFacts:
        attrs = view.attributes
        before = attrs.get(A.ORIGINAL_NAME)  # the span may have been renamed at start
        name = before if isinstance(before, str) and before else view.name
        tool = first_str(attrs, self.tool_name_keys) or self.tool_name_from_span(name)
        args = _first_present(attrs, self.args_keys)
        if args is None:
            args = _event_value(view, self.args_event, self.event_value_keys)
        result = _first_present(attrs, self.result_keys)
        if result is None:
            result = _event_value(view, self.result_event, self.event_value_keys)
        return ToolFacts(
            convention=self.name,
            tool_name=tool or name or UNKNOWN_TOOL,
            call_id=first_str(attrs, self.call_id_keys),
            args=args,
            result=result,
            session_id=first_str(attrs, self.session_keys),
            agent_id=first_str(attrs, self.agent_keys),
            error=first_str(attrs, self.error_keys),
            args_path=self.args_path,
        )


# --------------------------------------------------------------------------------------------
# the built-in conventions

_SESSION_KEYS: Final = (
    A.SESSION_ID,
    A.GEN_AI_CONVERSATION_ID,
    A.SESSION_ID_KEY,
    A.LANGFUSE_SESSION_ID,
    A.TRACELOOP_SESSION_ID,
)
_AGENT_KEYS: Final = (A.AGENT_ID, A.GEN_AI_AGENT_NAME, A.GEN_AI_AGENT_ID, A.OI_AGENT_NAME)


def _strip_prefix(*prefixes: str) -> Callable[[str], str]:
    def strip(name: str) -> str:
        for prefix in prefixes:
            if name.startswith(prefix) and len(name) > len(prefix):
                return name[len(prefix) :]
        return name

    return strip


def _genai_match(name: str, attributes: Mapping[str, Any]) -> bool:
    if attributes.get(A.GEN_AI_TOOL_NAME) == A.ADK_MERGED_TOOLS:
        return False  # Google ADK's copy of a model step's responses, not a call
    if attributes.get(A.GEN_AI_OPERATION_NAME) == A.GEN_AI_EXECUTE_TOOL:
        return True
    # pydantic-ai before instrumentation v3 set the tool name but no operation name
    return A.GEN_AI_TOOL_NAME in attributes and A.GEN_AI_REQUEST_MODEL not in attributes


GENAI: Final = AttributeConvention(
    name="genai",
    match=_genai_match,
    tool_name_keys=(A.GEN_AI_TOOL_NAME, A.TOOL_NAME),
    tool_name_from_span=_strip_prefix("execute_tool ", "running tool: "),
    call_id_keys=(A.GEN_AI_TOOL_CALL_ID,),
    args_keys=(A.GEN_AI_TOOL_CALL_ARGUMENTS, A.PYDANTIC_AI_TOOL_ARGUMENTS, A.ADK_TOOL_CALL_ARGS),
    result_keys=(A.GEN_AI_TOOL_CALL_RESULT, A.PYDANTIC_AI_TOOL_RESPONSE, A.ADK_TOOL_RESPONSE),
    session_keys=_SESSION_KEYS,
    agent_keys=_AGENT_KEYS,
    args_event=A.GEN_AI_TOOL_MESSAGE_EVENT,
    result_event=A.GEN_AI_CHOICE_EVENT,
)
"""OpenTelemetry GenAI semantic conventions (also our own instrumentation, pydantic-ai, and
Google ADK, whose tool spans keep their args and result under ``gcp.vertex.agent.*``)."""


def _openinference_match(name: str, attributes: Mapping[str, Any]) -> bool:
    kind = attributes.get(A.OPENINFERENCE_SPAN_KIND)
    return isinstance(kind, str) and kind.upper() == A.OPENINFERENCE_TOOL


def _openinference_tool_name(name: str) -> str:
    # DSPy's TOOL spans set no tool.name and are named `<tool>.__call__` / `<tool>.acall`
    for suffix in (".__call__", ".acall"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


OPENINFERENCE: Final = AttributeConvention(
    name="openinference",
    match=_openinference_match,
    tool_name_keys=(A.OI_TOOL_NAME,),
    tool_name_from_span=_openinference_tool_name,
    call_id_keys=(A.OI_TOOL_CALL_ID, A.GEN_AI_TOOL_CALL_ID),
    args_keys=(A.OI_INPUT_VALUE, A.OI_TOOL_CALL_FUNCTION_ARGUMENTS),
    result_keys=(A.OI_OUTPUT_VALUE,),
    session_keys=_SESSION_KEYS,
    agent_keys=_AGENT_KEYS,
)
"""OpenInference: ``openinference.span.kind=TOOL``, args in ``input.value``."""


def _traceloop_match(name: str, attributes: Mapping[str, Any]) -> bool:
    return attributes.get(A.TRACELOOP_SPAN_KIND) == A.TRACELOOP_TOOL


def _traceloop_tool_name(name: str) -> str:
    return name[: -len(".tool")] if name.endswith(".tool") and len(name) > 5 else name


TRACELOOP: Final = AttributeConvention(
    name="traceloop",
    match=_traceloop_match,
    tool_name_keys=(A.TRACELOOP_ENTITY_NAME,),
    tool_name_from_span=_traceloop_tool_name,
    args_keys=(A.TRACELOOP_ENTITY_INPUT,),
    result_keys=(A.TRACELOOP_ENTITY_OUTPUT,),
    session_keys=_SESSION_KEYS,
    agent_keys=_AGENT_KEYS,
)
"""OpenLLMetry/Traceloop: ``traceloop.span.kind=tool``, args ``{"args","kwargs"}`` (truncated)."""


def _langfuse_match(name: str, attributes: Mapping[str, Any]) -> bool:
    return attributes.get(A.LANGFUSE_OBSERVATION_TYPE) == A.LANGFUSE_TOOL


LANGFUSE: Final = AttributeConvention(
    name="langfuse",
    match=_langfuse_match,
    tool_name_keys=(A.TOOL_NAME,),
    args_keys=(A.LANGFUSE_OBSERVATION_INPUT,),
    result_keys=(A.LANGFUSE_OBSERVATION_OUTPUT,),
    session_keys=_SESSION_KEYS,
    agent_keys=_AGENT_KEYS,
    error_keys=(A.LANGFUSE_OBSERVATION_STATUS_MESSAGE,),
)
"""Langfuse ``@observe(as_type="tool")``: ``langfuse.observation.input`` ``{"args","kwargs"}``."""

DEFAULT_CONVENTIONS: Final[tuple[Convention, ...]] = (GENAI, OPENINFERENCE, TRACELOOP, LANGFUSE)
"""Tried in this order; the first that matches supplies the facts."""

ALL_ARGS_KEYS: Final = tuple(dict.fromkeys(k for c in DEFAULT_CONVENTIONS for k in c.args_keys))
ALL_RESULT_KEYS: Final = tuple(dict.fromkeys(k for c in DEFAULT_CONVENTIONS for k in c.result_keys))


def match_convention(
    name: str,
    attributes: Mapping[str, Any],
    conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
) -> Convention | None:
    """The first convention that recognises this span as a tool span, or None."""
    for convention in conventions:
        if convention.matches(name, attributes):
            return convention
    return None


def recognise(
    view: SpanView, conventions: Sequence[Convention] = DEFAULT_CONVENTIONS
) -> ToolFacts | None:
    """The facts of a tool span, or None when no convention recognises it."""
    convention = match_convention(view.name, view.attributes, conventions)
    return None if convention is None else convention.facts(view)


# --------------------------------------------------------------------------------------------
# tool calls requested by a model span (learning intents before the tool spans start)


@dataclass(frozen=True, slots=True)
class RequestedCall:
    """One tool call a model span asked for."""

    tool_name: str
    call_id: str | None
    arguments: Any
    """Raw arguments (JSON text or mapping)."""


def is_model_span(attributes: Mapping[str, Any]) -> bool:
    """A span that may list requested tool calls (cheap check)."""
    if A.GEN_AI_OUTPUT_MESSAGES in attributes:
        return True
    kind = attributes.get(A.OPENINFERENCE_SPAN_KIND)
    return isinstance(kind, str) and kind.upper() == A.OPENINFERENCE_LLM


_OI_CALL_FIELDS: Final = {
    "tool_call.id": "id",
    "tool_call.function.name": "name",
    "tool_call.function.arguments": "arguments",
}


def requested_calls(attributes: Mapping[str, Any]) -> list[RequestedCall]:
    """Tool calls listed by a model span, in order (OpenInference and GenAI forms)."""
    calls: list[RequestedCall] = []
    if A.GEN_AI_OUTPUT_MESSAGES in attributes:
        messages = parse_json(attributes[A.GEN_AI_OUTPUT_MESSAGES])
        if isinstance(messages, list):
            for message in cast("list[Any]", messages):
                if not isinstance(message, Mapping):
                    continue
                parts = cast("Mapping[str, Any]", message).get("parts")
                if not isinstance(parts, list):
                    continue
                for part in cast("list[Any]", parts):
                    if not isinstance(part, Mapping):
                        continue
                    p = cast("Mapping[str, Any]", part)
                    name = p.get("name")
                    if p.get("type") == "tool_call" and isinstance(name, str) and name:
                        call_id = p.get("id")
                        calls.append(
                            RequestedCall(
                                name,
                                call_id if isinstance(call_id, str) else None,
                                p.get("arguments"),
                            )
                        )
    found: dict[tuple[int, int], dict[str, Any]] = {}
    prefix = A.OI_OUTPUT_MESSAGES_PREFIX
    for key, value in attributes.items():
        if not key.startswith(prefix) or ".message.tool_calls." not in key:
            continue
        # llm.output_messages.<i>.message.tool_calls.<j>.tool_call.<field>
        parts = key[len(prefix) :].split(".", 4)
        if len(parts) < 5 or not parts[0].isdigit() or not parts[3].isdigit():
            continue
        field_name = _OI_CALL_FIELDS.get(parts[4])
        if field_name is not None:
            found.setdefault((int(parts[0]), int(parts[3])), {})[field_name] = value
    for _, entry in sorted(found.items()):
        name = entry.get("name")
        if isinstance(name, str) and name:
            call_id = entry.get("id")
            calls.append(
                RequestedCall(
                    name, call_id if isinstance(call_id, str) else None, entry.get("arguments")
                )
            )
    return calls
