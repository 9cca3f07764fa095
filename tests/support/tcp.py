"""TCP peers under the tests' control, on loopback only: a proxy that can pause (black-hole)
or cut its connections, and a fake PostgreSQL server that refuses every login."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``. ``pause()`` stops forwarding without closing
    anything (a black-holed, half-open path); ``cut()`` closes every connection (a reset);
    ``down()`` resets every connection, new ones too, until ``up()``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port: int = self._listener.getsockname()[1]
        self._running = threading.Event()
        self._running.set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._refusing = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _accept_loop(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            if self._refusing:  # (down: what a restarting server's port does)
                with contextlib.suppress(OSError):
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.1)
        while not self._stop.is_set():
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            self._running.wait()  # paused: hold the bytes (the peer sees silence)
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def down(self) -> None:
        """Reset every connection and every new one until ``up()`` (a server restarting)."""
        self._refusing = True
        self.cut()

    def up(self) -> None:
        self._refusing = False

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def cut(self) -> None:
        """Reset every open connection (new ones are still accepted)."""
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._stop.set()
        self._running.set()
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(2)


@contextlib.contextmanager
def tcp_proxy(target: tuple[str, int] = ("127.0.0.1", 5432)) -> Iterator[TcpProxy]:
    proxy = TcpProxy(target)
    try:
        yield proxy
    finally:
        proxy.close()


def _error_response(sqlstate: str, message: str) -> bytes:
    fields = b"".join(
        code + value.encode() + b"\0"
        for code, value in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", sqlstate), (b"M", message))
    )
    body = fields + b"\0"
    return b"E" + struct.pack("!I", len(body) + 4) + body


@contextlib.contextmanager
def refusing_postgres(
    sqlstate: str = "28P01", message: str = 'password authentication failed for user "app"'
) -> Iterator[int]:
    """A loopback server speaking just enough of the PostgreSQL protocol to refuse every
    login with ``message`` (what a server with password authentication answers a wrong
    password). Yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                while True:
                    head = conn.recv(8, socket.MSG_WAITALL)
                    if len(head) < 8:
                        return
                    length, code = struct.unpack("!II", head)
                    if length > 8:
                        conn.recv(length - 8, socket.MSG_WAITALL)
                    if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: not here
                        conn.sendall(b"N")
                        continue
                    conn.sendall(_error_response(sqlstate, message))
                    return
            except OSError:
                return

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(2)
