"""The tap on the real ``openai`` SDK, Chat Completions, against a loopback SSE server."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import openai
import pytest

from redaction import RedactionPolicy
from tests.support.sse import (
    CHAT_ID,
    SSEServer,
    chat_chunk,
    chat_stream,
    chat_tool_delta,
    chat_tool_start,
    sse,
)
from tests.taps.conftest import Spy, one_by_provider, sdk_client
from tracing import IntentRegistry, StreamingIntent
from tracing.anchor import anchor_id
from tracing.ledger import Ledger
from tracing.status import Status
from tracing.taps import StreamTap, TapOptions, tap_stats

pytestmark = pytest.mark.usefixtures("no_internal_errors")

MESSAGES: Any = [{"role": "user", "content": "Where is OAuth handled?"}]

A = (
    "call_Aa1",
    "search_code",
    json.dumps({"intent": "Searching for OAuth handling", "query": "oauth", "limit": 20}),
)
B = (
    "call_Bb2",
    "read_file",
    json.dumps({"intent": "Reading the callback router", "path": "app/router.py"}),
)


def client(server: SSEServer) -> openai.OpenAI:
    return sdk_client("openai", server)


def aclient(server: SSEServer) -> openai.AsyncOpenAI:
    return sdk_client("openai-async", server)


def dump(events: list[Any]) -> list[tuple[type, Any]]:
    return [(type(e), e.model_dump()) for e in events]


def create(server: SSEServer) -> Any:
    return client(server).chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)


def test_parallel_interleaved_calls_app_sees_identical_chunks(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # content deltas, parallel calls whose deltas interleave, finish_reason, the usage chunk
    parts = chat_stream([A, B], size=5, interleaved=True, text="Let me look.", usage=True)
    sse_server.respond(parts)
    plain = list(create(sse_server))
    sse_server.respond(parts)
    tap = StreamTap(
        ledger=ledger, registry=registry, session_id="conv-42", agent_id="coder", turn=3
    )
    stream = create(sse_server)
    tapped = tap.wrap(stream)
    assert tapped is stream  # the same object, tapped in place
    seen = list(tapped)
    assert dump(seen) == dump(plain) and len(seen) > 20
    assert ledger.flush()
    rows = {r["provider_call_id"]: r for r in ledger.session_anchors("conv-42")}
    assert set(rows) == {"call_Aa1", "call_Bb2"}
    a, b = rows["call_Aa1"], rows["call_Bb2"]
    assert (a["status"], a["intent"], a["label"], a["tool_name"]) == (
        "streaming", "Searching for OAuth handling", "Searching for OAuth handling", "search_code",
    )  # fmt: skip
    assert (b["status"], b["intent"]) == ("streaming", "Reading the callback router")
    for row in (a, b):
        assert row["agent_id"] == "coder" and row["turn"] == 3 and row["batch_id"] == CHAT_ID
        assert row["end_ns"] is None and row["trace_id"] is None
        assert json.loads(row["redaction"] or "{}")["intent_hidden"] is False
    assert a["seq"] < b["seq"]  # first sighting order


def test_label_grows_by_whole_words_and_writes_are_bounded(
    sse_server: SSEServer, registry: IntentRegistry
) -> None:
    # A paced stream (the fake clock moves 50 ms per read), one character per delta.
    now = [0.0]

    def clock() -> float:
        now[0] += 0.05
        return now[0]

    seen: list[StreamingIntent] = []
    spy = Spy()
    tap = StreamTap(
        ledger=spy,
        registry=registry,
        on_intent=lambda cid, tool, it: seen.append(it),
        options=TapOptions(publish_interval_millis=100, max_updates_per_call=3, clock=clock),
    )
    sse_server.respond(chat_stream([A], size=1))
    for _ in tap.wrap(create(sse_server)):
        pass
    intents = [w["intent"] for w in spy.of("call_Aa1")]
    # first sighting, three growth updates (whole words only), the complete intent
    assert intents[0] is None and intents[-1] == "Searching for OAuth handling"
    assert len(intents) == 5
    for partial in intents[1:-1]:
        assert partial and "Searching for OAuth handling".startswith(partial)
        assert partial in ("Searching", "Searching for", "Searching for OAuth")
    # the callback saw every growth, character by character
    assert [s.text for s in seen][:3] == ["S", "Se", "Sea"] and seen[-1].complete
    assert sum(s.complete for s in seen) == 1


def test_helper_stream_and_get_final_completion(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    parts = chat_stream([A, B], size=9)
    sse_server.respond(parts)
    with client(sse_server).chat.completions.stream(model="gpt-4o", messages=MESSAGES) as s:
        plain = s.get_final_completion()
    sse_server.respond(parts)
    tap = StreamTap(ledger=ledger, registry=registry, session_id="s-helper")
    manager = client(sse_server).chat.completions.stream(model="gpt-4o", messages=MESSAGES)
    with tap.wrap(manager) as s:
        assert type(s).__name__ == "ChatCompletionStream"
        final = s.get_final_completion()  # consumes the stream without the app iterating it
    assert final.model_dump() == plain.model_dump()
    assert ledger.flush()
    intents = {r["provider_call_id"]: r["intent"] for r in ledger.session_anchors("s-helper")}
    assert intents == {
        "call_Aa1": "Searching for OAuth handling",
        "call_Bb2": "Reading the callback router",
    }


def test_async_create_and_async_helper(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    tap = StreamTap(ledger=ledger, registry=registry, session_id="s-async")

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        c = aclient(sse_server)
        sse_server.respond(chat_stream([A], size=4))
        plain = [
            e
            async for e in await c.chat.completions.create(
                model="m", messages=MESSAGES, stream=True
            )
        ]
        sse_server.respond(chat_stream([A], size=4))
        # the coroutine itself can be wrapped: awaiting it gives the tapped stream
        stream = await tap.wrap(
            c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        )
        assert type(stream).__name__ == "AsyncStream"
        tapped = [e async for e in stream]
        sse_server.respond(chat_stream([B], size=4))
        events: list[Any] = []
        async with tap.wrap(c.chat.completions.stream(model="m", messages=MESSAGES)) as s:
            events = [e async for e in s]
        return plain, tapped, events

    plain, tapped, events = asyncio.run(main())
    assert dump(tapped) == dump(plain)
    assert any(e.type == "tool_calls.function.arguments.done" for e in events)
    assert ledger.flush()
    intents = {r["provider_call_id"]: r["intent"] for r in ledger.session_anchors("s-async")}
    assert intents == {
        "call_Aa1": "Searching for OAuth handling",
        "call_Bb2": "Reading the callback router",
    }


ESCAPED = '{"intent": "Finding \\ud83d\\ude00 reactions in comments", "path": "x"}'


@pytest.mark.parametrize("cut", ["\\ud83d", "\\ud8", "\\ud83d\\", "\\ud83d\\ude0", "\\"])
def test_delta_cut_mid_escape(
    cut: str, sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    at = ESCAPED.index("\\ud83d") + len(cut)
    pieces = [ESCAPED[:at], ESCAPED[at:]]
    sse_server.respond(
        [
            chat_tool_start(0, "call_E", "search_code"),
            *[chat_tool_delta(0, p) for p in pieces],
            chat_chunk(
                [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}]
            ),
            sse("[DONE]"),
        ]
    )
    for _ in StreamTap(ledger=ledger, registry=registry).wrap(create(sse_server)):
        pass
    assert ledger.flush()
    row = one_by_provider(ledger, "call_E")
    assert row is not None and row["intent"] == "Finding 😀 reactions in comments"


def test_stream_cut_inside_an_escape_abandons_the_call(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    at = ESCAPED.index("\\ud83d") + 4
    parts = [
        chat_tool_start(0, "call_C", "search_code"),
        chat_tool_delta(0, ESCAPED[:at]),  # ends with "\ud8": half an escape
    ]
    errors: list[type[BaseException]] = []
    for tapped in (False, True):
        sse_server.respond(parts, cut=True)
        stream = create(sse_server)
        if tapped:
            stream = StreamTap(ledger=ledger, registry=registry, session_id="s-cut").wrap(stream)
        got: list[Any] = []
        with pytest.raises(openai.APIConnectionError) as info:
            got.extend(stream)
        assert len(got) == 2
        errors.append(type(info.value))
    assert errors[0] is errors[1]  # the application sees the same failure
    assert ledger.flush()
    row = one_by_provider(ledger, "call_C")
    assert row is not None
    assert (row["status"], row["intent"], row["label"]) == (
        "abandoned", "Finding", "Finding · abandoned",
    )  # fmt: skip
    assert row["error"] and "APIConnectionError" in row["error"] and row["end_ns"] is not None


def test_non_intent_first_key_label_appears_at_settle(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    args = json.dumps(
        {"query": "oauth", "intent": "Searching for OAuth"}
    )  # reordered by the provider
    sse_server.respond(chat_stream([("call_R", "search_code", args)], size=3))
    seen: list[StreamingIntent] = []
    tap = StreamTap(
        ledger=ledger, registry=registry, session_id="s-r", on_intent=lambda *a: seen.append(a[2])
    )
    assert len(list(tap.wrap(create(sse_server)))) > 5
    assert ledger.flush()
    row = one_by_provider(ledger, "call_R")
    assert row is not None and seen == []
    assert (row["status"], row["intent"], row["label"]) == (
        "streaming",
        None,
        "Running search_code",
    )
    # the processor then writes the same call id: in flight with the intent, then settled
    ledger.record(
        {
            "tool_call_id": anchor_id("call_R", session_id="s-r"),
            "tool_name": "search_code",
            "status": Status.IN_FLIGHT,
            "intent": "Searching for OAuth",
            "trace_id": "a" * 32,
        }
    )
    assert ledger.flush()
    moved = one_by_provider(ledger, "call_R")
    assert moved is not None and (moved["status"], moved["label"]) == (
        "in_flight",
        "Searching for OAuth",
    )
    assert moved["seq"] == row["seq"] and moved["trace_id"] == "a" * 32


def test_tools_outside_the_registry_are_not_tapped(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    crm = (
        "call_X",
        "tag_ticket",
        json.dumps({"intent": "refund", "ticket": 7}),
    )  # a business field
    sse_server.respond(chat_stream([crm, A]))
    seen: list[str] = []
    tap = StreamTap(
        ledger=ledger, registry=registry, session_id="s-g", on_intent=lambda c, t, i: seen.append(c)
    )
    list(tap.wrap(create(sse_server)))
    assert ledger.flush()
    assert [r["provider_call_id"] for r in ledger.session_anchors("s-g")] == ["call_Aa1"]
    assert set(seen) == {"call_Aa1"}


def test_stream_that_just_stops_abandons_unfinished_calls(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    parts = chat_stream([A, B], size=6, done=False)[:-6]  # no finish_reason, no [DONE]
    for tapped in (False, True):
        sse_server.respond(parts)
        stream = create(sse_server)
        if tapped:
            stream = StreamTap(ledger=ledger, registry=registry, session_id="s-eof").wrap(stream)
        assert len(list(stream)) == len(parts)  # no error either way
    assert ledger.flush()
    rows = ledger.session_anchors("s-eof")
    assert [r["status"] for r in rows] == ["abandoned", "abandoned"]
    assert all("ended before" in (r["error"] or "") for r in rows)


def test_error_mid_stream_reaches_the_app_unchanged(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    parts = [
        *chat_stream([A], size=6)[:5],
        sse(
            {
                "error": {
                    "message": "The server had an error while processing your request.",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        ),
    ]
    messages: list[str] = []
    for tapped in (False, True):
        sse_server.respond(parts)
        stream = create(sse_server)
        if tapped:
            stream = StreamTap(ledger=ledger, registry=registry, session_id="s-err").wrap(stream)
        with pytest.raises(openai.APIError) as info:
            list(stream)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert ledger.flush()
    (row,) = ledger.session_anchors("s-err")
    assert row["status"] == "abandoned" and "APIError" in (row["error"] or "")


def test_app_that_stops_reading_early(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    sse_server.respond(chat_stream([A, B], size=4, interleaved=False))
    stream = StreamTap(ledger=ledger, registry=registry, session_id="s-stop").wrap(
        create(sse_server)
    )
    for n, _ in enumerate(stream):
        if n == 12:  # A's intent is complete and B has not started
            break
    stream.close()
    del stream
    gc.collect()
    assert ledger.flush()
    (row,) = ledger.session_anchors("s-stop")
    assert (row["provider_call_id"], row["status"], row["intent"]) == (
        "call_Aa1", "abandoned", "Searching for OAuth handling",
    )  # fmt: skip
    assert "closed before" in (row["error"] or "")


POLICY = """
[tools.read_file]
args = "redact"
"""


def test_redaction_hides_and_scrubs_what_is_published(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    token = "ghp_" + "Z8k2Lq9Xv4Rt6Yp1Wm3Nb5Hc7Jd0Fg2Ks4Ax"
    secret_intent = f"Checking access with {token} for the repo"
    a = ("call_S", "search_code", json.dumps({"intent": secret_intent, "q": 1}))
    sse_server.respond(chat_stream([a, B], size=3))
    spy = Spy(ledger)
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # every growth may publish: the worst case for a half-written secret
        return now[0]

    policy = RedactionPolicy.from_toml(POLICY)
    tap = StreamTap(
        ledger=spy,
        registry=registry,
        policy=policy,
        session_id="s-red",
        options=TapOptions(clock=clock, max_updates_per_call=100),
    )
    list(tap.wrap(create(sse_server)))
    assert ledger.flush()
    published = [w["intent"] or "" for w in spy.of("call_S")]
    assert len(published) >= 4
    for text in published:  # never a piece of the token, whole or half-written
        assert "ghp_" not in text and token[6:12] not in text
    row = one_by_provider(ledger, "call_S")
    assert row is not None and row["intent"] is not None
    assert row["intent"].startswith("Checking access with [redacted") and row["intent"].endswith(
        "for the repo"
    )
    hidden = one_by_provider(ledger, "call_Bb2")
    assert hidden is not None and (hidden["intent"], hidden["label"]) == (None, "Running read_file")
    assert json.loads(hidden["redaction"] or "{}") == {
        "args": "redact", "output": "keep", "intent_hidden": True, "outcome_hidden": False, "scrubbed": 1,
    }  # fmt: skip
    assert all(w["intent"] is None for w in spy.of("call_Bb2"))


def test_callback_errors_are_counted_not_raised(
    sse_server: SSEServer, registry: IntentRegistry
) -> None:
    def boom(call_id: str, tool: str, intent: StreamingIntent) -> None:
        raise RuntimeError("the app's UI failed")

    before = tap_stats()["callback_errors"]
    sse_server.respond(chat_stream([A], size=8))
    events = list(
        StreamTap(ledger=False, registry=registry, on_intent=boom).wrap(create(sse_server))
    )
    assert len(events) > 5
    assert tap_stats()["callback_errors"] > before
