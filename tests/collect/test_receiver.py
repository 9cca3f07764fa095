"""The OTLP/HTTP receiver over loopback: the real exporter, JSON bodies, gzip, the bearer token,
the body limit, malformed bodies of every kind, partial success, back-pressure, and a fuzzer
that must never get a 5xx or stop the receiver."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redaction import RedactionError, RedactionPolicy
from tests.collect.conftest import Collected
from tests.support.wire import Response, post, spans_to_json
from tracing import session, tool_call
from tracing.collect._feed import SpanFeed
from tracing.collect._receiver import CollectOptions, CollectReceiver
from tracing.testing import RecordingLedger

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def make_spans(n: int = 2, *, tool: str = "search_code") -> list[ReadableSpan]:
    """Real SDK spans of our instrumentation (ended), to encode by hand."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    with session("conv-rx", agent_id="coder", turn=1):
        for i in range(n):
            args = {"intent": f"Searching for thing {i}", "q": str(i)}
            with tool_call(tool, args, label_bearing=True, tracer=tracer) as call:
                call.set_result({"hits": i}, outcome=f"Found {i} things")
    provider.shutdown()
    return list(exporter.get_finished_spans())


def protobuf_body(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def json_body(spans: list[ReadableSpan]) -> bytes:
    return json.dumps(spans_to_json(spans)).encode()


def status_message(response: Response) -> str:
    """The ``google.rpc.Status`` message of an error response, in its content type."""
    if response.headers["content-type"] == JSON:
        return response.json()["message"]
    status = status_pb2.Status()
    status.ParseFromString(response.body)
    return status.message


def export_response(response: Response) -> ExportTraceServiceResponse:
    assert response.headers["content-type"] == PROTOBUF
    parsed = ExportTraceServiceResponse()
    parsed.ParseFromString(response.body)
    return parsed


# ---------------------------------------------------------------------------------- accepted


def test_real_exporter_protobuf(collected: Collected) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=collected.url)))
    with tool_call(
        "search_code",
        {"intent": "Searching for OAuth handling", "q": "oauth"},
        label_bearing=True,
        tracer=provider.get_tracer("t"),
    ) as call:
        call.set_result({"hits": 12}, outcome="Found 12 OAuth handlers")
    provider.shutdown()
    (anchor,) = collected.ledger.calls().values()
    assert anchor["label"] == "Found 12 OAuth handlers"
    assert anchor["intent"] == "Searching for OAuth handling"
    assert anchor["status"] == "success"
    assert anchor["args"] == '{"q": "oauth"}'
    assert collected.receiver.stats()["requests"] == 1


def test_protobuf_response_is_an_export_response(collected: Collected) -> None:
    response = post(collected.url, protobuf_body(make_spans(3)))
    assert response.status == 200
    parsed = export_response(response)
    assert not parsed.HasField("partial_success")
    assert len(collected.ledger.calls()) == 3


def test_json_body_gets_a_json_response(collected: Collected) -> None:
    response = post(collected.url, json_body(make_spans(2)), content_type=JSON)
    assert response.status == 200
    assert response.headers["content-type"] == JSON
    assert response.json() == {}
    labels = sorted(a["label"] for a in collected.ledger.calls().values())
    assert labels == ["Found 0 things", "Found 1 things"]


def test_gzip_bodies(collected: Collected) -> None:
    spans = make_spans(2)
    for body, kind in ((protobuf_body(spans), PROTOBUF), (json_body(spans), JSON)):
        response = post(
            collected.url,
            gzip.compress(body),
            content_type=kind + "; charset=utf-8",
            headers={"Content-Encoding": "gzip"},
        )
        assert response.status == 200, status_message(response)
    assert len(collected.ledger.calls()) == 2  # the same spans twice: idempotent


def test_keep_alive_serves_several_requests_on_one_connection(collected: Collected) -> None:
    import http.client

    host, port = collected.receiver.address
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        for _ in range(3):
            conn.request(
                "POST", "/v1/traces", body=protobuf_body(make_spans(1)), headers={
                    "Content-Type": PROTOBUF
                }
            )  # fmt: skip
            response = conn.getresponse()
            response.read()
            assert response.status == 200
    finally:
        conn.close()
    assert collected.receiver.stats()["requests"] == 3


# ---------------------------------------------------------------------------------- token


def test_token_required(collect: Callable[..., Collected]) -> None:
    rx = collect(token="s3cret-token")
    body = protobuf_body(make_spans(1))
    denied = post(rx.url, body)
    assert denied.status == 401
    assert denied.headers["www-authenticate"].startswith("Bearer")
    assert "bearer token" in status_message(denied)
    wrong = post(rx.url, body, headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401
    assert rx.ledger.calls() == {}

    exporter = OTLPSpanExporter(endpoint=rx.url, headers={"Authorization": "Bearer s3cret-token"})
    assert exporter.export(make_spans(1)) is SpanExportResult.SUCCESS
    assert len(rx.ledger.calls()) == 1
    no_token = OTLPSpanExporter(endpoint=rx.url)
    assert no_token.export(make_spans(1)) is SpanExportResult.FAILURE
    assert rx.receiver.stats()["http_401"] == 3


# ---------------------------------------------------------------------------------- limits


def test_body_limit(collect: Callable[..., Collected]) -> None:
    rx = collect(max_body_bytes=4096)
    big = protobuf_body(make_spans(40))
    assert len(big) > 4096
    response = post(rx.url, big)
    assert response.status == 413
    assert "exceeds the limit of 4096" in status_message(response)
    # a small gzip body that inflates beyond the limit (a decompression bomb)
    bomb = gzip.compress(b"\x00" * 1_000_000)
    assert len(bomb) < 4096
    response = post(rx.url, bomb, headers={"Content-Encoding": "gzip"})
    assert response.status == 413
    assert "decompresses to more than 4096" in status_message(response)
    assert post(rx.url, protobuf_body(make_spans(1))).status == 200


def test_busy_ledger_answers_503_with_retry_after(collect: Callable[..., Collected]) -> None:
    depth = {"queue_depth": 60_000}
    rx = collect(ledger_stats=lambda: depth)
    response = post(rx.url, protobuf_body(make_spans(1)))
    assert response.status == 503
    assert response.headers["retry-after"] == "1"
    depth["queue_depth"] = 0
    assert post(rx.url, protobuf_body(make_spans(1))).status == 200


# ---------------------------------------------------------------------------------- malformed


def _truncated_gzip() -> bytes:
    data = gzip.compress(protobuf_body(make_spans(2)))
    return data[: len(data) // 2]


MALFORMED: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("garbage", b"\xff\xff\xff\xff\xff", {}, 400, "not a protobuf ExportTraceServiceRequest"),
    ("not json", b"{nope", {"Content-Type": JSON}, 400, "body is not JSON"),
    ("json list", b"[1, 2]", {"Content-Type": JSON}, 400, "expected an object"),
    (
        "json wrong shape",
        b'{"resourceSpans": [{"scopeSpans": 3}]}',
        {"Content-Type": JSON},
        400,
        "resourceSpans[0].scopeSpans: expected a list",
    ),
    ("bad gzip", b"not gzip at all", {"Content-Encoding": "gzip"}, 400, "bad gzip body"),
    ("text/plain", b"hello", {"Content-Type": "text/plain"}, 415, "unsupported Content-Type"),
    ("no content type", b"hello", {"Content-Type": ""}, 415, "unsupported Content-Type"),
    ("brotli", b"hello", {"Content-Encoding": "br"}, 415, "unsupported Content-Encoding"),
]


def test_malformed_bodies_get_clear_errors_and_the_receiver_survives(collected: Collected) -> None:
    truncated = protobuf_body(make_spans(3))
    cases = [
        *MALFORMED,
        ("truncated protobuf", truncated[: len(truncated) - 7], {}, 400, "protobuf"),
        ("truncated gzip", _truncated_gzip(), {"Content-Encoding": "gzip"}, 400, "truncated"),
    ]
    for name, body, headers, status, message in cases:
        content_type = headers.pop("Content-Type", PROTOBUF) or None
        response = post(collected.url, body, content_type=content_type, headers=headers)
        assert response.status == status, name
        assert message in status_message(response), (name, status_message(response))
        assert "\n" not in status_message(response)
    assert collected.ledger.calls() == {}
    assert post(collected.url, protobuf_body(make_spans(1))).status == 200


def test_json_error_responses_are_json(collected: Collected) -> None:
    response = post(collected.url, b"{nope", content_type=JSON)
    assert response.status == 400
    assert response.headers["content-type"] == JSON
    assert response.json()["code"] == 3  # INVALID_ARGUMENT
    assert response.json()["message"].startswith("body is not JSON")


def test_paths_methods_and_length(collected: Collected) -> None:
    body = protobuf_body(make_spans(1))
    assert post(collected.url, body, path="/v1/metrics").status == 404
    got = post(collected.url, b"", method="GET")
    assert got.status == 405
    assert got.headers["allow"] == "POST"
    host, port = collected.receiver.address
    with socket.create_connection((host, port), timeout=5) as sock:  # no Content-Length
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n\r\n"
        )
        assert sock.recv(100).startswith(b"HTTP/1.1 411")
    assert post(collected.url, body, path="/v1/traces/").status == 200


def test_partial_success_names_the_rejected_spans(collected: Collected) -> None:
    good = json.loads(json_body(make_spans(2)))
    spans = good["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["traceId"] = "abc"
    response = post(collected.url, json.dumps(good).encode(), content_type=JSON)
    assert response.status == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "spans[1]" in partial["errorMessage"]
    assert "traceId" in partial["errorMessage"]
    assert len(collected.ledger.calls()) == 1


@pytest.mark.parametrize("kind", [PROTOBUF, JSON])
def test_text_that_is_not_utf8_keeps_the_rest_of_the_batch(collected: Collected, kind: str) -> None:
    """One span's strings holding bytes that are not UTF-8 (an exporter in another language
    copying raw bytes): protobuf refuses the whole message for it, a JSON parser the whole
    body; the receiver repairs the bad bytes (U+FFFD), counts them, and keeps every span. Real
    bytes over loopback HTTP."""
    spans = make_spans(4)
    body = protobuf_body(spans) if kind == PROTOBUF else json_body(spans)
    # same-length swaps keep every length prefix valid: the intent of call 2 and a value of
    # call 3 get bytes that are not UTF-8 (a lone continuation byte, a truncated sequence)
    value = b'"q": "3"' if kind == PROTOBUF else b'\\"q\\": \\"3\\"'
    for good, bad in ((b"thing 2", b"th\x80ng 2"), (value, value.replace(b"3", b"\xe2"))):
        assert body.count(good) >= 1, good
        body = body.replace(good, bad)
    if kind == PROTOBUF:
        with pytest.raises(DecodeError, match="UTF-8"):
            ExportTraceServiceRequest.FromString(body)
    else:
        with pytest.raises(UnicodeDecodeError):
            body.decode()
    response = post(collected.url, body, content_type=kind)
    assert response.status == 200, status_message(response)
    if kind == PROTOBUF:
        partial = export_response(response).partial_success
        assert partial.rejected_spans == 0
        assert "not UTF-8" in partial.error_message
    else:
        assert "not UTF-8" in response.json()["partialSuccess"]["errorMessage"]
        assert "rejectedSpans" not in response.json()["partialSuccess"]
    anchors = {a["intent"]: a for a in collected.ledger.calls().values()}
    assert set(anchors) == {
        "Searching for thing 0",
        "Searching for thing 1",
        "Searching for th\ufffdng 2",
        "Searching for thing 3",
    }
    assert anchors["Searching for thing 3"]["args"] == '{"q": "\ufffd"}'
    stats = collected.receiver.stats()
    assert stats["rejected"] == 0
    assert stats["repaired_values"] >= 2


@pytest.mark.internal_errors
def test_partial_success_when_redaction_fails() -> None:
    class FailingForTool:
        """The real policy, except that redaction cannot run for one tool."""

        def __init__(self) -> None:
            self.real = RedactionPolicy.default()

        def redact_call(self, **kwargs: Any) -> Any:
            if kwargs.get("tool_name") == "read_file":
                raise RedactionError("redaction failed: test")
            return self.real.redact_call(**kwargs)

        def scrub(self, value: Any) -> Any:
            return self.real.scrub(value)

        def scrub_text(self, text: str) -> str:
            return self.real.scrub_text(text)

    ledger = RecordingLedger()
    feed = SpanFeed(ledger, policy=FailingForTool())
    with CollectReceiver(feed, CollectOptions(port=0)) as rx:
        spans = make_spans(1) + make_spans(1, tool="read_file")
        parsed = export_response(post(rx.traces_url, protobuf_body(spans)))
    assert parsed.partial_success.rejected_spans == 1
    assert "redaction failed" in parsed.partial_success.error_message
    assert [a["tool_name"] for a in ledger.calls().values()] == ["search_code"]
    assert feed.stats()["rejected"] == 1


# ---------------------------------------------------------------------------------- fuzzing

_ONE_CALL = protobuf_body(make_spans(1))  # built outside the strategies (random span ids)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.one_of(
        st.binary(max_size=300),
        st.integers(0, 400).map(lambda n: _ONE_CALL[:n]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["resourceSpans", "scopeSpans", "spans", "traceId", "x"]),
                    inner,
                    max_size=3,
                )
            ),
            max_leaves=12,
        ).map(lambda v: json.dumps(v).encode()),
    ),
    content_type=st.sampled_from([PROTOBUF, JSON, "application/protobuf", "text/html"]),
    encoding=st.sampled_from(["", "gzip", "deflate"]),
    compress=st.booleans(),
)
def test_fuzz_never_5xx(
    collected: Collected, body: bytes, content_type: str, encoding: str, compress: bool
) -> None:
    headers = {"Content-Encoding": encoding} if encoding else {}
    if encoding == "gzip" and compress:
        body = gzip.compress(body)
    response = post(collected.url, body, content_type=content_type, headers=headers)
    assert response.status in (200, 400, 413, 415)
    if response.status != 200:
        assert status_message(response)
