"""OTLP intake: received spans to anchors (``intentrace collect`` and ``intentrace import``).

* :func:`decode_protobuf` / :func:`decode_json`: an OTLP trace export body to span views;
* :class:`SpanFeed`: spans, as they arrive (ended, in batches, children first), to the anchors
  the in-process span processor would have written;
* :class:`CollectReceiver`: the OTLP/HTTP receiver (``POST /v1/traces``) in front of a feed.

No OpenTelemetry SDK here: the protobuf definitions only (``opentelemetry-proto``).
"""

from __future__ import annotations

from tracing.collect._feed import FeedResult, SpanFeed
from tracing.collect._otlp import DecodedBatch, OtlpDecodeError, decode_json, decode_protobuf
from tracing.collect._receiver import CollectOptions, CollectReceiver

__all__ = [
    "CollectOptions",
    "CollectReceiver",
    "DecodedBatch",
    "FeedResult",
    "OtlpDecodeError",
    "SpanFeed",
    "decode_json",
    "decode_protobuf",
]
