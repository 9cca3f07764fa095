"""The tap on Google Gemini (``google-genai``): ``generate_content_stream``, sync and async,
against a loopback server speaking ``streamGenerateContent?alt=sse``. Function calls arrive
whole: each is one streaming row written at first sight with its whole intent."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import errors, types
from opentelemetry.sdk.trace import TracerProvider

import tracing
from tests.support.sse import GEMINI_RESPONSE_ID, SSEServer, gemini_error, gemini_stream
from tests.taps.conftest import Spy, one_by_provider
from tests.taps.test_lifecycle import until
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.otel._processor import IntentSpanProcessor
from tracing.status import Status
from tracing.taps import StreamTap, gemini_call_id

pytestmark = pytest.mark.usefixtures("no_internal_errors")

SEARCH = {"intent": "Searching for OAuth handling", "query": "oauth"}
READ = {"intent": "Reading the callback router", "path": "r.py"}


_CLIENTS: dict[str, genai.Client] = {}


def client(server: SSEServer) -> genai.Client:
    """One client per server (a dropped client closes its connections under a lazy stream)."""
    found = _CLIENTS.get(server.url)
    if found is None:
        found = _CLIENTS[server.url] = genai.Client(
            api_key="test-key", http_options=types.HttpOptions(base_url=server.url)
        )
    return found


def stream(server: SSEServer) -> Any:
    return client(server).models.generate_content_stream(
        model="gemini-2.5-flash", contents="Where is OAuth?"
    )


def test_whole_calls_one_write_each_with_the_whole_intent(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # Two parallel calls in one chunk: one with the provider's id, one without (the Gemini API
    # often gives none: the row's id is then derived from the response id and the position).
    parts = gemini_stream(
        [("fc_read_1", "read_file", READ), (None, "search_code", SEARCH)], per_chunk=2
    )
    sse_server.respond(parts)
    plain = [c.model_dump(exclude={"sdk_http_response"}) for c in stream(sse_server)]
    sse_server.respond(parts)
    spy = Spy(ledger)
    tap = StreamTap(ledger=spy, registry=registry, session_id="g-1")
    # (the HTTP response's headers differ between two requests: its Date)
    tapped = [c.model_dump(exclude={"sdk_http_response"}) for c in tap.wrap(stream(sse_server))]
    assert tapped == plain  # the application's chunks, unchanged
    derived = gemini_call_id(GEMINI_RESPONSE_ID, 1)
    assert derived == f"{GEMINI_RESPONSE_ID}#1"
    for cid, intent in (("fc_read_1", READ["intent"]), (derived, SEARCH["intent"])):
        (write,) = spy.of(cid)  # first sight is the whole call
        assert (write["status"], write["intent"], write["batch_id"]) == (
            Status.STREAMING,
            intent,
            GEMINI_RESPONSE_ID,
        )
    rows = (
        {r["provider_call_id"]: r for r in ledger.session_anchors("g-1")} if ledger.flush() else {}
    )
    assert {c: (r["status"], r["label"]) for c, r in rows.items()} == {
        "fc_read_1": (Status.STREAMING, "Reading the callback router"),
        derived: (Status.STREAMING, "Searching for OAuth handling"),
    }


def test_mid_stream_then_an_error_event(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # The call's chunk arrives, the server holds the stream (the row is read meanwhile), then
    # an error object: the SDK raises it; the call was whole, so its row stays for the app.
    parts = [*gemini_stream([("fc_1", "search_code", SEARCH)], done=False), gemini_error()]
    script = sse_server.respond(parts, hold_at=len(parts) - 1)
    raised: list[BaseException] = []

    def app() -> None:
        try:
            for _ in StreamTap(ledger=ledger, registry=registry).wrap(stream(sse_server)):
                pass
        except errors.APIError as exc:
            raised.append(exc)

    thread = threading.Thread(target=app, daemon=True)
    thread.start()
    assert script.reached.wait(10)
    held = until(lambda: ledger.flush() and one_by_provider(ledger, "fc_1"))
    assert held and (held["status"], held["intent"]) == (Status.STREAMING, SEARCH["intent"])
    script.release.set()
    thread.join(10)
    assert raised and "overloaded" in str(raised[0])
    row = one_by_provider(ledger, "fc_1")
    assert row is not None and row["status"] == Status.STREAMING


def test_async_stream_and_the_processor_meets_the_row(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(IntentSpanProcessor(registry=registry, ledger=ledger))
    sse_server.respond(gemini_stream([(None, "search_code", SEARCH)], text=None))
    tap = StreamTap(ledger=ledger, registry=registry)

    async def main() -> list[Any]:
        calls: list[Any] = []
        chunks = await tap.wrap(
            client(sse_server).aio.models.generate_content_stream(
                model="gemini-2.5-flash", contents="x"
            )
        )
        chunk: Any
        async for chunk in chunks:
            calls += [p.function_call for p in chunk.candidates[0].content.parts if p.function_call]
        return calls

    with tracing.session("g-3"):
        (fc,) = asyncio.run(main())
        call_id = gemini_call_id(GEMINI_RESPONSE_ID, 0)
        with tracing.tool_call(
            fc.name, dict(fc.args), call_id=call_id, tracer=provider.get_tracer("app")
        ) as call:
            call.set_result({"hits": 3}, outcome="Found 3 OAuth handlers")
    provider.shutdown()
    assert ledger.flush()
    (r,) = ledger.session_anchors("g-3")
    assert (r["provider_call_id"], r["status"], r["label"]) == (
        call_id,
        Status.SUCCESS,
        "Found 3 OAuth handlers",
    )


def test_calls_outside_the_registry_and_streamed_arguments_are_not_tapped(
    sse_server: SSEServer, registry: IntentRegistry
) -> None:
    from tests.support.sse import gemini_chunk

    parts = [
        gemini_chunk([{"functionCall": {"name": "tag_ticket", "args": {"intent": "refund"}}}]),
        # Gemini 3 can stream a call's arguments (partialArgs, willContinue): not read
        gemini_chunk(
            [
                {
                    "functionCall": {
                        "name": "search_code",
                        "willContinue": True,
                        "partialArgs": [{"jsonPath": "$.intent", "stringValue": "Sea"}],
                    }
                }
            ]
        ),
        gemini_chunk([], finish="STOP"),
    ]
    sse_server.respond(parts)
    spy = Spy()
    assert len(list(StreamTap(ledger=spy, registry=registry).wrap(stream(sse_server)))) == 3
    assert spy.writes == []


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    yield
