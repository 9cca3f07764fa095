"""Tap -> span processor -> one ledger row per call: streaming, in flight, settled."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

import tracing
from tests.support.sse import SSEServer, anthropic_stream
from tests.taps.conftest import Spy, sdk_client
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.otel._processor import IntentSpanProcessor
from tracing.taps import StreamTap

CALLS = [
    (
        "toolu_e2e_1",
        "search_code",
        json.dumps({"intent": "Searching for the retry loop", "query": "retry"}),
    ),
    (
        "toolu_e2e_2",
        "read_file",
        json.dumps({"intent": "Reading the backoff settings", "path": "b.toml"}),
    ),
]


def test_stream_then_tool_spans_update_the_same_rows(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    spy = Spy(ledger)
    provider = TracerProvider()
    provider.add_span_processor(IntentSpanProcessor(registry=registry, ledger=spy))
    tracer = provider.get_tracer("agent")
    client = sdk_client("anthropic", sse_server)
    sse_server.respond(anthropic_stream(CALLS, size=6))
    tap = StreamTap(ledger=spy, registry=registry)  # session, agent, turn: from tracing.session
    with tracing.session("conv-e2e", agent_id="coder", turn=4):
        with tap.wrap(
            client.messages.stream(
                model="m", max_tokens=64, messages=[{"role": "user", "content": "retry?"}]
            )
        ) as s:
            message = s.get_final_message()
        assert ledger.flush()
        live = {r["provider_call_id"]: r for r in ledger.session_anchors("conv-e2e")}
        assert {
            k: (r["status"], r["intent"], r["agent_id"], r["turn"]) for k, r in live.items()
        } == {
            "toolu_e2e_1": ("streaming", "Searching for the retry loop", "coder", 4),
            "toolu_e2e_2": ("streaming", "Reading the backoff settings", "coder", 4),
        }
        for block in message.content:
            if block.type != "tool_use":
                continue
            args: Any = block.input
            with tracing.tool_call(block.name, args, call_id=block.id, tracer=tracer) as call:
                call.set_result({"ok": True}, outcome=f"Done: {block.name}")
    provider.shutdown()
    assert ledger.flush()
    rows = ledger.session_anchors("conv-e2e")
    assert [(r["provider_call_id"], r["status"], r["label"]) for r in rows] == [
        ("toolu_e2e_1", "success", "Done: search_code"),
        ("toolu_e2e_2", "success", "Done: read_file"),
    ]
    for r in rows:
        assert r["seq"] == live[r["provider_call_id"]]["seq"]  # updated in place, never a new row
        assert r["intent"] == live[r["provider_call_id"]]["intent"] and r["trace_id"] is not None
        statuses = [w["status"] for w in spy.of(str(r["provider_call_id"]))]
        assert statuses[0] == "streaming" and statuses[-2:] == ["in_flight", "success"]
        assert set(statuses[:-2]) == {"streaming"}
