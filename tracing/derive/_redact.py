"""Redacting the data a span carries, attribute by attribute and event by event.

Every span through the processor (and every span ``mask_otel_spans`` sees) gets the same rule:

* its name, its status description, its event names and every string in its attributes,
  event attributes, link attributes and resource attributes are scrubbed (``policy.scrub``);
* attribute *names* go through the key-name rule (``app.request.password`` loses its value)
  and the value rules (a secret used as a name is replaced);
* every tool call a span lists (model messages, provider payloads: ``_listed``) gets its own
  tool's policy, args by the args action and results by the output action;
* on tool spans, the args attributes of every convention get the call's args action and the
  result attributes its output action;
* every string is made safe for the OTLP encoder (no lone surrogates).

Pure functions; no OpenTelemetry import here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from redaction import CallRedactor, placeholder
from tracing import attributes as A
from tracing.derive._conventions import ALL_ARGS_KEYS, ALL_RESULT_KEYS, EventView, SpanView
from tracing.derive._listed import KEEP, ListedCalls, Resolve
from tracing.intent._args import first_str, to_json_text

_Policy = CallRedactor


# keys whose values are enums written by instrumentations: nothing to scrub, only checked for
# encodability (every other value, identifiers included, is scrubbed)
_ENUM_KEYS: Final = frozenset(
    {
        A.GEN_AI_OPERATION_NAME,
        A.GEN_AI_TOOL_TYPE,
        A.OPENINFERENCE_SPAN_KIND,
        A.TRACELOOP_SPAN_KIND,
        A.LANGFUSE_OBSERVATION_TYPE,
        A.LANGFUSE_OBSERVATION_LEVEL,
    }
)
# our keys: never copied from the input span (we write the resolved ones)
_OURS: Final = frozenset(A.OURS)
_POLICY: Final = placeholder("policy")
_CLEAN_KEYS: Final = 16_384
_CLEAN_PAIRS: Final = 16_384
_CLEAN_VALUE_CHARS: Final = 256
_JSON_STARTS: Final = ("{", "[", '"')
_MESSAGE_PREFIXES: Final = ("llm.", "gen_ai.")


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


def _needs_safe(value: Any) -> bool:
    if isinstance(value, str):
        return not value.isascii() and safe_text(value) is not value
    if isinstance(value, tuple | list):
        return any(_needs_safe(v) for v in cast("Sequence[Any]", value))
    return False


def _strictest(policy: Any, kind: str) -> str:
    strictest = getattr(policy, "strictest", None)
    if not callable(strictest):
        return "redact"  # a policy that cannot say: the strictest of all (fail closed)
    try:
        return str(cast("Callable[[str], str]", strictest)(kind))
    except Exception:
        return "redact"


@dataclass(frozen=True, slots=True)
class RedactedSpan:
    """A span's parts as they may leave (only what changed is set; None: as it was)."""

    name: str | None = None
    attributes: Mapping[str, Any] | None = None
    events: tuple[EventView, ...] | None = None
    status_message: str | None = None
    scrubbed: int = 0
    """Removals (secrets scrubbed, listed calls redacted by the policy)."""

    @property
    def changed(self) -> bool:
        return (
            self.name is not None
            or self.attributes is not None
            or self.events is not None
            or self.status_message is not None
        )


class TraceRedactor:
    """The policy applied to any span's data (see the module docstring). Thread-safe.

    Args:
        policy: the redaction policy (``redaction.RedactionPolicy``).
    """

    __slots__ = (
        "_clean_keys",
        "_clean_pairs",
        "_short",
        "_strict_args",
        "_strict_output",
        "may_hide",
        "policy",
    )

    def __init__(self, policy: _Policy) -> None:
        self.policy = policy
        self._clean_keys: set[str] = set()
        """Attribute names found clean (bounded; names repeat on every span)."""
        self._clean_pairs: set[tuple[str, Any]] = set()
        """Short (name, value) pairs found clean (bounded)."""
        self._short: dict[str, str] = {}
        """Short texts as scrubbed and made safe (``short_text``; bounded)."""
        self._strict_args = _strictest(policy, "args")
        self._strict_output = _strictest(policy, "output")
        self.may_hide = self._strict_args != "keep" or self._strict_output != "keep"
        """Some call may have its args or output hidden: listed calls must be looked for
        (with a keep-everything policy, scrubbing all data covers them)."""

    # -- the policy on one listed call ---------------------------------------------------------
    def _apply(self, kind: str, tool: str | None, agent: str | None, value: Any) -> Any:
        if tool is None:
            strictest = self._strict_args if kind == "args" else self._strict_output
            return KEEP if strictest == "keep" else _POLICY
        decision = self.policy.redact_call(tool_name=tool, agent_id=agent).decision
        if (decision.args if kind == "args" else decision.output) == "keep":
            return KEEP
        if kind == "args":
            return self.policy.redact_call(tool_name=tool, agent_id=agent, args=value).args
        return self.policy.redact_call(tool_name=tool, agent_id=agent, output=value).output

    def listed(self, agent: str | None, resolve: Resolve | None = None) -> ListedCalls:
        """The tool-call pass for data of ``agent`` (``resolve``: call ids known elsewhere)."""
        return ListedCalls(
            lambda tool, value: self._apply("args", tool, agent, value),
            lambda tool, value: self._apply("output", tool, agent, value),
            resolve,
        )

    # -- parts ---------------------------------------------------------------------------------
    def short_text(self, text: str) -> str:
        """``text`` scrubbed and made safe, remembered when short: tool names, span names and
        ids repeat on every call (scrubbing depends on the text alone)."""
        known = self._short.get(text)
        if known is not None:
            return known
        shown = safe_text(self.policy.scrub_text(text))
        if len(text) <= _CLEAN_VALUE_CHARS:
            if len(self._short) >= _CLEAN_PAIRS:
                self._short.clear()
            self._short[text] = shown
        return shown

    def text(self, text: str) -> str:
        """One string (a span or event name, a status description), scrubbed and made safe."""
        return safe_text(self.policy.scrub_text(text)) if text else text

    def attributes(
        self,
        attrs: Mapping[str, Any],
        *,
        agent: str | None = None,
        resolve: Resolve | None = None,
        event_name: str | None = None,
    ) -> tuple[Mapping[str, Any], int]:
        """``(attributes as they may leave, removals)``: ``attrs`` itself when nothing changed.

        Listed calls by their tools' policies, then the whole mapping scrubbed (key names by
        the key-name and value rules, values by the value rules, JSON text inside too).

        Raises:
            RedactionError: scrubbing could not run (the caller drops the span).
        """
        if not attrs:
            return attrs, 0
        pairs = self._clean_pairs
        items = attrs.items()
        unknown: dict[str, Any] = {}
        for key, value in items:
            try:
                if (key, value) in pairs:
                    continue  # this (name, value) was found clean before
            except TypeError:  # an unhashable value (a decoded kvlist): scrub it
                pass
            unknown[key] = value
        if not unknown:
            return attrs, 0
        current: Mapping[str, Any] = unknown
        removed = 0
        if self.may_hide:
            new, listed = self.listed(agent, resolve).attributes(unknown, event_name=event_name)
            if listed.changed:
                current, removed = new, 1
        scrubbed = self.policy.scrub(dict(current))
        removed += len(scrubbed.trail)
        value = cast("dict[str, Any]", scrubbed.value)
        renamed = self._dotted_keys(value)
        if removed == 0 and not renamed and not any(_needs_safe(v) for v in unknown.values()):
            self._remember(unknown)
            return attrs, 0
        out: dict[str, Any] = {}
        for key, old in items:  # in the order they came, the known-clean ones as they are
            if key in value:
                out[safe_text(renamed.get(key, key))] = attr_value(value[key])
            elif key not in unknown:
                out[key] = old
        for key, new_value in value.items():  # names the scrubber changed
            if key not in unknown and key not in out:
                out[safe_text(renamed.get(key, key))] = attr_value(new_value)
        return out, removed + len(renamed)

    def _remember(self, attrs: Mapping[str, Any]) -> None:
        """Remember clean short (name, value) pairs: most spans repeat them (``GET``, a model
        name, a status code). Never data a listed call may hide, which depends on the agent
        and on the calls seen before (JSON text, model message attributes)."""
        pairs = self._clean_pairs
        if len(pairs) >= _CLEAN_PAIRS:
            pairs.clear()
        hide = self.may_hide
        for key, value in attrs.items():
            if isinstance(value, str):
                if len(value) > _CLEAN_VALUE_CHARS or (
                    hide and (value[:1] in _JSON_STARTS or key.startswith(_MESSAGE_PREFIXES))
                ):
                    continue
            elif not isinstance(value, int | float):  # (bool is an int)
                continue
            pairs.add((key, value))

    def _dotted_keys(self, attrs: Mapping[str, Any]) -> dict[str, str]:
        """Attribute names are dotted paths: each segment is scrubbed as a word of its own
        (``app.note.<card number>``; the value rules do not look inside ``a.b``)."""
        clean = self._clean_keys
        renamed: dict[str, str] = {}
        for key in attrs:
            if key in clean or "." not in key:
                continue
            shown = ".".join(self.policy.scrub_text(part) for part in key.split("."))
            if shown != key:
                renamed[key] = shown
            elif len(clean) < _CLEAN_KEYS:
                clean.add(key)
        return renamed

    def events(
        self,
        events: Sequence[EventView],
        *,
        agent: str | None = None,
        resolve: Resolve | None = None,
    ) -> tuple[tuple[EventView, ...] | None, int]:
        """``(events as they may leave, removals)``; None when none changed."""
        out: list[EventView] = []
        removed = 0
        for event in events:
            name = self.text(event.name)
            attrs, n = self.attributes(
                event.attributes, agent=agent, resolve=resolve, event_name=event.name
            )
            removed += n
            if name is event.name and attrs is event.attributes:
                out.append(event)
            else:
                out.append(EventView(name, attrs, event.time_ns))
        if all(a is b for a, b in zip(out, events, strict=True)):
            return None, removed
        return tuple(out), removed

    def span(
        self, view: SpanView, *, agent: str | None = None, resolve: Resolve | None = None
    ) -> RedactedSpan:
        """Any span that is not a tool span: every part scrubbed, listed calls redacted.

        Raises:
            RedactionError: scrubbing could not run (the caller drops the span).
        """
        if agent is None and self.may_hide:  # (agents matter only to a policy that hides)
            agent = first_str(view.attributes, _AGENT_KEYS)
        name = self.text(view.name)
        attrs, n_attrs = self.attributes(view.attributes, agent=agent, resolve=resolve)
        events, n_events = (None, 0)
        if view.events:
            events, n_events = self.events(view.events, agent=agent, resolve=resolve)
        status = view.status_message
        new_status = self.text(status) if status else None
        return RedactedSpan(
            name=None if name == view.name else name,
            attributes=None if attrs is view.attributes else attrs,
            events=events,
            status_message=None if new_status == status else new_status,
            scrubbed=n_attrs + n_events,
        )


_AGENT_KEYS: Final = (A.AGENT_ID, A.GEN_AI_AGENT_NAME, A.GEN_AI_AGENT_ID, A.OI_AGENT_NAME)


_REDACTORS: dict[int, tuple[object, TraceRedactor]] = {}


def trace_redactor(policy: _Policy) -> TraceRedactor:
    """The ``TraceRedactor`` of ``policy`` (one per policy object, kept while it is used)."""
    hit = _REDACTORS.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1]
    redactor = TraceRedactor(policy)
    if len(_REDACTORS) >= 64:
        _REDACTORS.clear()
    _REDACTORS[id(policy)] = (policy, redactor)
    return redactor


@dataclass
class SpanRedactor:
    """Redacts one tool span's values by one decision, counting what it scrubbed."""

    policy: _Policy
    tool: str
    agent: str | None
    args_action: str
    output_action: str
    scrubbed: int = 0
    resolve: Resolve | None = None

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

    def attributes(
        self, attrs: Mapping[str, Any], *, event_name: str | None = None
    ) -> Mapping[str, Any]:
        """Any other attributes of the span: the rule every span's attributes get."""
        out, removed = trace_redactor(self.policy).attributes(
            attrs, agent=self.agent, resolve=self.resolve, event_name=event_name
        )
        self.scrubbed += removed
        return out


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


_ARGS_KEYS: Final = frozenset(ALL_ARGS_KEYS)
_RESULT_KEYS: Final = frozenset(ALL_RESULT_KEYS)


def redact_span_data(
    view: SpanView,
    redactor: SpanRedactor,
    *,
    args_keys: Sequence[str] = (),
    result_keys: Sequence[str] = (),
    keep_ours: bool = False,
) -> tuple[dict[str, Any], list[EventView], Any, Any]:
    """``(attributes, events, first args value, first result value)`` of a tool span, redacted.

    Our own keys are dropped (the caller writes the resolved ones), except the inputs that
    pass through unchanged (``intentrace.batch.id``, ``intentrace.label_bearing``); with
    ``keep_ours`` they are scrubbed like any other attribute (``mask_otel_spans``).
    """
    all_args = _ARGS_KEYS.union(args_keys) if args_keys else _ARGS_KEYS
    all_results = _RESULT_KEYS.union(result_keys) if result_keys else _RESULT_KEYS
    shaped: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    first_args: Any = None
    first_result: Any = None
    for key, value in view.attributes.items():
        if key in _OURS and not keep_ours:
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
        elif key in _ENUM_KEYS:
            out = safe_value(value)
        else:
            rest[key] = value
            continue
        shaped[key] = out
    if rest:
        shaped.update(redactor.attributes(rest))
    events: list[EventView] = []
    for event in view.events:
        if event.name == A.GEN_AI_TOOL_MESSAGE_EVENT:
            convert = redactor.args
        elif event.name == A.GEN_AI_CHOICE_EVENT:
            convert = redactor.output
        else:
            convert = None
        if convert is None:
            event_attrs = dict(redactor.attributes(event.attributes, event_name=event.name))
        else:
            event_attrs = {k: attr_value(convert(v)) for k, v in event.attributes.items()}
        name = safe_text(redactor.policy.scrub_text(event.name)) if event.name else event.name
        events.append(EventView(name, event_attrs, event.time_ns))
    return shaped, events, first_args, first_result
