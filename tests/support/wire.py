"""Test helpers that speak OTLP on the wire: the JSON encoding as the Collector writes it, an
exporter that posts it, and a raw HTTP client for hand-made requests."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                out[key] = base64.b64decode(value).hex()
            else:
                out[key] = _hex_ids(value)
        return out
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON as the specification (and the Collector's file exporter) writes it:
    lowerCamelCase keys, hex trace/span ids, 64-bit integers as strings."""
    return _hex_ids(json_format.MessageToDict(request))


def spans_to_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    return to_otlp_json(encode_spans(spans))


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def post(
    url: str,
    body: bytes,
    *,
    content_type: str | None = "application/x-protobuf",
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    path: str | None = None,
) -> Response:
    """One HTTP request on a fresh connection (the raw bytes as given)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        all_headers = dict(headers or {})
        if content_type is not None:
            all_headers.setdefault("Content-Type", content_type)
        conn.request(method, path or parts.path, body=body, headers=all_headers)
        resp = conn.getresponse()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


class JsonExporter(SpanExporter):
    """Exports spans as OTLP/JSON (optionally gzip) over HTTP, like a Collector's otlphttp
    exporter with ``encoding: json``."""

    def __init__(self, endpoint: str, *, gzip_body: bool = False) -> None:
        self.endpoint = endpoint
        self.gzip_body = gzip_body
        self.statuses: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        body = json.dumps(spans_to_json(spans)).encode()
        headers = {}
        if self.gzip_body:
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        response = post(self.endpoint, body, content_type="application/json", headers=headers)
        self.statuses.append(response.status)
        return SpanExportResult.SUCCESS if response.status == 200 else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        return None
