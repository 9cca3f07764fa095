"""The intent primitives: pure Python, no OpenTelemetry.

Inject the ``intent`` property first into tool schemas (OpenAI, Anthropic, MCP, JSON Schema),
read it from complete or still-streaming arguments, strip it before the tool runs, resolve the
tool-authored outcome, and make model-written text safe to show. ``read_intent``,
``strip_intent``, ``apply_outcome``, ``sanitize_label`` and ``IntentStreamReader.feed`` run on
hot paths (span hooks, stream taps) and never raise. Every name here is also importable from
``tracing``.
"""

from __future__ import annotations

from tracing.intent._read import apply_outcome, read_intent, strip_intent
from tracing.intent._sanitize import INTENT_MAX_CHARS, LABEL_MAX_CHARS, sanitize_label
from tracing.intent._schema import (
    INTENT_ARG,
    INTENT_DESCRIPTION,
    INTENT_LABEL_MARKER,
    IntentRegistry,
    can_inject_intent,
    default_registry,
    has_intent_marker,
    inject_intent,
    with_intent,
    without_intent,
)
from tracing.intent._streaming import IntentStreamReader, StreamingIntent, read_streaming_intent

__all__ = [
    "INTENT_ARG",
    "INTENT_DESCRIPTION",
    "INTENT_LABEL_MARKER",
    "INTENT_MAX_CHARS",
    "LABEL_MAX_CHARS",
    "IntentRegistry",
    "IntentStreamReader",
    "StreamingIntent",
    "apply_outcome",
    "can_inject_intent",
    "default_registry",
    "has_intent_marker",
    "inject_intent",
    "read_intent",
    "read_streaming_intent",
    "sanitize_label",
    "strip_intent",
    "with_intent",
    "without_intent",
]
