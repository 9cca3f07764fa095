"""``intentrace collect``'s receiver under abuse, over real loopback sockets: many connections
at once (no resets), a memory budget across concurrent bodies (503 + Retry-After when full), a
whole-request deadline (a client trickling bytes is cut), a body shorter than its
Content-Length (400, never a 5xx), a cap on connections."""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Iterator

import pytest

from tests.collect.test_receiver import make_spans, protobuf_body
from tracing.collect._feed import SpanFeed
from tracing.collect._receiver import CollectOptions, CollectReceiver
from tracing.testing import RecordingLedger


@pytest.fixture
def serve() -> Iterator[object]:
    started: list[CollectReceiver] = []

    def _serve(**options: object) -> CollectReceiver:
        receiver = CollectReceiver(
            SpanFeed(RecordingLedger()),
            CollectOptions(port=0, **options),  # pyright: ignore[reportArgumentType]
        )
        started.append(receiver.start())
        return receiver

    yield _serve
    for receiver in started:
        receiver.stop()


def request_bytes(body: bytes, *, length: int | None = None) -> bytes:
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
    )
    return head.encode() + body


def status_of(sock: socket.socket, timeout_s: float = 10.0) -> int | None:
    """The status of the response on ``sock`` (None: closed without one)."""
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return int(data.split(b" ", 2)[1])


def connect(receiver: CollectReceiver) -> socket.socket:
    return socket.create_connection(receiver.address, timeout=10)


def test_many_connections_at_once_are_not_reset(serve: object) -> None:
    receiver: CollectReceiver = serve()  # pyright: ignore[reportCallIssue]
    payload = request_bytes(protobuf_body(make_spans(1)))
    n = 400
    socks: list[socket.socket] = []
    resets = 0
    for _ in range(n):  # every connect before any is served (the accept loop is one thread)
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(receiver.address)
        socks.append(s)
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_WRITE)
    pending: dict[socket.socket, bytes] = {}
    deadline = time.monotonic() + 60
    while len(pending) < n - resets and time.monotonic() < deadline:
        for key, _ in sel.select(1):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            sel.unregister(s)
            try:
                s.sendall(payload)
                pending[s] = b""
            except OSError:
                resets += 1
    statuses: list[int | None] = []
    for s in pending:
        s.setblocking(True)
        try:
            statuses.append(status_of(s, 30))
        except OSError:
            resets += 1
        s.close()
    assert resets == 0
    assert statuses.count(200) == n, {x: statuses.count(x) for x in set(statuses)}


def test_the_memory_budget_holds_across_concurrent_bodies(serve: object) -> None:
    budget = 1024 * 1024
    receiver: CollectReceiver = serve(max_memory_bytes=budget, timeout_s=20)  # pyright: ignore[reportCallIssue]
    body = protobuf_body(make_spans(2))
    big = len(body) + 420 * 1024  # (padding after the message: read, then refused by decode)
    holders = []
    for _ in range(2):  # two requests whose bodies are on their way (420 KB reserved each)
        s = connect(receiver)
        s.sendall(request_bytes(body[:10], length=big))
        holders.append(s)
    time.sleep(0.3)
    third = connect(receiver)
    third.sendall(request_bytes(b"x" * (400 * 1024)))
    assert status_of(third) == 503  # the budget is in use: retry later (body read, dropped)
    stats = receiver.stats()
    assert stats.get("peak_reserved_bytes", 0) <= budget
    for s in holders:
        s.close()
    time.sleep(0.3)
    ok = connect(receiver)
    ok.sendall(request_bytes(body))
    assert status_of(ok) == 200
    assert receiver.stats().get("http_500", 0) == 0


def test_a_trickling_client_is_cut_at_the_deadline(serve: object) -> None:
    receiver: CollectReceiver = serve(timeout_s=1.0)  # pyright: ignore[reportCallIssue]
    s = connect(receiver)
    began = time.monotonic()
    cut = False
    for byte in request_bytes(b"x" * 100):  # one byte every 50 ms: each read is quick
        try:
            s.send(bytes([byte]))
        except OSError:
            cut = True
            break
        time.sleep(0.05)
        if time.monotonic() - began > 6:
            break
    if not cut:
        s.settimeout(2)
        try:
            cut = s.recv(4096) in (b"",) or True
        except OSError:
            cut = True
    assert cut and time.monotonic() - began < 4
    assert receiver.stats().get("deadline_cut", 0) == 1


def test_a_short_body_is_the_clients_fault(serve: object) -> None:
    receiver: CollectReceiver = serve(timeout_s=1.0)  # pyright: ignore[reportCallIssue]
    s = connect(receiver)
    s.sendall(request_bytes(b"0123456789", length=1000))  # then silence
    began = time.monotonic()
    status = status_of(s)
    assert status in (400, None) and time.monotonic() - began < 4
    stats = receiver.stats()
    assert stats.get("http_500", 0) == 0 and stats.get("internal_errors", 0) == 0
    # A client that ends its side early gets the 400 itself.
    s2 = connect(receiver)
    s2.sendall(request_bytes(b"0123456789", length=1000))
    s2.shutdown(socket.SHUT_WR)
    assert status_of(s2) == 400


def test_connections_over_the_cap_are_closed_at_once(serve: object) -> None:
    receiver: CollectReceiver = serve(max_connections=2)  # pyright: ignore[reportCallIssue]
    idle = [connect(receiver) for _ in range(2)]
    time.sleep(0.2)
    extra = connect(receiver)
    extra.settimeout(5)
    assert extra.recv(10) == b""  # closed without a thread
    assert receiver.stats().get("connections_refused", 0) == 1
    for s in idle:
        s.close()
    time.sleep(0.3)
    ok = connect(receiver)
    ok.sendall(request_bytes(protobuf_body(make_spans(1))))
    assert status_of(ok) == 200
