"""Test helpers: read spans as data.

* :func:`capture` — a ``TracerProvider`` with ``IntentSpanProcessor`` wrapping an in-memory
  exporter, sequential ids, and a :class:`RecordingLedger`;
* :class:`SequentialIdGenerator` and :func:`deterministic_clock` — reproducible ids and times;
* :func:`spans_as_dicts` — exported spans as plain dicts, to compare whole lists.

Usage::

    with capture() as cap:
        with tool_call("search", {"intent": "Searching for OAuth", "q": "oauth"},
                       tracer=cap.tracer, label_bearing=True) as c:
            c.set_result({"hits": 3}, outcome="Found 3 OAuth handlers")
    assert [s["name"] for s in cap.dicts()] == ["Found 3 OAuth handlers"]
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import opentelemetry.sdk.trace as sdk_trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Tracer, format_span_id, format_trace_id

from tracing.anchor import ANCHOR_COLUMNS, AnchorWrite
from tracing.derive._call import PolicyLike, RegistryLike
from tracing.derive._conventions import DEFAULT_CONVENTIONS, Convention
from tracing.otel._options import IntentOptions
from tracing.otel._processor import IntentSpanProcessor
from tracing.status import SETTLED_STATUSES

__all__ = [
    "Capture",
    "FakeClock",
    "InMemorySpanExporter",
    "RecordingLedger",
    "SequentialIdGenerator",
    "capture",
    "deterministic_clock",
    "spans_as_dicts",
]


class SequentialIdGenerator(IdGenerator):
    """Trace ids 1, 2, 3... and span ids 1, 2, 3... (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._trace = 0
        self._span = 0

    def generate_span_id(self) -> int:
        with self._lock:
            self._span += 1
            return self._span

    def generate_trace_id(self) -> int:
        with self._lock:
            self._trace += 1
            return self._trace


class FakeClock:
    """A clock that advances ``step_ns`` on every reading."""

    def __init__(self, start_ns: int = 1_700_000_000_000_000_000, step_ns: int = 1_000_000):
        self._lock = threading.Lock()
        self.now_ns = start_ns
        self.step_ns = step_ns

    def __call__(self) -> int:
        with self._lock:
            self.now_ns += self.step_ns
            return self.now_ns


@contextlib.contextmanager
def deterministic_clock(clock: FakeClock | None = None) -> Generator[FakeClock]:
    """Make the OpenTelemetry SDK read span times from a :class:`FakeClock` (process-wide)."""
    fake = clock or FakeClock()
    original = sdk_trace.__dict__["time_ns"]
    setattr(sdk_trace, "time_ns", fake)  # noqa: B010 - the SDK reads its module global
    try:
        yield fake
    finally:
        setattr(sdk_trace, "time_ns", original)  # noqa: B010


class RecordingLedger:
    """A ledger sink that keeps what the processor wrote (``record``/``set_activity``).

    ``writes`` is every write in order; ``anchors()`` merges them per ``tool_call_id`` the way
    the ledger does (absent fields keep their value; a settled status is never overwritten by a
    live one). ``dropped`` counts the calls reported lost per session (``record_dropped``).
    """

    _SETTLED = SETTLED_STATUSES

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writes: list[AnchorWrite] = []
        self.activities: list[dict[str, Any]] = []
        self.dropped: dict[str, int] = {}

    def record(self, write: AnchorWrite) -> None:
        with self._lock:
            self.writes.append(write)

    def set_activity(
        self, session_id: str, batch_id: str, label: str, *, turn: int | None = None
    ) -> None:
        with self._lock:
            self.activities.append(
                {"session_id": session_id, "batch_id": batch_id, "label": label, "turn": turn}
            )

    def record_dropped(self, session_id: str, count: int = 1) -> None:
        with self._lock:
            self.dropped[session_id] = self.dropped.get(session_id, 0) + count

    def dropped_total(self) -> int:
        with self._lock:
            return sum(self.dropped.values())

    def anchors(self) -> dict[str, dict[str, Any]]:
        merged: dict[str, dict[str, Any]] = {}
        with self._lock:
            writes = list(self.writes)
        for write in writes:
            current = merged.get(write["tool_call_id"])
            if current is None:  # absent columns read as the ledger stores them
                current = merged[write["tool_call_id"]] = {
                    **dict.fromkeys(ANCHOR_COLUMNS),
                    "session_id": "",
                }
            if current.get("status") in self._SETTLED and write["status"] not in self._SETTLED:
                continue
            current.update(write)
        return merged

    def calls(self) -> dict[str, dict[str, Any]]:
        """``anchors()`` keyed by what a test knows a call by: the provider's call id, else
        ``<trace_id>:<span_id>`` (the anchor ids themselves are hashes, ``anchor_id``)."""
        return {_call_key(a): a for a in self.anchors().values()}


def _call_key(anchor: Mapping[str, Any]) -> str:
    provider = anchor.get("provider_call_id")
    if provider:
        return str(provider)
    return f"{anchor.get('trace_id') or ''}:{anchor.get('span_id') or ''}"


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def spans_as_dicts(
    spans: Sequence[ReadableSpan], *, ids: bool = False, times: bool = False
) -> list[dict[str, Any]]:
    """Spans as plain dicts (name, attributes, events, status, parent name), in order.

    Args:
        spans: finished spans (e.g. ``InMemorySpanExporter.get_finished_spans()``).
        ids: include ``trace_id``/``span_id``/``parent_id`` (hex).
        times: include ``start_ns``/``end_ns``.
    """
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    out: list[dict[str, Any]] = []
    for span in spans:
        item: dict[str, Any] = {
            "name": span.name,
            "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
            "events": [
                {
                    "name": e.name,
                    "attributes": {k: _plain(v) for k, v in (e.attributes or {}).items()},
                }
                for e in span.events
            ],
            "status": span.status.status_code.name,
            "parent": names.get(span.parent.span_id) if span.parent is not None else None,
        }
        if span.status.description:
            item["status_message"] = span.status.description
        if ids and span.context is not None:
            item["trace_id"] = format_trace_id(span.context.trace_id)
            item["span_id"] = format_span_id(span.context.span_id)
            item["parent_id"] = format_span_id(span.parent.span_id) if span.parent else None
        if times:
            item["start_ns"] = span.start_time
            item["end_ns"] = span.end_time
        out.append(item)
    return out


@dataclass
class Capture:
    """A provider whose intent processor exports into memory (see :func:`capture`)."""

    provider: TracerProvider
    processor: IntentSpanProcessor
    exporter: InMemorySpanExporter
    ledger: RecordingLedger
    extra: list[SpanProcessor] = field(default_factory=list[SpanProcessor])

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer("tests")

    def spans(self) -> list[ReadableSpan]:
        """Everything exported so far (flushes first)."""
        self.processor.force_flush()
        return list(self.exporter.get_finished_spans())

    def dicts(self, **kwargs: Any) -> list[dict[str, Any]]:
        return spans_as_dicts(self.spans(), **kwargs)

    def anchors(self) -> dict[str, dict[str, Any]]:
        """The ledger's anchors so far, merged per call (flushes first)."""
        self.processor.force_flush()
        return self.ledger.anchors()

    def calls(self) -> dict[str, dict[str, Any]]:
        """``anchors()`` keyed by provider call id, else ``<trace_id>:<span_id>``."""
        self.processor.force_flush()
        return self.ledger.calls()

    def by_name(self) -> Mapping[str, dict[str, Any]]:
        return {d["name"]: d for d in self.dicts()}

    def assert_no_internal_errors(self) -> None:
        errors = self.processor.internal_errors()
        assert not errors, f"internal errors: {errors}"

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.processor.force_flush()
        self.provider.shutdown()


def capture(
    *,
    policy: PolicyLike | None = None,
    registry: RegistryLike | None = None,
    options: IntentOptions | None = None,
    ledger: RecordingLedger | None = None,
    processors: Sequence[SpanProcessor] = (),
    conventions: Sequence[Convention] = DEFAULT_CONVENTIONS,
) -> Capture:
    """A ``TracerProvider`` (sequential ids) → ``IntentSpanProcessor`` → in-memory exporter."""
    exporter = InMemorySpanExporter()
    sink = ledger if ledger is not None else RecordingLedger()
    processor = IntentSpanProcessor(
        SimpleSpanProcessor(exporter),
        *processors,
        policy=policy,
        registry=registry,
        ledger=sink,
        options=options,
        conventions=conventions,
    )
    provider = TracerProvider(id_generator=SequentialIdGenerator())
    provider.add_span_processor(processor)
    return Capture(provider, processor, exporter, sink, list(processors))
