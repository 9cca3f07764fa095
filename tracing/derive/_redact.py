"""Redacting the data a tool span carries, attribute by attribute and event by event.

Args attributes of every convention by the policy's args action, result attributes by its
output action, exception and other event attributes always scrubbed, every other string
scrubbed except identifiers; every string made safe for the OTLP encoder (no lone surrogates).
Pure functions; no OpenTelemetry import here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast

from tracing import attributes as A
from tracing.derive._conventions import ALL_ARGS_KEYS, ALL_RESULT_KEYS, EventView, SpanView
from tracing.intent._args import to_json_text


class _Policy(Protocol):
    def redact_call(
        self, *, tool_name: str, agent_id: str | None = None, args: Any = None, output: Any = None
    ) -> Any: ...

    def scrub(self, value: Any) -> Any: ...


# keys whose values are identifiers or enums: never scrubbed (a scrubber may take an id for a
# secret), only checked for encodability
_PLAIN_KEYS: Final = frozenset(
    {
        A.GEN_AI_OPERATION_NAME,
        A.GEN_AI_TOOL_CALL_ID,
        A.GEN_AI_TOOL_TYPE,
        A.GEN_AI_CONVERSATION_ID,
        A.GEN_AI_AGENT_ID,
        A.GEN_AI_AGENT_NAME,
        A.OPENINFERENCE_SPAN_KIND,
        A.OI_TOOL_CALL_ID,
        A.TRACELOOP_SPAN_KIND,
        A.LANGFUSE_OBSERVATION_TYPE,
        A.LANGFUSE_OBSERVATION_LEVEL,
        A.SESSION_ID_KEY,
        A.LANGFUSE_SESSION_ID,
        A.TRACELOOP_SESSION_ID,
        "input.mime_type",
        "output.mime_type",
        "logfire.json_schema",
        "logfire.span_type",
        "code.function",
        "code.namespace",
        "code.filepath",
        "code.lineno",
    }
)
# our keys: never copied from the input span (we write the resolved ones)
_OURS: Final = frozenset(A.OURS)


def safe_text(text: str) -> str:
    """``text`` with lone surrogates replaced (they make the OTLP encoder fail a whole batch)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def safe_value(value: Any) -> Any:
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, tuple | list):
        items = cast("Sequence[Any]", value)
        return tuple(safe_text(v) if isinstance(v, str) else v for v in items)
    return value


def attr_value(value: Any) -> Any:
    """A redacted value as a valid span attribute value."""
    if value is None or isinstance(value, str | bool | int | float):
        return safe_value(value)
    if isinstance(value, list | tuple) and all(
        isinstance(v, str | bool | int | float) for v in cast("Sequence[Any]", value)
    ):
        return safe_value(value)
    return safe_text(to_json_text(value) or "")


@dataclass
class SpanRedactor:
    """Redacts one span's values by one decision, counting what it scrubbed."""

    policy: _Policy
    tool: str
    agent: str | None
    args_action: str
    output_action: str
    scrubbed: int = 0

    def scrub(self, value: Any) -> Any:
        result = self.policy.scrub(value)
        self.scrubbed += len(result.trail)
        return result.value

    def args(self, value: Any) -> Any:
        if self.args_action == "keep":
            return self.scrub(value)
        return self.policy.redact_call(tool_name=self.tool, agent_id=self.agent, args=value).args

    def output(self, value: Any) -> Any:
        if self.output_action == "keep":
            return self.scrub(value)
        red = self.policy.redact_call(tool_name=self.tool, agent_id=self.agent, output=value)
        return red.output

    def text(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub(value) if value else value
        if isinstance(value, tuple | list):
            return tuple(
                self.scrub(v) if isinstance(v, str) else v for v in cast("Sequence[Any]", value)
            )
        return value


def with_tag(existing: Any, tag: str) -> tuple[str, ...]:
    if isinstance(existing, str):
        tags = [t.strip() for t in existing.split(",") if t.strip()]
    elif isinstance(existing, list | tuple):
        tags = [str(t) for t in cast("Sequence[Any]", existing)]
    else:
        tags = []
    if tag not in tags:
        tags.append(tag)
    return tuple(tags)


def redact_span_data(
    view: SpanView,
    redactor: SpanRedactor,
    *,
    args_keys: Sequence[str] = (),
    result_keys: Sequence[str] = (),
) -> tuple[dict[str, Any], list[EventView], Any, Any]:
    """``(attributes, events, first args value, first result value)``, all redacted.

    Our own keys are dropped (the caller writes the resolved ones), except the inputs that
    pass through unchanged (``intentrace.batch.id``, ``intentrace.label_bearing``).
    """
    all_args = set(ALL_ARGS_KEYS).union(args_keys)
    all_results = set(ALL_RESULT_KEYS).union(result_keys)
    shaped: dict[str, Any] = {}
    first_args: Any = None
    first_result: Any = None
    for key, value in view.attributes.items():
        if key in _OURS:
            if key in (A.BATCH_ID, A.LABEL_BEARING):
                shaped[key] = value
            continue
        if key in all_args:
            out = attr_value(redactor.args(value))
            if first_args is None:
                first_args = out
        elif key in all_results:
            out = attr_value(redactor.output(value))
            if first_result is None:
                first_result = out
        elif key in _PLAIN_KEYS:
            out = safe_value(value)
        else:
            out = safe_value(redactor.text(value))
        shaped[key] = out
    events: list[EventView] = []
    for event in view.events:
        if event.name == A.GEN_AI_TOOL_MESSAGE_EVENT:
            convert = redactor.args
        elif event.name == A.GEN_AI_CHOICE_EVENT:
            convert = redactor.output
        else:
            convert = redactor.text
        event_attrs = {k: attr_value(convert(v)) for k, v in event.attributes.items()}
        events.append(EventView(safe_text(event.name), event_attrs, event.time_ns))
    return shaped, events, first_args, first_result
