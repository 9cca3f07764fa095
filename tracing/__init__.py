"""intentrace tracing: tool calls named by their intent.

The intent primitives (schema injection, reading, stripping, outcomes, sanitizing, streaming)
and label resolution are pure Python and imported eagerly. The span processor, its setup and
our own instrumentation import OpenTelemetry; they are listed in ``_LAZY`` and loaded on first
attribute access, so that the viewer can import ``tracing.ledger`` without OpenTelemetry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracing._intent import (
    INTENT_ARG,
    INTENT_DESCRIPTION,
    INTENT_LABEL_MARKER,
    IntentRegistry,
    apply_outcome,
    can_inject_intent,
    default_registry,
    has_intent_marker,
    inject_intent,
    read_intent,
    sanitize_label,
    strip_intent,
    with_intent,
    without_intent,
)
from tracing._status import frame_label, group_header
from tracing._streaming import IntentStreamReader, StreamingIntent, read_streaming_intent

if TYPE_CHECKING:
    from tracing._conventions import DEFAULT_CONVENTIONS, AttributeConvention, Convention
    from tracing._instrument import (
        ToolCall,
        activity,
        current_call,
        harvest,
        session,
        tool,
        tool_call,
    )
    from tracing._options import ConfigError, IntentOptions
    from tracing._processor import IntentSpanProcessor
    from tracing._setup import TracingSetup, configure, wrap_provider

__version__ = "0.1.0"

# public name -> module that defines it (OpenTelemetry-importing parts, loaded on first access);
# each lazy name also gets a ``TYPE_CHECKING`` import so type checkers see it.
_LAZY: dict[str, str] = {
    "AttributeConvention": "tracing._conventions",
    "ConfigError": "tracing._options",
    "Convention": "tracing._conventions",
    "DEFAULT_CONVENTIONS": "tracing._conventions",
    "IntentOptions": "tracing._options",
    "IntentSpanProcessor": "tracing._processor",
    "ToolCall": "tracing._instrument",
    "TracingSetup": "tracing._setup",
    "activity": "tracing._instrument",
    "configure": "tracing._setup",
    "current_call": "tracing._instrument",
    "harvest": "tracing._instrument",
    "session": "tracing._instrument",
    "tool": "tracing._instrument",
    "tool_call": "tracing._instrument",
    "wrap_provider": "tracing._setup",
}

__all__ = [
    "DEFAULT_CONVENTIONS",
    "INTENT_ARG",
    "INTENT_DESCRIPTION",
    "INTENT_LABEL_MARKER",
    "AttributeConvention",
    "ConfigError",
    "Convention",
    "IntentOptions",
    "IntentRegistry",
    "IntentSpanProcessor",
    "IntentStreamReader",
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
    "read_intent",
    "read_streaming_intent",
    "sanitize_label",
    "session",
    "strip_intent",
    "tool",
    "tool_call",
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
