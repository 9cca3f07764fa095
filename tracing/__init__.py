"""intentrace tracing: tool calls named by their intent.

The intent primitives (schema injection, reading, stripping, outcomes, sanitizing, streaming)
and label resolution are pure Python and imported eagerly. The span processor, its setup and
our own instrumentation import OpenTelemetry; they are listed in ``_LAZY`` and loaded on first
attribute access, so that the viewer can import ``tracing.ledger`` without OpenTelemetry.
"""

from __future__ import annotations

import importlib
from typing import Any

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

__version__ = "0.1.0"

# public name -> module that defines it (OpenTelemetry-importing parts, loaded on first access);
# each lazy name also gets a ``TYPE_CHECKING`` import so type checkers see it.
_LAZY: dict[str, str] = {}

__all__ = [
    "INTENT_ARG",
    "INTENT_DESCRIPTION",
    "INTENT_LABEL_MARKER",
    "IntentRegistry",
    "IntentStreamReader",
    "StreamingIntent",
    "__version__",
    "apply_outcome",
    "can_inject_intent",
    "default_registry",
    "frame_label",
    "group_header",
    "has_intent_marker",
    "inject_intent",
    "read_intent",
    "read_streaming_intent",
    "sanitize_label",
    "strip_intent",
    "with_intent",
    "without_intent",
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
