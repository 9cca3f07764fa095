"""A small loopback OTLP/HTTP trace receiver for tests: real HTTP, real protobuf decoding.

Exporters under test (``OTLPSpanExporter``, the Langfuse SDK's exporter) post real
``ExportTraceServiceRequest`` bytes to it; the receiver decodes them with the
``opentelemetry-proto`` definitions and keeps every span as plain data (``WireSpan``).

Usage::

    with OtlpReceiver() as rx:
        exporter = OTLPSpanExporter(endpoint=rx.traces_url)
        ...
        spans = rx.wait_for_spans(3)
        assert spans[0].name == "Searching for OAuth handling"

Any request path is accepted (the Langfuse SDK posts to ``/api/public/otel/v1/traces``); the path
and headers of each request are kept (``rx.requests``). ``Content-Encoding: gzip`` and
``deflate`` bodies are decompressed. JSON-encoded OTLP (``application/json``) is decoded too.

This module is shared by several test files: keep its public names stable
(``OtlpReceiver``, ``WireSpan``, ``WireEvent``, ``ReceivedRequest``, ``any_value``).
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["OtlpReceiver", "ReceivedRequest", "WireEvent", "WireSpan", "any_value"]


def any_value(value: AnyValue) -> Any:
    """Decode one OTLP ``AnyValue`` into plain Python (str, bool, int, float, bytes, list, dict)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def _attributes(kvs: Iterator[KeyValue] | Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


@dataclass(frozen=True)
class WireEvent:
    name: str
    time_unix_nano: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class WireSpan:
    """One span as it arrived on the wire."""

    name: str
    trace_id: str
    """32 lower-case hex characters."""
    span_id: str
    """16 lower-case hex characters."""
    parent_span_id: str | None
    kind: int
    """``opentelemetry.proto.trace.v1.Span.SpanKind`` value (1 = INTERNAL)."""
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: dict[str, Any]
    events: tuple[WireEvent, ...]
    status_code: int
    """0 = UNSET, 1 = OK, 2 = ERROR."""
    status_message: str
    resource: dict[str, Any]
    scope_name: str
    scope_version: str
    path: str
    """The HTTP path the request that carried this span was posted to."""


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: bytes
    """The decompressed request body."""
    spans: tuple[WireSpan, ...]


def decode_request(body: bytes, *, path: str = "", content_type: str = "") -> list[WireSpan]:
    """Decode one OTLP/HTTP trace export body (protobuf, or JSON when ``content_type`` says so)."""
    request = ExportTraceServiceRequest()
    if "json" in content_type:
        json_format.Parse(body.decode("utf-8"), request)
    else:
        request.ParseFromString(body)
    out: list[WireSpan] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    WireSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex() or None,
                        kind=int(span.kind),
                        start_time_unix_nano=span.start_time_unix_nano,
                        end_time_unix_nano=span.end_time_unix_nano,
                        attributes=_attributes(span.attributes),
                        events=tuple(
                            WireEvent(e.name, e.time_unix_nano, _attributes(e.attributes))
                            for e in span.events
                        ),
                        status_code=int(span.status.code),
                        status_message=span.status.message,
                        resource=resource,
                        scope_name=scope_spans.scope.name,
                        scope_version=scope_spans.scope.version,
                        path=path,
                    )
                )
    return out


@dataclass
class _State:
    lock: threading.Condition = field(default_factory=threading.Condition)
    requests: list[ReceivedRequest] = field(default_factory=list[ReceivedRequest])
    errors: list[str] = field(default_factory=list[str])
    status: int = 200


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            spans = decode_request(
                body, path=self.path, content_type=self.headers.get("Content-Type") or ""
            )
        except Exception as exc:  # a malformed body is a test failure: keep it visible
            with state.lock:
                state.errors.append(f"{self.path}: {type(exc).__name__}: {exc}")
                state.lock.notify_all()
            self.send_response(400)
            self.end_headers()
            return
        with state.lock:
            state.requests.append(
                ReceivedRequest(
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    spans=tuple(spans),
                )
            )
            state.lock.notify_all()
            status = state.status
        payload = ExportTraceServiceResponse().SerializeToString()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output quiet


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], state: _State) -> None:
        super().__init__(address, _Handler)
        self.state = state


class OtlpReceiver:
    """Loopback OTLP/HTTP receiver (binds 127.0.0.1 on a free port). A context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._state = _State()
        self._server = _Server((host, port), self._state)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-receiver", daemon=True
        )
        self._started = False

    # lifecycle -----------------------------------------------------------------------------
    def start(self) -> OtlpReceiver:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._server.shutdown()
            self._started = False
        self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # addresses -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:43121`` (use as Langfuse ``base_url``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def traces_url(self) -> str:
        """The standard OTLP/HTTP traces endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)."""
        return f"{self.url}/v1/traces"

    # what arrived ----------------------------------------------------------------------------
    def set_status(self, status: int) -> None:
        """HTTP status returned from now on (e.g. 503 to test retries/drops)."""
        with self._state.lock:
            self._state.status = status

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def errors(self) -> list[str]:
        """Bodies that could not be decoded (should stay empty)."""
        with self._state.lock:
            return list(self._state.errors)

    def spans(self, path: str | None = None) -> list[WireSpan]:
        """All spans received so far (optionally only those posted to ``path``), arrival order."""
        with self._state.lock:
            return [
                s for r in self._state.requests if path is None or r.path == path for s in r.spans
            ]

    def wait_for_spans(
        self, count: int, *, timeout: float = 10.0, path: str | None = None
    ) -> list[WireSpan]:
        """Block until at least ``count`` spans arrived; raise AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._state.lock:
            while True:
                got = [
                    s
                    for r in self._state.requests
                    if path is None or r.path == path
                    for s in r.spans
                ]
                if len(got) >= count or self._state.errors:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._state.lock.wait(remaining)
            errors = list(self._state.errors)
        if errors:
            raise AssertionError(f"undecodable OTLP bodies: {errors}")
        if len(got) < count:
            raise AssertionError(
                f"expected {count} spans, received {len(got)}: {[s.name for s in got]}"
            )
        return got

    def clear(self) -> None:
        with self._state.lock:
            self._state.requests.clear()
            self._state.errors.clear()

    def by_name(self) -> Mapping[str, WireSpan]:
        """Spans keyed by name (last one wins) — handy when names are unique in a test."""
        return {s.name: s for s in self.spans()}
