"""What ``StreamTap.wrap`` takes and returns: in place, twice, proxies, errors, handlers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.sse import SSEServer, anthropic_stream, chat_stream
from tests.taps.conftest import Spy, sdk_client
from tracing import IntentRegistry
from tracing.taps import StreamTap, TapOptions, TappedStream

A = ("call_w1", "search_code", json.dumps({"intent": "Finding the cache layer", "q": "cache"}))


def events(server: SSEServer, kind: str = "openai") -> list[Any]:
    if kind == "openai":
        server.respond(chat_stream([A], size=5))
        return list(
            sdk_client("openai", server).chat.completions.create(
                model="m", messages=[], stream=True
            )
        )
    server.respond(anthropic_stream([A], size=5))
    return list(
        sdk_client("anthropic", server).messages.create(
            model="m", max_tokens=9, messages=[], stream=True
        )
    )


def test_wrapping_twice_taps_once(sse_server: SSEServer, registry: IntentRegistry) -> None:
    spy = Spy()
    tap = StreamTap(
        ledger=spy, registry=registry, options=TapOptions(publish_interval_millis=60_000)
    )
    sse_server.respond(chat_stream([A], size=5))
    stream = sdk_client("openai", sse_server).chat.completions.create(
        model="m", messages=[], stream=True
    )
    assert tap.wrap(tap.wrap(stream)) is stream
    list(stream)
    assert [w["intent"] for w in spy.writes] == [None, "Finding", "Finding the cache layer"]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_any_iterable_of_sdk_events_gets_a_pass_through_proxy(
    kind: str, sse_server: SSEServer, registry: IntentRegistry
) -> None:
    collected = events(sse_server, kind)
    spy = Spy()
    wrapped = StreamTap(ledger=spy, registry=registry).wrap(e for e in collected)
    assert isinstance(wrapped, TappedStream)
    out = list(wrapped)
    assert len(out) == len(collected) and all(a is b for a, b in zip(out, collected, strict=True))
    assert spy.writes[-1]["intent"] == "Finding the cache layer"


def test_event_handler_style(sse_server: SSEServer, registry: IntentRegistry) -> None:
    # An app that consumes the stream its own way feeds the tracker itself.
    spy = Spy()
    tracker = StreamTap(ledger=spy, registry=registry).tracker(session_id="own", turn=2)
    for event in events(sse_server, "anthropic"):
        tracker.observe(event)
    tracker.close()
    first, *_, last = spy.writes
    assert (first["session_id"], first["turn"], first["provider_call_id"]) == ("own", 2, "call_w1")
    assert (last["status"], last["intent"]) == ("streaming", "Finding the cache layer")


def test_not_a_stream_is_a_type_error(registry: IntentRegistry) -> None:
    with pytest.raises(TypeError, match="stream of SDK events"):
        StreamTap(ledger=False, registry=registry).wrap(42)


def test_ledger_url_and_bad_urls(tmp_path: Any, registry: IntentRegistry) -> None:
    from tracing.ledger import LedgerError

    tap = StreamTap(ledger=f"sqlite:///{tmp_path}/t.db", registry=registry)
    again = StreamTap(ledger=f"sqlite:///{tmp_path}/t.db", registry=registry)
    assert tap.recorder is again.recorder  # one ledger per URL, shared by the taps
    with pytest.raises(LedgerError, match="unsupported ledger URL"):
        StreamTap(ledger="mysql://nope", registry=registry)
