"""Fixtures of the stream-tap tests: the loopback SSE server, a ledger, the registry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ledger.conftest import FAST
from tests.support.sse import SSEServer
from tracing import IntentRegistry
from tracing.ledger import Anchor, AnchorWrite, Ledger, open_ledger
from tracing.taps import tap_stats

TOOLS = ("search_code", "read_file")


@pytest.fixture(scope="session")
def server() -> Iterator[SSEServer]:
    srv = SSEServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def sse_server(server: SSEServer) -> Iterator[SSEServer]:
    """The shared server with no script left over from another test."""
    server.scripts.clear()
    server.requests.clear()
    yield server
    server.scripts.clear()


@pytest.fixture
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    led = open_ledger(f"sqlite:///{tmp_path_factory.mktemp('taps')}/ledger.db", options=FAST)
    yield led
    led.close()


@pytest.fixture
def registry() -> IntentRegistry:
    reg = IntentRegistry()
    for name in TOOLS:
        reg.add(name)
    return reg


class Spy:
    """Records every write a tap makes (copies), then hands it to the real ledger."""

    def __init__(self, inner: Ledger | None = None) -> None:
        self.inner = inner
        self.writes: list[dict[str, Any]] = []

    def record(self, write: AnchorWrite) -> None:
        self.writes.append(dict(write))
        if self.inner is not None:
            self.inner.record(write)

    def set_activity(
        self, session_id: str, batch_id: str, label: str, *, turn: int | None = None
    ) -> None:
        if self.inner is not None:
            self.inner.set_activity(session_id, batch_id, label, turn=turn)

    def of(self, call_id: str) -> list[dict[str, Any]]:
        """The writes of the call the provider gave ``call_id`` (or of anchor ``call_id``)."""
        ids = {w["tool_call_id"] for w in self.writes if w.get("provider_call_id") == call_id}
        ids.add(call_id)
        return [w for w in self.writes if w["tool_call_id"] in ids]


def one_by_provider(ledger: Ledger, provider_call_id: str) -> Anchor | None:
    """The one call the provider gave this id (None: none; fails when there are several)."""
    found = ledger.by_provider_id(provider_call_id)
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.fixture
def no_internal_errors() -> Iterator[None]:
    """Fails the test when a tap swallowed an internal error (a bug) while it ran."""
    before = tap_stats()["internal_errors"]
    yield
    assert tap_stats()["internal_errors"] == before


_CLIENTS: dict[tuple[str, str], Any] = {}


def sdk_client(kind: str, server: SSEServer) -> Any:
    """One real SDK client per kind and server for the whole run (building one loads TLS
    certificates: ~0.2 s). Async clients are made per call: they belong to one event loop,
    and skip certificate loading (the loopback server is plain HTTP anyway)."""
    import anthropic
    import openai

    if kind == "openai-async":
        return openai.AsyncOpenAI(
            base_url=server.url + "/v1", api_key="sk-test", max_retries=0,
            http_client=openai.DefaultAsyncHttpx2Client(verify=False),
        )  # fmt: skip
    if kind == "anthropic-async":
        return anthropic.AsyncAnthropic(
            base_url=server.url, api_key="sk-ant-test", max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(verify=False),
        )  # fmt: skip
    key = (kind, server.url)
    found = _CLIENTS.get(key)
    if found is None:
        if kind == "openai":
            found = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
        else:
            found = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
        _CLIENTS[key] = found
    return found
