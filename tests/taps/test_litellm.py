"""The tap on LiteLLM: ``completion(stream=True)`` / ``acompletion`` yield OpenAI-shaped chunks
whatever the provider, so the Chat Completions reading applies; here with LiteLLM's real
OpenAI and Anthropic providers against a loopback server speaking each wire format."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its price list
import litellm

from tests.support.sse import SSEServer, anthropic_stream, chat_stream
from tests.taps.conftest import one_by_provider
from tests.taps.test_lifecycle import until
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.status import Status
from tracing.taps import StreamTap, TappedStream

pytestmark = [
    pytest.mark.usefixtures("no_internal_errors"),
    pytest.mark.filterwarnings("ignore:.*the `ReadOnly` qualifier:UserWarning"),
]

A = (
    "call_ll1",
    "search_code",
    json.dumps({"intent": "Searching for OAuth handling", "query": "oauth"}),
)
B = ("call_ll2", "read_file", json.dumps({"intent": "Reading the callback router", "path": "r.py"}))
MESSAGES = [{"role": "user", "content": "Where is OAuth handled?"}]


def openai_completion(server: SSEServer, **kw: Any) -> Any:
    return litellm.completion(
        model="openai/gpt-4o", api_base=server.url + "/v1", api_key="sk-test",
        messages=MESSAGES, stream=True, **kw,
    )  # fmt: skip


def tool_deltas(chunks: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for c in chunks:
        for tc in c.choices[0].delta.tool_calls or []:
            out.append((tc.id, tc.index, tc.function.name, tc.function.arguments))
    return out


def test_completion_stream_openai_provider(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    parts = chat_stream([A, B], size=5, interleaved=False, text="Looking.", usage=True)
    sse_server.respond(parts)
    plain = list(openai_completion(sse_server))
    sse_server.respond(parts)
    stream = StreamTap(ledger=ledger, registry=registry, session_id="ll-1").wrap(
        openai_completion(sse_server)
    )
    assert isinstance(stream, TappedStream)  # LiteLLM's CustomStreamWrapper, proxied
    tapped = list(stream)
    assert tool_deltas(tapped) == tool_deltas(plain) and len(tapped) == len(plain)
    assert ledger.flush()
    assert [
        (r["provider_call_id"], r["status"], r["intent"]) for r in ledger.session_anchors("ll-1")
    ] == [
        ("call_ll1", Status.STREAMING, "Searching for OAuth handling"),
        ("call_ll2", Status.STREAMING, "Reading the callback router"),
    ]


def test_completion_stream_anthropic_provider(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    calls = [("toolu_ll1", *A[1:]), ("toolu_ll2", *B[1:])]
    sse_server.respond(anthropic_stream(calls, size=6))
    stream: Any = litellm.completion(
        model="anthropic/claude-sonnet-4-5", api_base=sse_server.url, api_key="sk-ant-test",
        messages=MESSAGES, stream=True, max_tokens=64,
    )  # fmt: skip
    list(StreamTap(ledger=ledger, registry=registry, session_id="ll-2").wrap(stream))
    assert ledger.flush()
    assert [(r["provider_call_id"], r["intent"]) for r in ledger.session_anchors("ll-2")] == [
        ("toolu_ll1", "Searching for OAuth handling"),
        ("toolu_ll2", "Reading the callback router"),
    ]


def test_acompletion_stream(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    sse_server.respond(chat_stream([A], size=4))
    tap = StreamTap(ledger=ledger, registry=registry, session_id="ll-3")

    async def main() -> int:
        stream: Any = await litellm.acompletion(
            model="openai/gpt-4o", api_base=sse_server.url + "/v1", api_key="sk-test",
            messages=MESSAGES, stream=True,
        )  # fmt: skip
        return len([c async for c in tap.wrap(stream)])

    assert asyncio.run(main()) > 10
    assert ledger.flush()
    (r,) = ledger.session_anchors("ll-3")
    assert (r["provider_call_id"], r["intent"]) == ("call_ll1", "Searching for OAuth handling")


def test_held_then_cut_inside_the_second_call(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    parts = chat_stream([A, B], size=5, interleaved=False, done=False)
    b_start = next(i for i, p in enumerate(parts) if b'"call_ll2"' in p)
    script = sse_server.respond(parts[: b_start + 5], cut=True, hold_at=b_start + 5)
    raised: list[BaseException] = []

    def app() -> None:
        try:
            list(StreamTap(ledger=ledger, registry=registry).wrap(openai_completion(sse_server)))
        except Exception as exc:  # LiteLLM's own wrapping of the connection error
            raised.append(exc)

    thread = threading.Thread(target=app, daemon=True)
    thread.start()
    assert script.reached.wait(20)
    mid = until(
        lambda: (
            ledger.flush()
            and (r := one_by_provider(ledger, "call_ll2")) is not None
            and r["intent"]
            and r
        )
    )
    assert mid and mid["status"] == Status.STREAMING
    script.release.set()
    thread.join(20)
    assert ledger.flush()
    a, b = one_by_provider(ledger, "call_ll1"), one_by_provider(ledger, "call_ll2")
    assert a is not None and (a["status"], a["intent"]) == (
        Status.STREAMING,
        "Searching for OAuth handling",
    )
    assert b is not None and b["status"] == Status.ABANDONED, (b, raised)
