"""OpenTelemetry SDK spans as views, and shaped copies of them (``ReadableSpan``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.trace import Status, StatusCode, format_span_id, format_trace_id

from tracing.derive._conventions import EventView, SpanView


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


def is_langfuse_processor(processor: SpanProcessor) -> bool:
    return any(cls.__name__ == "LangfuseSpanProcessor" for cls in type(processor).__mro__)


def copy_span(
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
