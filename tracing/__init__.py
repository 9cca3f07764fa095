"""intentrace tracing: tool calls named by their intent.

The intent primitives (``tracing.intent``: schema injection, reading, stripping, outcomes,
sanitizing, streaming) and label resolution (``tracing.status``) are pure Python and imported
eagerly. The span processor, its setup and our own instrumentation (``tracing.otel``) import
OpenTelemetry; they are listed in ``_LAZY`` and loaded on first attribute access, so that the
viewer can import ``tracing.ledger`` without OpenTelemetry. docs/architecture.md maps the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracing.intent import (
    INTENT_ARG,
    INTENT_DESCRIPTION,
    INTENT_LABEL_MARKER,
    INTENT_MAX_CHARS,
    LABEL_MAX_CHARS,
    IntentRegistry,
    IntentStreamReader,
    StreamingIntent,
    apply_outcome,
    can_inject_intent,
    default_registry,
    has_intent_marker,
    inject_intent,
    read_intent,
    read_streaming_intent,
    sanitize_label,
    strip_intent,
    with_intent,
    without_intent,
)
from tracing.status import frame_label, group_header

if TYPE_CHECKING:
    from tracing.derive import DEFAULT_CONVENTIONS, AttributeConvention, Convention
    from tracing.otel import (
        ConfigError,
        IntentOptions,
        IntentSpanProcessor,
        MCPToolArgs,
        ToolCall,
        TracingSetup,
        activity,
        configure,
        current_call,
        harvest,
        langfuse_span_mask,
        session,
        tool,
        tool_call,
        turn,
        wrap_provider,
    )

__version__ = "0.1.0"

# public name -> module that defines it (OpenTelemetry-importing parts, loaded on first access);
# each lazy name also gets a ``TYPE_CHECKING`` import so type checkers see it.
_LAZY: dict[str, str] = {
    "AttributeConvention": "tracing.derive",
    "ConfigError": "tracing.otel",
    "Convention": "tracing.derive",
    "DEFAULT_CONVENTIONS": "tracing.derive",
    "IntentOptions": "tracing.otel",
    "IntentSpanProcessor": "tracing.otel",
    "MCPToolArgs": "tracing.otel",
    "ToolCall": "tracing.otel",
    "TracingSetup": "tracing.otel",
    "activity": "tracing.otel",
    "configure": "tracing.otel",
    "current_call": "tracing.otel",
    "harvest": "tracing.otel",
    "langfuse_span_mask": "tracing.otel",
    "session": "tracing.otel",
    "tool": "tracing.otel",
    "tool_call": "tracing.otel",
    "turn": "tracing.otel",
    "wrap_provider": "tracing.otel",
}

__all__ = [
    "DEFAULT_CONVENTIONS",
    "INTENT_ARG",
    "INTENT_DESCRIPTION",
    "INTENT_LABEL_MARKER",
    "INTENT_MAX_CHARS",
    "LABEL_MAX_CHARS",
    "AttributeConvention",
    "ConfigError",
    "Convention",
    "IntentOptions",
    "IntentRegistry",
    "IntentSpanProcessor",
    "IntentStreamReader",
    "MCPToolArgs",
    "StreamingIntent",
    "ToolCall",
    "TracingSetup",
    "__version__",
    "activity",
    "apply_outcome",
    "can_inject_intent",
    "configure",
    "current_call",
    "default_registry",
    "frame_label",
    "group_header",
    "harvest",
    "has_intent_marker",
    "inject_intent",
    "langfuse_span_mask",
    "read_intent",
    "read_streaming_intent",
    "sanitize_label",
    "session",
    "strip_intent",
    "tool",
    "tool_call",
    "turn",
    "with_intent",
    "without_intent",
    "wrap_provider",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
