"""Decoding OTLP bodies into span views: the views equal the ones the in-process processor
builds from the same SDK spans (protobuf and JSON), odd-but-valid encodings are accepted, bad
spans are rejected one by one, and nothing but ``OtlpDecodeError`` ever escapes."""

from __future__ import annotations

import base64
import gzip
import json
import math
import zlib
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from tests.support.wire import spans_to_json, to_otlp_json
from tracing.collect._otlp import (
    BodyTooLargeError,
    OtlpDecodeError,
    _fast_span,
    _json_span,
    _Redo,
    _SpanError,
    body_encoding,
    decode_json,
    decode_protobuf,
    decompress,
)
from tracing.derive._conventions import SpanView
from tracing.otel._processor import span_view


def sdk_spans(attributes: dict[str, Any] | None = None) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc", "n": 3}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("scope-x", "1.0")
    with (
        tracer.start_as_current_span("parent", attributes={"a": "b"}),
        tracer.start_as_current_span("child", attributes=attributes or {}) as child,
    ):
        child.add_event("exception", {"exception.type": "ValueError", "exception.message": "x"})
        child.set_status(Status(StatusCode.ERROR, "it broke"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def comparable(view: SpanView) -> dict[str, Any]:
    return {
        "name": view.name,
        "attributes": dict(view.attributes),
        "events": [(e.name, dict(e.attributes), e.time_ns) for e in view.events],
        "status": (view.status_code, view.status_message),
        "ids": (view.trace_id, view.span_id, view.parent_span_id),
        "times": (view.start_ns, view.end_ns),
        "resource": {k: v for k, v in view.resource.items() if k != "service.instance.id"},
        "scope": view.scope_name,
    }


RICH_ATTRIBUTES: dict[str, Any] = {
    "s": "héllo 日本 🎉",
    "i": 2**62,
    "neg": -(2**63),
    "f": 1.5,
    "inf": math.inf,
    "b": True,
    "strs": ("a", "b"),
    "ints": (1, 2, 3),
    "floats": (0.5,),
    "bools": (True, False),
    "gen_ai.tool.call.arguments": '{"intent": "Reading", "path": "a"}',
}


def test_protobuf_views_equal_the_processors_views() -> None:
    spans = sdk_spans(RICH_ATTRIBUTES)
    batch = decode_protobuf(encode_spans(spans).SerializeToString())
    assert batch.rejected == 0
    assert [comparable(v) for v in batch.spans] == [comparable(span_view(s)) for s in spans]


def test_json_views_equal_the_processors_views() -> None:
    spans = sdk_spans(RICH_ATTRIBUTES)
    batch = decode_json(json.dumps(spans_to_json(spans)).encode())
    assert batch.rejected == 0
    assert [comparable(v) for v in batch.spans] == [comparable(span_view(s)) for s in spans]


def test_json_snake_case_and_base64_ids_are_accepted() -> None:
    spans = sdk_spans({"k": "v"})
    request = encode_spans(spans)
    generic = json_format.MessageToJson(request, preserving_proto_field_name=True)
    assert '"resource_spans"' in generic  # protobuf's generic mapping: snake_case, base64 ids
    batch = decode_json(generic)
    assert [comparable(v) for v in batch.spans] == [comparable(span_view(s)) for s in spans]


def test_json_value_forms() -> None:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "parentSpanId": "",
        "name": "x",
        "startTimeUnixNano": 1700000000000000000,
        "endTimeUnixNano": "1700000000000000001",
        "status": {"code": "STATUS_CODE_ERROR", "message": "m"},
        "attributes": [
            {"key": "int_as_number", "value": {"intValue": 5}},
            {"key": "int_as_string", "value": {"intValue": "-7"}},
            {"key": "inf", "value": {"doubleValue": "Infinity"}},
            {"key": "bytes", "value": {"bytesValue": base64.b64encode(b"\x00\x01").decode()}},
            {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "a", "value": {}}]}}},
            {"key": "unknown_kind", "value": {"futureValue": 1}},
            {"key": "empty", "value": {}},
        ],
    }
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    (view,) = decode_json(json.dumps(body)).spans
    assert view.attributes == {
        "int_as_number": 5,
        "int_as_string": -7,
        "inf": math.inf,
        "bytes": b"\x00\x01",
        "kv": {"a": None},
        "unknown_kind": None,
        "empty": None,
    }
    assert view.parent_span_id is None
    assert (view.status_code, view.status_message) == (2, "m")
    assert (view.start_ns, view.end_ns) == (1700000000000000000, 1700000000000000001)


def test_bad_spans_are_rejected_one_by_one() -> None:
    body = to_otlp_json(encode_spans(sdk_spans()))
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["traceId"] = "0" * 32
    bad_attr = {"key": "k", "value": {"intValue": "twelve"}}
    spans.append({**spans[1], "attributes": [bad_attr]})
    batch = decode_json(json.dumps(body))
    assert len(batch.spans) == 1
    assert batch.rejected == 2
    assert "spans[0]: traceId is all zeros" in batch.reasons[0]
    assert "spans[2].attributes[0].value.intValue: expected an integer" in batch.reasons[1]

    request = encode_spans(sdk_spans())
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b"\x01\x02\x03"
    pb = decode_protobuf(request.SerializeToString())
    assert (len(pb.spans), pb.rejected) == (1, 1)
    assert "spanId has 3 bytes, expected 8" in pb.reasons[0]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "not JSON"),
        (b"null", "got null"),
        (b"[]", "body: expected an object"),
        (b'{"resourceSpans": {}}', "resourceSpans: expected a list"),
        (b'{"resourceSpans": [1]}', "resourceSpans[0]: expected an object"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": 1}]}]}', "spans: expected a list"),
        (b"\xff\xfe", "not JSON"),
        (b"[" * 100_000, "not JSON"),
    ],
)
def test_json_structure_errors(body: bytes, message: str) -> None:
    with pytest.raises(OtlpDecodeError) as info:
        decode_json(body)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_empty_bodies_are_empty_requests() -> None:
    assert decode_protobuf(b"").spans == []
    assert decode_json(b"{}").spans == []


def test_decompress() -> None:
    data = b"x" * 10_000
    assert decompress(gzip.compress(data), "gzip", max_bytes=20_000) == data
    assert decompress(zlib.compress(data), "deflate", max_bytes=20_000) == data
    assert decompress(data, None, max_bytes=20_000) == data
    assert decompress(data, "identity", max_bytes=20_000) == data
    with pytest.raises(BodyTooLargeError):
        decompress(gzip.compress(data), "gzip", max_bytes=9_999)
    with pytest.raises(BodyTooLargeError):
        decompress(data, "", max_bytes=9_999)
    with pytest.raises(OtlpDecodeError, match="truncated"):
        decompress(gzip.compress(data)[:-12], "gzip", max_bytes=20_000)
    with pytest.raises(OtlpDecodeError, match="bad gzip body"):
        decompress(b"plain", "gzip", max_bytes=20_000)
    with pytest.raises(OtlpDecodeError, match="unsupported Content-Encoding 'zstd'"):
        decompress(data, "zstd", max_bytes=20_000)


def test_body_encoding() -> None:
    assert body_encoding("application/x-protobuf") == "protobuf"
    assert body_encoding("Application/Protobuf; charset=binary") == "protobuf"
    assert body_encoding("application/json; charset=utf-8") == "json"
    assert body_encoding("text/plain") is None
    assert body_encoding(None) is None


# ---------------------------------------------------------------------------------- properties

attribute_values = st.one_of(
    st.text(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.lists(st.text(max_size=5), max_size=3).map(tuple),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3).map(tuple),
)


@given(st.dictionaries(st.text(min_size=1, max_size=10), attribute_values, max_size=6))
def test_round_trip_any_attributes(attributes: dict[str, Any]) -> None:
    spans = sdk_spans(attributes)
    expected = [comparable(span_view(s)) for s in spans]
    pb = decode_protobuf(encode_spans(spans).SerializeToString())
    js = decode_json(json.dumps(spans_to_json(spans)))
    assert [comparable(v) for v in pb.spans] == expected
    assert [comparable(v) for v in js.spans] == expected


def _not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@given(
    prefix=st.text(max_size=8),
    suffix=st.text(max_size=8),
    bad=st.lists(st.integers(0x80, 0xFF), min_size=4, max_size=4).map(bytes).filter(_not_utf8),
    others=st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=8), max_size=4),
)
def test_text_that_is_not_utf8_is_repaired_and_the_rest_kept(
    prefix: str, suffix: str, bad: bytes, others: dict[str, str]
) -> None:
    """Bytes that are not UTF-8 put into one attribute value of a real body (protobuf and
    JSON): every span is still decoded, that value reads as its bytes decoded with U+FFFD,
    everything else is as it was."""
    marker = "\x01QZ\x02"  # (4 bytes in either encoding, found nowhere else)
    attributes = {**others, "bad": prefix + marker + suffix}
    spans = sdk_spans(attributes)
    expected = [comparable(span_view(s)) for s in spans]
    repaired = prefix + bad.decode("utf-8", "replace") + suffix
    for view in expected:
        if "bad" in view["attributes"]:
            view["attributes"]["bad"] = repaired
    bodies = (
        (decode_protobuf, encode_spans(spans).SerializeToString(), b"\x01QZ\x02"),
        (decode_json, json.dumps(spans_to_json(spans)).encode(), b"\\u0001QZ\\u0002"),
    )
    for decode, body, raw_marker in bodies:
        clean = body.replace(raw_marker, marker.encode()) if decode is decode_json else body
        assert clean.count(marker.encode()) == 1
        batch = decode(clean.replace(marker.encode(), bad))
        assert [comparable(v) for v in batch.spans] == expected
        assert batch.rejected == 0 and batch.repaired >= 1


@given(st.binary(max_size=500))
def test_any_bytes_decode_or_fail_cleanly(body: bytes) -> None:
    for decode in (decode_protobuf, decode_json):
        try:
            batch = decode(body)
        except OtlpDecodeError as exc:
            assert str(exc) and "\n" not in str(exc)
        else:
            assert batch.rejected >= 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "traceId",
                    "spanId",
                    "name",
                    "attributes",
                    "key",
                    "value",
                    "stringValue",
                    "arrayValue",
                    "values",
                    "events",
                    "status",
                    "code",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_json_decodes_or_fails_cleanly(value: Any) -> None:
    try:
        decode_json(json.dumps(value))
    except OtlpDecodeError as exc:
        assert str(exc) and "\n" not in str(exc)


_junk = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
_good_values = st.one_of(
    st.builds(lambda v: {"stringValue": v}, st.text(max_size=4)),
    st.builds(lambda v: {"intValue": v}, st.integers().map(str) | st.integers()),
    st.builds(lambda v: {"boolValue": v}, st.booleans()),
    st.builds(lambda v: {"doubleValue": v}, st.floats(allow_nan=False) | st.just("-Infinity")),
    st.just({"bytesValue": "AAE="}),
    st.just({"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "1"}]}}),
    st.just({"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}}),
    st.just({}),
    st.just({"other": 1, "string_value": "x"}),
)
_odd_values = st.dictionaries(
    st.sampled_from(["stringValue", "intValue", "boolValue", "doubleValue", "bytesValue",
                     "arrayValue", "kvlistValue", "int_value", "other"]),
    _junk,
    max_size=2,
)  # fmt: skip
_key_values = st.lists(
    st.fixed_dictionaries({"key": st.text(max_size=3), "value": _good_values}), max_size=4
)
_good_spans = st.fixed_dictionaries(
    {"traceId": st.sampled_from(["ab" * 16, "AB" * 16]),
     "spanId": st.sampled_from(["ab" * 8, "AAAAAAAAAAE="])},
    optional={
        "name": st.text(max_size=4),
        "parentSpanId": st.sampled_from(["cd" * 8, "", "0" * 16]),
        "startTimeUnixNano": st.just("17") | st.integers(0, 2**64),
        "endTimeUnixNano": st.just("18") | st.just(1.0),
        "status": st.fixed_dictionaries(
            {}, optional={"code": st.sampled_from(["STATUS_CODE_ERROR", 2, "1"]),
                          "message": st.text(max_size=3)},
        ),
        "attributes": _key_values,
        "events": st.lists(
            st.fixed_dictionaries(
                {}, optional={"name": st.text(max_size=3), "attributes": _key_values,
                              "timeUnixNano": st.just("5")},
            ),
            max_size=2,
        ),
    },
)  # fmt: skip
_SPAN_FIELDS = ("traceId", "spanId", "parentSpanId", "name", "startTimeUnixNano",
                "endTimeUnixNano", "status", "attributes", "events")  # fmt: skip


@st.composite
def _span_objects(draw: st.DrawFn) -> Any:
    """A well-formed OTLP/JSON span, then at most two odd parts (a field, or a value)."""
    span: dict[str, Any] = draw(_good_spans)
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.sampled_from([*_SPAN_FIELDS, "value", "event", "key"]))
        odd = draw(_junk | _odd_values | st.lists(_junk, max_size=2))
        attributes = span.get("attributes")
        attributes = attributes if isinstance(attributes, list) else None
        events = span.get("events")
        events = events if isinstance(events, list) else None
        if where == "value" and attributes:
            attributes[draw(st.integers(0, len(attributes) - 1))]["value"] = odd
        elif where == "key" and attributes:
            attributes[draw(st.integers(0, len(attributes) - 1))]["key"] = odd
        elif where == "event" and events:
            events[draw(st.integers(0, len(events) - 1))] = odd
        elif where in _SPAN_FIELDS:
            span[where] = odd
    return span


@settings(max_examples=400)
@given(_span_objects())
def test_json_fast_reading_equals_the_careful_one(span: Any) -> None:
    """The usual shape is read without building an error location per value; whatever it
    reads (it hands anything unusual to the careful reading), the careful reading reads the
    same, and what it refuses the careful reading refuses with the location."""
    resource = {"service.name": "svc"}
    try:
        careful: Any = comparable(_json_span(span, "s", resource, "scope"))
    except _SpanError as exc:
        careful = exc
    try:
        fast = comparable(_fast_span(span, resource, "scope"))
    except (_Redo, _SpanError):
        return  # (read again the careful way)
    assert fast == careful
    try:
        body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, allow_nan=False)
    except ValueError:
        return  # (an infinite float: not JSON)
    batch = decode_json(body)
    assert [comparable(v) for v in batch.spans] == [{**fast, "resource": {}, "scope": None}]
