"""The OTLP/HTTP trace receiver behind ``intentrace collect``.

``POST /v1/traces`` with an ``ExportTraceServiceRequest`` — protobuf
(``application/x-protobuf``) or JSON (``application/json``), plain, gzip or deflate — is decoded
(:mod:`tracing.collect._otlp`) and fed to a :class:`~tracing.collect.SpanFeed`, which writes
the anchors.
Responses follow the OTLP/HTTP specification, in the encoding of the request:

==========  ====================================================================================
200         ``ExportTraceServiceResponse``; ``partial_success`` counts the spans not used
400         malformed body (not protobuf/JSON, bad gzip, wrong shape): a ``google.rpc.Status``
            whose message says what is wrong (not retryable)
401         a token is required and the request's ``Authorization: Bearer`` does not match
404 / 405   another path / another method
411         no ``Content-Length``
413         the body, or what it decompresses to, is larger than ``max_body_bytes``
415         a content type other than protobuf/JSON, or an encoding other than gzip/deflate
503         the ledger's write queue is backing up, or its database refuses writes for a reason
            retrying cannot fix (``Retry-After``: the exporter retries)
==========  ====================================================================================

The server is the standard library's ``ThreadingHTTPServer`` (HTTP/1.1, keep-alive): decoding
and deriving anchors cost far more than the HTTP layer (``bench/collect.py`` measures both).
It binds 127.0.0.1 unless told otherwise; nothing a client sends can stop it.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, cast

from google.protobuf import json_format
from google.rpc import status_pb2  # pyright: ignore[reportMissingTypeStubs]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracing.collect._feed import SpanFeed
from tracing.collect._otlp import (
    BodyTooLargeError,
    Encoding,
    OtlpDecodeError,
    body_encoding,
    decode,
    decompress,
)
from tracing.diagnostics import ErrorLog

logger = logging.getLogger("tracing.receiver")

TRACES_PATH: Final = "/v1/traces"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4318
DEFAULT_MAX_BODY_BYTES: Final = 32 * 1024 * 1024
DEFAULT_BUSY_QUEUE_DEPTH: Final = 50_000

_RPC_INVALID_ARGUMENT: Final = 3
_RPC_UNAUTHENTICATED: Final = 16
_RPC_RESOURCE_EXHAUSTED: Final = 8
_RPC_UNAVAILABLE: Final = 14
_RPC_INTERNAL: Final = 13
_RPC_NOT_FOUND: Final = 5
_RPC_UNIMPLEMENTED: Final = 12


@dataclass(frozen=True)
class CollectOptions:
    """How the receiver listens and what it accepts."""

    host: str = DEFAULT_HOST
    """Interface to bind; loopback by default."""
    port: int = DEFAULT_PORT
    """TCP port (4318 is OTLP/HTTP's); 0 picks a free one."""
    token: str | None = None
    """When set, requests must carry ``Authorization: Bearer <token>``."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest body accepted, on the wire and after decompression (else 413)."""
    busy_queue_depth: int | None = DEFAULT_BUSY_QUEUE_DEPTH
    """Answer 503 (retry later) while the ledger has this many writes queued; None: never."""
    timeout_s: float = 30.0
    """Whole-request deadline: a connection whose request (from the first byte the receiver
    waits for, keep-alive idle time included) is not read and answered within this long is
    cut, however slowly it trickles bytes (slowloris)."""
    backlog: int = 1024
    """Connections the kernel queues before ``accept`` (the standard library's is 5)."""
    max_connections: int = 1024
    """Connections served at once (one thread each); more are closed at once (counted)."""
    max_concurrent: int = 8
    """Requests decoded and written at once (the rest wait their turn within ``timeout_s``)."""
    max_memory_bytes: int = 256 * 1024 * 1024
    """Budget for the bodies held at once, read and inflated: a request reserves its
    ``Content-Length`` (and, compressed, ``max_body_bytes`` for inflation) before its body is
    read; one that cannot within a second is answered 503 with ``Retry-After`` (its body read
    and discarded, never held)."""


class _Reply(Exception):
    """Stop handling a request and answer with this status and message."""

    def __init__(self, status: int, rpc_code: int, message: str, **headers: str) -> None:
        super().__init__(message)
        self.status = status
        self.rpc_code = rpc_code
        self.message = message
        self.headers = headers


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: with Nagle's algorithm on, the body would wait
    # for the client's delayed ACK (~40 ms per request)
    disable_nagle_algorithm = True
    server_version = "intentrace-collect"
    sys_version = ""

    @property
    def receiver(self) -> CollectReceiver:
        return cast("_Server", self.server).receiver

    def setup(self) -> None:
        super().setup()
        receiver = self.receiver
        self.connection.settimeout(receiver.options.timeout_s)
        receiver.watch(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.receiver.unwatch(self.connection)

    def end_headers(self) -> None:
        super().end_headers()
        self.receiver.watch(self.connection)  # (answered: the next request's deadline starts)

    def do_POST(self) -> None:
        receiver = self.receiver
        self._encoding: Encoding = "protobuf"
        try:
            self._handle(receiver)
        except _Reply as reply:
            receiver.count(f"http_{reply.status}")
            self._send_status(
                reply.status, reply.rpc_code, reply.message, self._encoding, reply.headers
            )
        except OSError:  # the client went away (reset, timed out): its doing, not ours
            receiver.count("connection_errors")
            self.close_connection = True
        except Exception as exc:  # a bug: answer 500, keep serving
            receiver.count("http_500")
            receiver.fail("request", exc)
            self.close_connection = True
            self._send_status(500, _RPC_INTERNAL, "internal error", self._encoding, {})

    def _handle(self, receiver: CollectReceiver) -> None:
        options = receiver.options
        path = self.path.split("?", 1)[0]
        if path.rstrip("/") != TRACES_PATH:
            self.close_connection = True
            raise _Reply(404, _RPC_NOT_FOUND, f"not found: POST traces to {TRACES_PATH}")
        if options.token is not None:
            given = self.headers.get("Authorization") or ""
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                value.strip().encode(), options.token.encode()
            ):
                self.close_connection = True
                raise _Reply(
                    401,
                    _RPC_UNAUTHENTICATED,
                    "missing or wrong bearer token (Authorization: Bearer <token>)",
                    **{"WWW-Authenticate": 'Bearer realm="intentrace"'},
                )
        content_type = self.headers.get("Content-Type")
        encoding = body_encoding(content_type)
        if encoding is None:
            self.close_connection = True
            raise _Reply(
                415,
                _RPC_INVALID_ARGUMENT,
                f"unsupported Content-Type {content_type!r}: "
                "use application/x-protobuf or application/json",
            )
        self._encoding = encoding
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            raise _Reply(411, _RPC_INVALID_ARGUMENT, "chunked bodies are not accepted")
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            self.close_connection = True
            raise _Reply(411, _RPC_INVALID_ARGUMENT, "Content-Length is required")
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError(length_text)
        except ValueError:
            self.close_connection = True
            raise _Reply(400, _RPC_INVALID_ARGUMENT, "bad Content-Length") from None
        if length > options.max_body_bytes:
            self.close_connection = True  # the body is not read
            raise _Reply(
                413,
                _RPC_RESOURCE_EXHAUSTED,
                f"body of {length} bytes exceeds the limit of {options.max_body_bytes}",
            )
        unwell = receiver.busy()
        if unwell is not None:
            self._discard(length)
            raise _Reply(503, _RPC_UNAVAILABLE, unwell, **{"Retry-After": "1"})
        content_encoding = self.headers.get("Content-Encoding")
        compressed = (content_encoding or "identity").strip().lower() != "identity"
        cost = length + (options.max_body_bytes if compressed else 0)
        if not receiver.reserve(cost):
            self._discard(length)
            raise _Reply(
                503,
                _RPC_UNAVAILABLE,
                "the receiver's memory budget is in use: retry",
                **{"Retry-After": "1"},
            )
        try:
            body = self._read_body(length)
            with receiver.turn():
                try:
                    raw = decompress(body, content_encoding, max_bytes=options.max_body_bytes)
                    del body
                    batch = decode(raw, encoding)
                    del raw
                except BodyTooLargeError as exc:
                    raise _Reply(413, _RPC_RESOURCE_EXHAUSTED, str(exc)) from None
                except OtlpDecodeError as exc:
                    unsupported = str(exc).startswith("unsupported Content-Encoding")
                    raise _Reply(
                        415 if unsupported else 400, _RPC_INVALID_ARGUMENT, str(exc)
                    ) from None
                result = receiver.feed.ingest(batch.spans)
        finally:
            receiver.release(cost)
        rejected = batch.rejected + result.rejected
        receiver.count("requests")
        receiver.count("spans", len(batch.spans) + batch.rejected)
        receiver.count("calls", result.calls)
        receiver.count("rejected", rejected)
        receiver.count("repaired_values", batch.repaired)
        response = ExportTraceServiceResponse()
        if rejected:
            reasons = [*batch.reasons, *result.reasons][:5]
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = f"{rejected} span(s) rejected: " + "; ".join(
                reasons
            )
        if batch.repaired:  # (a warning: OTLP allows a message with no span rejected)
            note = f"{batch.repaired} string value(s) not UTF-8, kept with U+FFFD"
            message = response.partial_success.error_message
            response.partial_success.error_message = f"{message}; {note}" if message else note
        self._send(200, response, encoding, {})

    def _read_body(self, length: int) -> bytes:
        """The body, or 400 when the client sends less than its ``Content-Length`` (it ended,
        or the request's deadline passed): the client's fault, never a 5xx."""
        try:
            body = self.rfile.read(length)
        except (TimeoutError, OSError):
            body = b""
        if len(body) != length:
            self.close_connection = True
            raise _Reply(400, _RPC_INVALID_ARGUMENT, "body shorter than its Content-Length")
        return body

    def _discard(self, length: int) -> None:
        """Read and drop ``length`` bytes (the connection stays usable; nothing is held)."""
        left = length
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
        except (TimeoutError, OSError):
            pass
        if left:
            self.close_connection = True

    # ------------------------------------------------------------------------------ replies
    def _send_status(
        self, status: int, code: int, message: str, encoding: Encoding, headers: dict[str, str]
    ) -> None:
        try:
            self._send(status, status_pb2.Status(code=code, message=message), encoding, headers)
        except OSError:
            self.close_connection = True

    def _send(self, status: int, message: Any, encoding: Encoding, headers: dict[str, str]) -> None:
        if encoding == "json":
            payload = json_format.MessageToJson(message, indent=None).encode("utf-8")
            content_type = "application/json"
        else:
            payload = message.SerializeToString()
            content_type = "application/x-protobuf"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for key, value in headers.items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def _not_allowed(self) -> None:
        self.close_connection = True
        receiver = self.receiver
        receiver.count("http_405")
        self._send_status(405, _RPC_UNIMPLEMENTED, "use POST", "protobuf", {"Allow": "POST"})

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_allowed

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], receiver: CollectReceiver) -> None:
        self.receiver = receiver
        self.request_queue_size = max(1, receiver.options.backlog)  # (listen's backlog)
        self._slots = threading.BoundedSemaphore(max(1, receiver.options.max_connections))
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.receiver.count("connections_refused")
            self.shutdown_request(request)  # over max_connections: closed at once
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.receiver.count("connection_errors")  # a client gone mid-request: not our failure


class CollectReceiver:
    """An OTLP/HTTP trace receiver feeding the anchor ledger (a context manager).

    Args:
        feed: turns decoded spans into anchors (``SpanFeed(ledger, policy=..., registry=...)``).
        options: address, token, body limit.
        ledger_stats: returns the ledger's counters (``Ledger.stats``), for back-pressure.

    Raises:
        OSError: the address cannot be bound (in use, not local, no permission).
    """

    def __init__(
        self,
        feed: SpanFeed,
        options: CollectOptions | None = None,
        *,
        ledger_stats: Any = None,
    ) -> None:
        self.feed = feed
        self.options = options or CollectOptions()
        self._ledger_stats = ledger_stats
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._errors = ErrorLog("receiver", logger)
        self._budget = threading.Condition()
        self._reserved = 0
        self._turns = threading.BoundedSemaphore(max(1, self.options.max_concurrent))
        self._deadlines: dict[Any, float] = {}
        self._reaper_stop = threading.Event()
        self._server = _Server((self.options.host, self.options.port), self)
        threading.Thread(
            target=self._reap, name="intentrace-collect-deadlines", daemon=True
        ).start()
        self._thread: threading.Thread | None = None
        self._running = False

    # ------------------------------------------------------------------------------ lifecycle
    def start(self) -> CollectReceiver:
        """Serve in a background thread."""
        if self._thread is None and not self._running:
            self._running = True
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="intentrace-collect",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until ``stop()`` is called from another one."""
        self._running = True
        self._server.serve_forever(poll_interval=0.1)

    def stop(self) -> None:
        """Stop accepting requests and close the socket. Idempotent."""
        self._reaper_stop.set()
        if self._running:
            self._running = False
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def __enter__(self) -> CollectReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------ addresses
    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    @property
    def traces_url(self) -> str:
        """Where exporters post (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)."""
        return self.url + TRACES_PATH

    # ------------------------------------------------------------------------------ counters
    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + n

    # ------------------------------------------------------------------------------ limits
    def reserve(self, n: int, wait_s: float = 1.0) -> bool:
        """Take ``n`` bytes of the memory budget (waiting up to ``wait_s``); False: full."""
        budget = self.options.max_memory_bytes
        with self._budget:
            if not self._budget.wait_for(lambda: self._reserved + n <= budget, wait_s):
                return False
            self._reserved += n
            peak = self._counts.get("peak_reserved_bytes", 0)
            if self._reserved > peak:
                self._counts["peak_reserved_bytes"] = self._reserved
            return True

    def release(self, n: int) -> None:
        with self._budget:
            self._reserved -= n
            self._budget.notify_all()

    def turn(self) -> threading.BoundedSemaphore:
        """Held while a request is decoded and written (``max_concurrent`` at once)."""
        return self._turns

    def watch(self, conn: Any) -> None:
        """(Re)start ``conn``'s whole-request deadline."""
        self._deadlines[conn] = time.monotonic() + self.options.timeout_s

    def unwatch(self, conn: Any) -> None:
        self._deadlines.pop(conn, None)

    def _reap(self) -> None:
        """Cut connections past their deadline (a slow client holds no thread for long)."""
        step = min(0.5, max(0.05, self.options.timeout_s / 10))
        while not self._reaper_stop.wait(step):
            now = time.monotonic()
            for conn, deadline in list(self._deadlines.items()):
                if deadline < now and self._deadlines.pop(conn, None) is not None:
                    self.count("deadline_cut")
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)

    def fail(self, where: str, exc: BaseException) -> None:
        self.count("internal_errors")
        self._errors.report(where, exc)

    def stats(self) -> dict[str, int]:
        """Counters: requests, spans, calls, rejected, repaired_values (protobuf strings that
        were not UTF-8, kept with U+FFFD), http_<status>, internal_errors,
        connections_refused (over ``max_connections``), deadline_cut (past ``timeout_s``),
        peak_reserved_bytes (the most of the memory budget in use at once)."""
        with self._lock:
            return dict(self._counts)

    def busy(self) -> str | None:
        """Why the ledger cannot take a request now (answered 503, ``Retry-After``); None: it
        can. Its queue backing up, or its database failing for a reason retrying cannot fix
        (the exporter keeps the spans and retries; an answer of 200 would lose them)."""
        if self._ledger_stats is None:
            return None
        try:
            stats = self._ledger_stats()
        except Exception:
            return None
        if int(stats.get("failing_permanently", 0)):
            return "the ledger's database refuses writes (see the collector's log): retry later"
        limit = self.options.busy_queue_depth
        if limit is not None and int(stats.get("queue_depth", 0)) >= limit:
            return "the ledger is busy: retry"
        return None
