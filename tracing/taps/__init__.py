"""Stream taps: the intent of each tool call, live, while the model is still writing it.

Wrap a streamed response of ``openai`` (Chat Completions, Responses), ``anthropic``
(Messages), Google Gemini (``google-genai``) or LiteLLM, or the event stream of openai-agents
(``Runner.run_streamed().stream_events()``) or pydantic-ai (node streams, the event stream
handler); the application keeps receiving the same events, and each label-bearing tool call's
growing intent is published to the ledger as a ``streaming`` anchor (and to an optional
callback)::

    from tracing.taps import StreamTap

    tap = StreamTap(session_id="conv-42", agent_id="coder")
    with tap.wrap(client.messages.stream(model=..., tools=tools, messages=...)) as stream:
        for event in stream:
            ...

See docs/taps.md. Imports none of those packages: all stay optional (``intentrace[taps]``).
"""

from __future__ import annotations

from tracing.taps._events import gemini_call_id
from tracing.taps._options import TapOptions
from tracing.taps._tracker import (
    AnchorRecorder,
    IntentCallback,
    TapContext,
    ToolCallTracker,
    tap_stats,
)
from tracing.taps._wrap import StreamTap, TappedStream, tap_stream

__all__ = [
    "AnchorRecorder",
    "IntentCallback",
    "StreamTap",
    "TapContext",
    "TapOptions",
    "TappedStream",
    "ToolCallTracker",
    "gemini_call_id",
    "tap_stats",
    "tap_stream",
]
