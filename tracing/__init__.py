"""intentrace tracing: tool calls named by their intent.

The intent primitives (schema injection, reading, stripping, outcomes, sanitizing, streaming)
are pure Python. The span processor and its setup import OpenTelemetry; they are loaded on
first use so that the viewer can import ``tracing.ledger`` without OpenTelemetry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (loaded lazily)
_EXPORTS: dict[str, str] = {
    # intent primitives (issue 2)
    "INTENT_ARG": "tracing._intent",
    "INTENT_LABEL_MARKER": "tracing._intent",
    "INTENT_DESCRIPTION": "tracing._intent",
    "IntentRegistry": "tracing._intent",
    "with_intent": "tracing._intent",
    "can_inject_intent": "tracing._intent",
    "without_intent": "tracing._intent",
    "inject_intent": "tracing._intent",
    "read_intent": "tracing._intent",
    "strip_intent": "tracing._intent",
    "apply_outcome": "tracing._intent",
    "sanitize_label": "tracing._intent",
    "StreamingIntent": "tracing._streaming",
    "IntentStreamReader": "tracing._streaming",
    "read_streaming_intent": "tracing._streaming",
    # labels
    "frame_label": "tracing._status",
    "group_header": "tracing._status",
    # span processor and setup (issue 4)
    "IntentSpanProcessor": "tracing._processor",
    "Convention": "tracing._conventions",
    "DEFAULT_CONVENTIONS": "tracing._conventions",
    "configure": "tracing._setup",
    "tool_call": "tracing._instrument",
    "tool": "tracing._instrument",
    "session": "tracing._instrument",
    "activity": "tracing._instrument",
    "harvest": "tracing._instrument",
}

__all__ = ["__version__", *_EXPORTS]  # pyright: ignore[reportUnsupportedDunderAll]

if TYPE_CHECKING:  # pragma: no cover
    from tracing._intent import (
        INTENT_ARG,
        INTENT_DESCRIPTION,
        INTENT_LABEL_MARKER,
        IntentRegistry,
        apply_outcome,
        can_inject_intent,
        inject_intent,
        read_intent,
        sanitize_label,
        strip_intent,
        with_intent,
        without_intent,
    )
    from tracing._status import frame_label, group_header
    from tracing._streaming import IntentStreamReader, StreamingIntent, read_streaming_intent


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
