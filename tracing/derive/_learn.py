"""Intents learned from model spans before the tool spans they requested start.

A model span that lists the tool calls it asked for (OpenInference
``llm.output_messages.*.message.tool_calls.*``, GenAI ``gen_ai.output.messages``) usually ends
before those tool spans start, and many instrumentations start tool spans with no attributes
at all. Remembering the requested calls per trace lets the processor name such a tool span at
start: matched by call id, else by tool name and order within the trace.

Bounded (oldest traces are forgotten first) and thread-safe. No OpenTelemetry import here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from tracing.derive._conventions import RequestedCall, intent_candidate

MAX_TRACES: Final = 1024
MAX_CALLS_PER_TRACE: Final = 512


@dataclass(frozen=True, slots=True)
class Pending:
    """A requested tool call waiting for its span."""

    tool_name: str
    call_id: str | None
    raw_intent: str | None
    """The raw (model-written) intent in its arguments; the gate is applied at match time."""
    batch_id: str | None = None
    """The requesting model span's id: the calls of one model step form one block."""


class RequestedCalls:
    """Requested tool calls per trace, consumed by the tool spans that match them."""

    def __init__(self, *, max_traces: int = MAX_TRACES, max_calls: int = MAX_CALLS_PER_TRACE):
        self._lock = threading.Lock()
        self._traces: OrderedDict[int, deque[Pending]] = OrderedDict()
        self._max_traces = max_traces
        self._max_calls = max_calls

    def __bool__(self) -> bool:
        return bool(self._traces)

    def has(self, trace_id: int) -> bool:
        return trace_id in self._traces  # a racy read is fine: take() re-checks under the lock

    def add(
        self,
        trace_id: int,
        calls: Iterable[RequestedCall],
        read: Callable[[Any], str | None],
        *,
        batch_id: str | None = None,
    ) -> int:
        """Remember calls requested in a trace; returns how many were added."""
        pending = [
            Pending(c.tool_name, c.call_id, intent_candidate(c.arguments, read=read), batch_id)
            for c in calls
        ]
        if not pending:
            return 0
        with self._lock:
            queue = self._traces.get(trace_id)
            if queue is None:
                queue = self._traces[trace_id] = deque(maxlen=self._max_calls)
                while len(self._traces) > self._max_traces:
                    self._traces.popitem(last=False)
            else:
                self._traces.move_to_end(trace_id)
            # a model span re-listing calls already waiting (retries, streaming) replaces them
            ids = {p.call_id for p in pending if p.call_id}
            if ids:
                kept = [p for p in queue if p.call_id not in ids]
                queue.clear()
                queue.extend(kept)
            queue.extend(pending)
        return len(pending)

    def take(self, trace_id: int, *, call_id: str | None, tool_name: str | None) -> Pending | None:
        """The matching call (by id, else the first with that tool name), removed; or None."""
        with self._lock:
            queue = self._traces.get(trace_id)
            if not queue:
                return None
            match: Pending | None = None
            if call_id:
                match = next((p for p in queue if p.call_id == call_id), None)
            if match is None and tool_name:
                match = next((p for p in queue if p.tool_name == tool_name), None)
            if match is None:
                return None
            queue.remove(match)
            if not queue:
                del self._traces[trace_id]
            return match

    def exchange(self, trace_id: int, give: Pending, raw_intent: str) -> Pending | None:
        """Swap ``give`` for a waiting call of the same tool with this intent (a span that was
        matched by order turned out to be another call); None when there is none."""
        with self._lock:
            queue = self._traces.get(trace_id)
            if not queue:
                return None
            for index, waiting in enumerate(queue):
                if waiting.tool_name == give.tool_name and waiting.raw_intent == raw_intent:
                    queue[index] = give
                    return waiting
            return None

    def __len__(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._traces.values())
