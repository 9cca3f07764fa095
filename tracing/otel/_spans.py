"""OpenTelemetry SDK spans as views, and shaped copies of them (``ReadableSpan``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, cast

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.trace import Link, Status, StatusCode, format_span_id, format_trace_id

from tracing import attributes as A
from tracing.derive._conventions import EventView, SpanView
from tracing.derive._listed import Resolve
from tracing.derive._redact import TraceRedactor, safe_text, safe_value

_MAX_RESOURCES: Final = 64


def plain_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """A span's attributes as a plain ``dict`` (one C-level copy).

    ``ReadableSpan.attributes`` is a read-only proxy over the SDK's ``BoundedAttributes``,
    whose ``get`` goes through Python-level ``Mapping`` methods: the derivation reads dozens of
    keys per span, so it reads them from a copy.
    """
    if attributes is None:
        return {}
    if isinstance(attributes, MappingProxyType | dict):
        return attributes.copy()  # (a proxy copies what it wraps: one C-level dict copy)
    return dict(attributes)


def span_view(span: ReadableSpan) -> SpanView:
    """A :class:`SpanView` of an SDK span (live or ended)."""
    ctx = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    return SpanView(
        name=span.name,
        attributes=plain_attributes(span.attributes),
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


def is_langfuse_processor(processor: SpanProcessor) -> bool:
    return any(cls.__name__ == "LangfuseSpanProcessor" for cls in type(processor).__mro__)


def copy_span(
    span: ReadableSpan,
    *,
    name: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    events: Sequence[EventView] | None = None,
    status_message: str | None = None,
    resource: Resource | None = None,
    links: Sequence[Link] | None = None,
) -> ReadableSpan:
    """A new ``ReadableSpan`` like ``span`` with some parts replaced."""
    status = span.status
    if status_message is not None:  # (None: the description as it was)
        status = (
            Status(StatusCode.ERROR, status_message)
            if status.status_code == StatusCode.ERROR
            else Status(status.status_code)
        )
    return ReadableSpan(
        name=name if name is not None else span.name,
        context=span.context,
        parent=span.parent,
        resource=resource if resource is not None else span.resource,
        attributes=dict(attributes) if attributes is not None else span.attributes,
        events=tuple(Event(e.name, dict(e.attributes), e.time_ns) for e in events)
        if events is not None
        else span.events,
        links=tuple(links) if links is not None else span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


# --------------------------------------------------------------------------------------------
# stubs and encodability

STUB_KEYS: Final[tuple[str, ...]] = (
    A.GEN_AI_OPERATION_NAME,
    A.GEN_AI_TOOL_CALL_ID,
    A.OPENINFERENCE_SPAN_KIND,
    A.TRACELOOP_SPAN_KIND,
    A.LANGFUSE_OBSERVATION_TYPE,
    A.LABEL_BEARING,
    A.SESSION_ID,
    A.AGENT_ID,
    A.TURN,
)
"""What a stub keeps of a span's attributes: identifiers and kinds, never data."""
_KINDS: Final = frozenset(
    {
        A.GEN_AI_OPERATION_NAME,
        A.OPENINFERENCE_SPAN_KIND,
        A.TRACELOOP_SPAN_KIND,
        A.LANGFUSE_OBSERVATION_TYPE,
    }
)
"""Enums written by instrumentations: only made encodable (as every span's are)."""


def stub_span(
    span: ReadableSpan,
    name: str,
    attrs: Mapping[str, Any] | None = None,
    *,
    scrub: Callable[[str], str],
    resource: Resource,
) -> ReadableSpan:
    """The span as a stub: ``name`` (already scrubbed), identifiers and kinds only
    (``STUB_KEYS``, the tool name when it is an identifier; both scrubbed with ``scrub``),
    ``intentrace.shed``; no events, no status description, links without attributes, the
    ``resource`` as redacted. For a span whose processing was shed. ``attrs``: its attributes
    as a plain dict, when the caller has them."""
    if attrs is None:
        attrs = plain_attributes(span.attributes)
    kept: dict[str, Any] = {A.SHED: True}
    for key in STUB_KEYS:
        value = attrs.get(key)
        if value is None:
            continue
        kind = value.__class__
        if kind is str:
            kept[key] = safe_text(value if key in _KINDS else scrub(value))
        elif kind is bool or kind is int:
            kept[key] = value
    tool = attrs.get(A.GEN_AI_TOOL_NAME)
    if isinstance(tool, str) and tool.isidentifier():
        kept[A.GEN_AI_TOOL_NAME] = safe_text(scrub(tool))
    status = span.status
    links = span.links
    return ReadableSpan(
        name=safe_text(name),
        context=span.context,
        parent=span.parent,
        resource=resource,
        attributes=kept,
        events=(),
        links=tuple(Link(link.context) for link in links) if links else (),
        kind=span.kind,
        status=Status(status.status_code) if status.description else status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _value_encodes(value: Any) -> bool:
    if value.__class__ is str:
        return _encodes(value)
    if isinstance(value, tuple | list):
        items = cast("Sequence[Any]", value)
        return all(_encodes(v) for v in items if isinstance(v, str))
    return True


def _attributes_encode(attributes: Mapping[str, Any] | None) -> bool:
    if not attributes:
        return True
    return all(_encodes(k) and _value_encodes(v) for k, v in attributes.items())


def _safe_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {safe_text(k): safe_value(v) for k, v in (attributes or {}).items()}


def encodable(span: ReadableSpan) -> ReadableSpan:
    """``span`` itself, or a copy with every lone surrogate replaced: in the name, the status
    description, attribute keys and values, event names and attributes, link attributes. One
    lone surrogate makes the OTLP encoder fail the whole batch it is in."""
    status = span.status
    description = status.description
    attrs = span.attributes
    events = span.events
    links = span.links
    if (
        _encodes(span.name)
        and (description is None or _encodes(description))
        and _attributes_encode(attrs)
        and all(_encodes(e.name) and _attributes_encode(e.attributes) for e in events)
        and all(_attributes_encode(link.attributes) for link in links)
    ):
        return span
    return ReadableSpan(
        name=safe_text(span.name),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=_safe_attributes(attrs),
        events=tuple(
            Event(safe_text(e.name), _safe_attributes(e.attributes), e.timestamp) for e in events
        ),
        links=tuple(
            Link(link.context, _safe_attributes(link.attributes)) if link.attributes else link
            for link in links
        ),
        kind=span.kind,
        status=Status(status.status_code, safe_text(description))
        if description is not None
        else status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class Shaper:
    """Redacted copies of any span's resource and links, and of spans that are not tool spans
    (one per processor; resources are redacted once each and the copies reused)."""

    def __init__(self, redactor: TraceRedactor) -> None:
        self.redactor = redactor
        self._resources: dict[int, tuple[Resource, Resource]] = {}

    def resource(self, resource: Resource) -> Resource:
        """The resource with its attributes redacted (the same object when nothing changed).

        Raises:
            RedactionError: scrubbing could not run.
        """
        hit = self._resources.get(id(resource))
        if hit is not None and hit[0] is resource:
            return hit[1]
        attrs, removed = self.redactor.attributes(resource.attributes)
        shown = (
            resource
            if not removed and attrs is resource.attributes
            else Resource(dict(attrs), resource.schema_url)
        )
        if len(self._resources) >= _MAX_RESOURCES:
            self._resources.clear()
        self._resources[id(resource)] = (resource, shown)
        return shown

    def links(self, span: ReadableSpan, agent: str | None) -> tuple[Link, ...] | None:
        """The span's links with their attributes redacted; None when none changed."""
        if not span.links:
            return None
        out: list[Link] = []
        changed = False
        for link in span.links:
            attrs = link.attributes or {}
            new, _ = self.redactor.attributes(attrs, agent=agent)
            if new is attrs:
                out.append(link)
            else:
                out.append(Link(link.context, dict(new)))
                changed = True
        return tuple(out) if changed else None

    def plain(
        self, span: ReadableSpan, *, agent: str | None = None, resolve: Resolve | None = None
    ) -> ReadableSpan:
        """A span that is not a tool span, as it may leave: name, attributes (names and
        values), events, status description, links and resource scrubbed; the tool calls it
        lists redacted by their tools' policies. ``span`` itself when nothing changed.

        Raises:
            RedactionError: redaction could not run (the caller drops the span).
        """
        view = SpanView(  # what redaction reads (no ids, times or resource: cheaper)
            name=span.name,
            attributes=span.attributes or {},
            events=tuple(EventView(e.name, e.attributes or {}, e.timestamp) for e in span.events)
            if span.events
            else (),
            status_code=span.status.status_code.value,
            status_message=span.status.description,
        )
        parts = self.redactor.span(view, agent=agent, resolve=resolve)
        resource = self.resource(span.resource)
        links = self.links(span, agent)
        if not parts.changed and resource is span.resource and links is None:
            return span
        return copy_span(
            span,
            name=parts.name,
            attributes=parts.attributes,
            events=parts.events,
            status_message=parts.status_message,
            resource=resource,
            links=links,
        )
