"""OTLP trace export bodies to span views: protobuf or JSON, compressed or not.

Decoding only (no HTTP, no derivation): ``intentrace collect`` and ``intentrace import`` turn
what arrives into :class:`~tracing.derive._conventions.SpanView` objects here and hand them to
:class:`~tracing.collect._feed.SpanFeed`.

Two kinds of failure:

* the body as a whole cannot be read (not protobuf, not JSON, a gzip stream cut short, the
  wrong shape): :class:`OtlpDecodeError`, a one-line message saying where — the receiver answers
  400 with it;
* one span cannot be used (a trace or span id of the wrong length, an attribute value that is
  not an OTLP value): the span is *rejected* and counted, the others go on — the receiver
  reports it in ``partial_success``.

And one repair: text that is not UTF-8 (a protobuf string value, which makes protobuf refuse
the whole message; bytes in a JSON body) is kept with U+FFFD in place of the bad bytes and
counted (``DecodedBatch.repaired``); its span and the rest of the batch are used.

OTLP/JSON follows the OTLP specification: lowerCamelCase keys (snake_case accepted too), trace
and span ids as hex (base64 accepted too), 64-bit integers as decimal strings or numbers, enum
values as integers (names accepted too).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

import jiter
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracing.derive._conventions import EventView, SpanView

Encoding = Literal["protobuf", "json"]

PROTOBUF_TYPES: Final = frozenset({"application/x-protobuf", "application/protobuf"})
JSON_TYPES: Final = frozenset({"application/json"})
MAX_REASONS: Final = 5
"""How many rejection reasons a batch keeps (the count is always exact)."""

_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16
_STATUS_NAMES: Final = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class OtlpDecodeError(ValueError):
    """The body cannot be read as an OTLP trace export request (message: one line)."""


class BodyTooLargeError(ValueError):
    """The body (or what it decompresses to) is larger than the limit."""


@dataclass(slots=True)
class DecodedBatch:
    """The spans of one export request, and the ones that could not be used."""

    spans: list[SpanView] = field(default_factory=list[SpanView])
    rejected: int = 0
    reasons: list[str] = field(default_factory=list[str])
    """The first few rejection reasons (``MAX_REASONS``), one line each."""
    repaired: int = 0
    """Text that was not UTF-8, kept with U+FFFD in place of the bad bytes (protobuf: string
    values; JSON: byte sequences): their spans are used, not rejected."""

    def reject(self, reason: str) -> None:
        self.rejected += 1
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append(reason)


class _SpanError(ValueError):
    """One span cannot be used (it is rejected; the rest of the batch goes on)."""


# --------------------------------------------------------------------------------------------
# content type and encoding


def media_type(content_type: str | None) -> str:
    """The bare media type of a ``Content-Type`` header (lower case, no parameters)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def body_encoding(content_type: str | None) -> Encoding | None:
    """``protobuf`` or ``json`` for an OTLP ``Content-Type``; None when it is neither."""
    kind = media_type(content_type)
    if kind in PROTOBUF_TYPES:
        return "protobuf"
    if kind in JSON_TYPES:
        return "json"
    return None


def decompress(body: bytes, content_encoding: str | None, *, max_bytes: int) -> bytes:
    """The body with its ``Content-Encoding`` (``gzip``, ``deflate``, none) undone.

    Raises:
        OtlpDecodeError: an unknown encoding or a corrupt stream.
        BodyTooLargeError: the decompressed body would exceed ``max_bytes`` (decompression
            stops there, so a small bomb costs no memory).
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("", "identity"):
        if len(body) > max_bytes:
            raise BodyTooLargeError(f"body of {len(body)} bytes exceeds {max_bytes}")
        return body
    if encoding in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = 32 + zlib.MAX_WBITS  # zlib or gzip header, detected
    else:
        raise OtlpDecodeError(f"unsupported Content-Encoding {encoding!r} (use gzip or none)")
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, max_bytes + 1)
        if len(out) > max_bytes:
            raise BodyTooLargeError(f"body decompresses to more than {max_bytes} bytes")
        if not inflater.eof:
            raise OtlpDecodeError(f"bad {encoding} body: the compressed stream is truncated")
    except zlib.error as exc:
        raise OtlpDecodeError(f"bad {encoding} body: {exc}") from None
    return out


def decode(body: bytes, encoding: Encoding) -> DecodedBatch:
    """Decode one (decompressed) export request body."""
    return decode_protobuf(body) if encoding == "protobuf" else decode_json(body)


# --------------------------------------------------------------------------------------------
# protobuf


_PB_SCALARS: Final = frozenset(
    {"string_value", "int_value", "bool_value", "double_value", "bytes_value"}
)


def _pb_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind in _PB_SCALARS:
        return getattr(value, kind)
    if kind == "array_value":
        return tuple(_pb_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    return None


def _pb_attributes(kvs: Sequence[KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        value = kv.value
        kind = value.WhichOneof("value")
        # (most values are scalars: read inline, without a call per attribute)
        out[kv.key] = getattr(value, kind) if kind in _PB_SCALARS else _pb_value(value)
    return out


def _pb_id(raw: bytes, size: int, what: str, zero: str) -> str:
    if len(raw) != size:
        raise _SpanError(f"{what} has {len(raw)} bytes, expected {size}")
    text = raw.hex()
    if text == zero:
        raise _SpanError(f"{what} is all zeros")
    return text


_LENIENT: list[type[Message]] = []
"""The request's twin in which every ``string`` field is ``bytes`` (made on first need)."""


def _lenient_request_class() -> type[Message]:
    """``ExportTraceServiceRequest`` with every string field declared ``bytes``: the same wire
    format (length-delimited), without protobuf's UTF-8 check. Its own descriptor pool, so the
    names stay those of OTLP and the generated classes are untouched."""
    if _LENIENT:
        return _LENIENT[0]
    pool = descriptor_pool.DescriptorPool()
    done: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in done:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        proto.ClearField("service")
        stack = list(proto.message_type)
        while stack:
            message = stack.pop()
            stack.extend(message.nested_type)
            for fld in message.field:
                if fld.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                    fld.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
        pool.Add(proto)
        done.add(file.name)

    add(ExportTraceServiceRequest.DESCRIPTOR.file)
    name = ExportTraceServiceRequest.DESCRIPTOR.full_name
    _LENIENT.append(message_factory.GetMessageClass(pool.FindMessageTypeByName(name)))
    return _LENIENT[0]


def _repair_strings(message: Message, strict: Descriptor) -> int:
    """Replace what is not UTF-8 in the fields ``strict`` declares ``string`` with U+FFFD, in
    place, in a message of the lenient twin; how many values it changed."""
    repaired = 0
    string = FieldDescriptor.TYPE_STRING
    for fld, value in message.ListFields():
        twin = strict.fields_by_name[fld.name]
        if twin.type == string:
            items = list(cast("Sequence[bytes]", value)) if _repeated(fld) else [value]
            fixed = [_utf8(v) for v in items]
            changed = sum(a != b for a, b in zip(items, fixed, strict=True))
            if changed:
                repaired += changed
                if _repeated(fld):
                    value[:] = fixed
                else:
                    setattr(message, fld.name, fixed[0])
        elif twin.message_type is not None:
            children = value if _repeated(fld) else [value]
            for child in cast("Sequence[Message]", children):
                repaired += _repair_strings(child, twin.message_type)
    return repaired


def _repeated(fld: FieldDescriptor) -> bool:
    return bool(fld.is_repeated)


def _utf8(raw: bytes) -> bytes:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace").encode("utf-8")
    return raw


def _parse_request(body: bytes) -> tuple[ExportTraceServiceRequest, int]:
    """The request, and how many string values were not UTF-8 (repaired with U+FFFD: protobuf
    refuses the whole message for one such value, which would lose every other span)."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
        return request, 0
    except (DecodeError, ValueError, RuntimeError) as exc:
        first = exc
    lenient = _lenient_request_class()()
    try:
        lenient.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError):
        lenient = None  # not a string's fault: report the first error
    if lenient is not None:
        repaired = _repair_strings(lenient, ExportTraceServiceRequest.DESCRIPTOR)
        try:
            request.ParseFromString(lenient.SerializeToString())
            return request, repaired
        except (DecodeError, ValueError, RuntimeError):
            pass
    detail = str(first).strip().splitlines()[0] if str(first).strip() else type(first).__name__
    raise OtlpDecodeError(f"body is not a protobuf ExportTraceServiceRequest: {detail}") from None


def decode_protobuf(body: bytes) -> DecodedBatch:
    """Decode a protobuf ``ExportTraceServiceRequest`` (raises ``OtlpDecodeError``)."""
    request, repaired = _parse_request(body)
    batch = DecodedBatch(repaired=repaired)
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _pb_attributes(resource_spans.resource.attributes)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope_name = scope_spans.scope.name or None
            for i, span in enumerate(scope_spans.spans):
                try:
                    trace_id = _pb_id(span.trace_id, 16, "traceId", _ZERO_TRACE)
                    span_id = _pb_id(span.span_id, 8, "spanId", _ZERO_SPAN)
                    parent = span.parent_span_id
                    parent_id = (
                        _pb_id(parent, 8, "parentSpanId", _ZERO_SPAN)
                        if parent and parent != b"\x00" * 8
                        else None
                    )
                except _SpanError as exc:
                    batch.reject(f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]: {exc}")
                    continue
                status = span.status
                batch.spans.append(
                    SpanView(
                        name=span.name,
                        attributes=_pb_attributes(span.attributes),
                        events=tuple(
                            EventView(e.name, _pb_attributes(e.attributes), e.time_unix_nano)
                            for e in span.events
                        ),
                        status_code=int(status.code),
                        status_message=status.message or None,
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=parent_id,
                        start_ns=span.start_time_unix_nano or None,
                        end_ns=span.end_time_unix_nano or None,
                        resource=resource,
                        scope_name=scope_name,
                    )
                )
    return batch


# --------------------------------------------------------------------------------------------
# JSON


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _as_list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{where}: expected a list, got {_kind(value)}")
    return cast("list[Any]", value)


def _as_object(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OtlpDecodeError(f"{where}: expected an object, got {_kind(value)}")
    return cast("dict[str, Any]", value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _json_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise _SpanError(f"{what}: expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise _SpanError(f"{what}: expected an integer, got {_kind(value)}")


def _json_time(value: Any, what: str) -> int | None:
    if value is None:
        return None
    return _json_int(value, what) or None


def _json_id(value: Any, size: int, what: str, zero: str, *, optional: bool = False) -> str | None:
    if value is None or value == "":
        if optional:
            return None
        raise _SpanError(f"{what} is missing")
    if not isinstance(value, str):
        raise _SpanError(f"{what}: expected a hex string, got {_kind(value)}")
    text = value.lower()
    if len(text) == size * 2:
        try:
            bytes.fromhex(text)
        except ValueError:
            raise _SpanError(f"{what} is not hex") from None
    else:
        try:  # protobuf's generic JSON mapping writes bytes as base64
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != size:
            raise _SpanError(f"{what}: expected {size * 2} hex characters, got {len(value)}")
        text = raw.hex()
    if text == zero:
        if optional:
            return None
        raise _SpanError(f"{what} is all zeros")
    return text


_VALUE_KEYS: Final = {
    "stringValue": "string",
    "string_value": "string",
    "intValue": "int",
    "int_value": "int",
    "boolValue": "bool",
    "bool_value": "bool",
    "doubleValue": "double",
    "double_value": "double",
    "arrayValue": "array",
    "array_value": "array",
    "kvlistValue": "kvlist",
    "kvlist_value": "kvlist",
    "bytesValue": "bytes",
    "bytes_value": "bytes",
}


def _json_value(value: Any, what: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _SpanError(f"{what}: expected an AnyValue object, got {_kind(value)}")
    for key, raw in cast("dict[str, Any]", value).items():
        kind = _VALUE_KEYS.get(key)
        if kind is not None:
            return _json_scalar(kind, raw, f"{what}.{key}")
    return None  # empty, or an unknown kind of value: ignored, as OTLP/JSON receivers must


def _json_scalar(kind: str, raw: Any, what: str) -> Any:
    if kind == "string":
        if not isinstance(raw, str):
            raise _SpanError(f"{what}: expected a string, got {_kind(raw)}")
        return raw
    if kind == "int":
        return _json_int(raw, what)
    if kind == "bool":
        if not isinstance(raw, bool):
            raise _SpanError(f"{what}: expected a boolean, got {_kind(raw)}")
        return raw
    if kind == "double":
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw.replace("Infinity", "inf"))  # "NaN", "Infinity", "-Infinity"
            except ValueError:
                pass
        raise _SpanError(f"{what}: expected a number, got {_kind(raw)}")
    if kind == "array":
        items = _span_list(_span_object(raw, what).get("values"), f"{what}.values")
        return tuple(_json_value(v, f"{what}.values[{n}]") for n, v in enumerate(items))
    if kind == "kvlist":
        return _json_attributes(_span_object(raw, what).get("values"), f"{what}.values")
    if not isinstance(raw, str):  # bytes
        raise _SpanError(f"{what}: expected base64 text, got {_kind(raw)}")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise _SpanError(f"{what} is not base64") from None


def _span_list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _SpanError(f"{where}: expected a list, got {_kind(value)}")
    return cast("list[Any]", value)


def _span_object(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _SpanError(f"{where}: expected an object, got {_kind(value)}")
    return cast("dict[str, Any]", value)


def _json_attributes(value: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n, item in enumerate(_span_list(value, where)):
        kv = _span_object(item, f"{where}[{n}]")
        key = kv.get("key")
        if not isinstance(key, str):
            raise _SpanError(f"{where}[{n}].key: expected a string, got {_kind(key)}")
        out[key] = _json_value(kv.get("value"), f"{where}[{n}].value")
    return out


def _json_status(value: Any, where: str) -> tuple[int, str | None]:
    status = _span_object(value, where)
    code_raw = status.get("code")
    if code_raw is None:
        code = 0
    elif isinstance(code_raw, str) and code_raw in _STATUS_NAMES:
        code = _STATUS_NAMES[code_raw]
    else:
        code = _json_int(code_raw, f"{where}.code")
    message = status.get("message")
    if message is not None and not isinstance(message, str):
        raise _SpanError(f"{where}.message: expected a string, got {_kind(message)}")
    return code, message or None


def _json_span(
    raw: Any, where: str, resource: Mapping[str, Any], scope_name: str | None
) -> SpanView:
    span = _span_object(raw, where)
    name = span.get("name", "")  # (absent: empty, which OTLP/JSON encoders leave out)
    if not isinstance(name, str):
        raise _SpanError(f"{where}.name: expected a string, got {_kind(name)}")
    events: list[EventView] = []
    for n, item in enumerate(_span_list(span.get("events"), f"{where}.events")):
        event = _span_object(item, f"{where}.events[{n}]")
        event_name = event.get("name")
        events.append(
            EventView(
                event_name if isinstance(event_name, str) else "",
                _json_attributes(event.get("attributes"), f"{where}.events[{n}].attributes"),
                _json_time(_get(event, "timeUnixNano", "time_unix_nano"), f"{where}.events[{n}]")
                or 0,
            )
        )
    code, message = _json_status(span.get("status"), f"{where}.status")
    return SpanView(
        name=name,
        attributes=_json_attributes(span.get("attributes"), f"{where}.attributes"),
        events=tuple(events),
        status_code=code,
        status_message=message,
        trace_id=_json_id(_get(span, "traceId", "trace_id"), 16, "traceId", _ZERO_TRACE),
        span_id=_json_id(_get(span, "spanId", "span_id"), 8, "spanId", _ZERO_SPAN),
        parent_span_id=_json_id(
            _get(span, "parentSpanId", "parent_span_id"),
            8,
            "parentSpanId",
            _ZERO_SPAN,
            optional=True,
        ),
        start_ns=_json_time(
            _get(span, "startTimeUnixNano", "start_time_unix_nano"), f"{where}.startTimeUnixNano"
        ),
        end_ns=_json_time(
            _get(span, "endTimeUnixNano", "end_time_unix_nano"), f"{where}.endTimeUnixNano"
        ),
        resource=resource,
        scope_name=scope_name,
    )


class _Redo(Exception):
    """The fast reading of a span met something unusual: read it again the careful way."""


def _fast_attributes(value: Any) -> dict[str, Any]:
    """``_json_attributes`` for the usual shape, without building a location per value (the
    careful reading, run again on ``_Redo`` or ``_SpanError``, says where a problem is)."""
    if value is None:
        return {}
    if value.__class__ is not list:
        raise _Redo
    out: dict[str, Any] = {}
    keys = _VALUE_KEYS
    for kv in cast("list[Any]", value):
        if kv.__class__ is not dict:
            raise _Redo
        key = kv.get("key")
        if key.__class__ is not str:
            raise _Redo
        v = kv.get("value")
        if v is None:
            out[key] = None
            continue
        if v.__class__ is not dict:
            raise _Redo
        kind = raw = None
        for name, item in cast("dict[str, Any]", v).items():
            kind = keys.get(name)
            if kind is not None:
                raw = item
                break
        if kind == "string" and raw.__class__ is str:
            out[key] = raw
        elif kind is None:
            out[key] = None  # empty, or an unknown kind of value: ignored
        elif kind == "bool" and raw.__class__ is bool:
            out[key] = raw
        else:
            out[key] = _json_scalar(kind, raw, "")
    return out


def _fast_span(span: Any, resource: Mapping[str, Any], scope_name: str | None) -> SpanView:
    """``_json_span`` for the usual shape (raises ``_Redo``/``_SpanError``: read it again the
    careful way, which gives the same span or says exactly what is wrong)."""
    if span.__class__ is not dict:
        raise _Redo
    name = span.get("name", "")
    if name.__class__ is not str:
        raise _Redo
    events: tuple[EventView, ...] = ()
    raw_events = span.get("events")
    if raw_events is not None:
        if raw_events.__class__ is not list:
            raise _Redo
        made: list[EventView] = []
        for event in cast("list[Any]", raw_events):
            if event.__class__ is not dict:
                raise _Redo
            event_name = event.get("name")
            made.append(
                EventView(
                    event_name if isinstance(event_name, str) else "",
                    _fast_attributes(event.get("attributes")),
                    _json_time(_get(event, "timeUnixNano", "time_unix_nano"), "") or 0,
                )
            )
        events = tuple(made)
    status = span.get("status")
    if status is None:
        code, message = 0, None
    else:
        code, message = _json_status(status, "")
    return SpanView(
        name=name,
        attributes=_fast_attributes(span.get("attributes")),
        events=events,
        status_code=code,
        status_message=message,
        trace_id=_json_id(_get(span, "traceId", "trace_id"), 16, "traceId", _ZERO_TRACE),
        span_id=_json_id(_get(span, "spanId", "span_id"), 8, "spanId", _ZERO_SPAN),
        parent_span_id=_json_id(
            _get(span, "parentSpanId", "parent_span_id"),
            8,
            "parentSpanId",
            _ZERO_SPAN,
            optional=True,
        ),
        start_ns=_json_time(_get(span, "startTimeUnixNano", "start_time_unix_nano"), ""),
        end_ns=_json_time(_get(span, "endTimeUnixNano", "end_time_unix_nano"), ""),
        resource=resource,
        scope_name=scope_name,
    )


def decode_json(body: bytes | str) -> DecodedBatch:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest`` (raises ``OtlpDecodeError``)."""
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    repaired = 0
    try:
        parsed = jiter.from_json(data)
    except ValueError as exc:
        if "surrogate" not in str(exc) and "unicode" not in str(exc):
            raise OtlpDecodeError(f"body is not JSON: {exc}") from None
        # A JSON escape of half a surrogate pair (valid JSON, which jiter refuses), or bytes
        # that are not UTF-8: the standard library reads the text (surrogates kept, the
        # writers coerce them; bytes that are not UTF-8 replaced with U+FFFD and counted).
        try:
            text = data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            text = data.decode("utf-8", "replace")
            repaired = text.count("\ufffd") - data.count("\ufffd".encode())
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError) as again:
            raise OtlpDecodeError(f"body is not JSON: {again}") from None
    root = _as_object(parsed, "body") if parsed is not None else None
    if root is None:
        raise OtlpDecodeError("body: expected an object with resourceSpans, got null")
    batch = DecodedBatch(repaired=repaired)
    for r, rs_raw in enumerate(
        _as_list(_get(root, "resourceSpans", "resource_spans"), "resourceSpans")
    ):
        where_r = f"resourceSpans[{r}]"
        rs = _as_object(rs_raw, where_r)
        resource_obj = _as_object(rs.get("resource"), f"{where_r}.resource")
        try:
            resource = _json_attributes(
                resource_obj.get("attributes"), f"{where_r}.resource.attributes"
            )
        except _SpanError as exc:
            raise OtlpDecodeError(str(exc)) from None
        scopes = _get(rs, "scopeSpans", "scope_spans")
        if scopes is None:  # before OTLP 0.19
            scopes = _get(rs, "instrumentationLibrarySpans", "instrumentation_library_spans")
        for s, ss_raw in enumerate(_as_list(scopes, f"{where_r}.scopeSpans")):
            where_s = f"{where_r}.scopeSpans[{s}]"
            ss = _as_object(ss_raw, where_s)
            scope = _as_object(
                ss.get("scope") or _get(ss, "instrumentationLibrary", "instrumentation_library"),
                f"{where_s}.scope",
            )
            scope_name = scope.get("name")
            scope_text = scope_name if isinstance(scope_name, str) and scope_name else None
            for i, span_raw in enumerate(_as_list(ss.get("spans"), f"{where_s}.spans")):
                try:
                    batch.spans.append(_fast_span(span_raw, resource, scope_text))
                    continue
                except (_Redo, _SpanError, RecursionError):
                    pass  # (the careful reading below says what is wrong, and where)
                where = f"{where_s}.spans[{i}]"
                try:
                    batch.spans.append(_json_span(span_raw, where, resource, scope_text))
                except _SpanError as exc:
                    text = str(exc)
                    batch.reject(text if text.startswith(where) else f"{where}: {text}")
                except RecursionError:
                    batch.reject(f"{where}: nested too deeply")
    return batch
