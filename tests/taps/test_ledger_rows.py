"""One row per call: streaming (the tap) -> in flight -> settled (the processor), in place,
and a late streaming write never rewinds it. On SQLite and on the real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ledger.conftest import FAST, pg_schema_url
from tracing.anchor import anchor_id
from tracing.ledger import AnchorWrite, Ledger, open_ledger


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_ledger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ledger]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('rows')}/ledger.db"
    else:
        url = pg_schema_url(request.getfixturevalue("postgres_url"))
    led = open_ledger(url, options=FAST)
    yield led
    led.close()


def w(status: str, **kw: Any) -> AnchorWrite:
    return {"tool_call_id": "call_1", "tool_name": "search_code", "status": status, **kw}  # pyright: ignore[reportReturnType]


def streaming(intent: str | None, **kw: Any) -> AnchorWrite:
    return w("streaming", intent=intent, **kw)


def row(ledger: Ledger) -> dict[str, Any]:
    assert ledger.flush(), ledger.recent_errors()
    found = ledger.anchor("call_1")
    assert found is not None
    return dict(found)


def test_streaming_then_in_flight_then_settled_is_one_row(any_ledger: Ledger) -> None:
    led = any_ledger
    led.record(streaming(None, session_id="conv", start_ns=1_000, batch_id="msg_1", turn=2))
    first = row(led)
    assert (first["status"], first["label"], first["seq"]) == (
        "streaming",
        "Running search_code",
        1,
    )
    led.record(streaming("Searching for"))
    led.record(streaming("Searching for OAuth handling"))
    grown = row(led)
    assert (grown["status"], grown["label"]) == ("streaming", "Searching for OAuth handling")
    assert grown["updated_ns"] > first["updated_ns"]
    led.record(
        w(
            "in_flight",
            session_id="conv",
            intent="Searching for OAuth handling",
            start_ns=2_000,
            trace_id="a" * 32,
            span_id="b" * 16,
        )
    )
    flying = row(led)
    assert (flying["status"], flying["seq"], flying["start_ns"]) == ("in_flight", 1, 2_000)
    assert flying["batch_id"] == "msg_1" and flying["turn"] == 2  # the tap's context stays
    led.record(w("success", outcome="Found 12 results", end_ns=2_000_000_000))
    done = row(led)
    assert (done["status"], done["label"], done["seq"]) == ("success", "Found 12 results", 1)
    assert done["settle_seq"] is not None and done["duration_ms"] == pytest.approx(1999.998)
    assert [a["tool_call_id"] for a in led.session_anchors("conv")] == ["call_1"]


@pytest.mark.parametrize("later", ["in_flight", "background", "success", "error"])
def test_a_late_streaming_write_never_rewinds(any_ledger: Ledger, later: str) -> None:
    led = any_ledger
    led.record(streaming(None, session_id="conv"))
    led.record(
        w(
            later,
            intent="Searching for OAuth",
            end_ns=None if later in ("in_flight", "background") else 5,
        )
    )
    before = row(led)
    # the tap's last writes arrive late (another process, a slow queue): same batch, then later
    led.record(
        streaming(
            "Searching for OAuth handling (late)", agent_id="coder", redaction='{"args": "keep"}'
        )
    )
    mid = row(led)
    led.record(streaming("x", label="x"))
    after = row(led)
    for r in (mid, after):
        assert (r["status"], r["intent"], r["label"]) == (
            before["status"],
            before["intent"],
            before["label"],
        )
    assert after["agent_id"] == "coder"  # gaps may be filled
    assert after["redaction"] == '{"args": "keep"}'


def test_streaming_and_in_flight_in_one_batch(any_ledger: Ledger) -> None:
    # Whether both writes coalesce in one transaction or not, the in-flight status wins.
    led = any_ledger
    led.record(w("in_flight", session_id="conv", intent="Reading"))
    led.record(streaming("Reading the router"))
    r = row(led)
    assert (r["status"], r["intent"]) == ("in_flight", "Reading")


def test_the_processor_keeps_what_only_the_tap_knew(any_ledger: Ledger) -> None:
    # The tap saw the model's response (its id is the batch); the tool span has no parent
    # span, so the processor knows no batch or agent: it must not write them as NULL. Both know
    # the session and turn (``session(...)``), so both give the call the same identity.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracing import IntentSpanProcessor, session, tool_call

    led = any_ledger
    identity = anchor_id("call_1", session_id="conv", turn=2)  # what both compute
    led.record(
        {
            **streaming(
                "Searching for OAuth handling",
                session_id="conv",
                batch_id="resp_1",
                turn=2,
                agent_id="coder",
            ),
            "tool_call_id": identity,
        }
    )
    assert led.flush()
    processor = IntentSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), ledger=led)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with (
        session("conv", turn=2),
        tool_call(
            "search_code",
            {"intent": "Searching for OAuth handling", "query": "oauth"},
            tracer=provider.get_tracer("test"),
            call_id="call_1",
            label_bearing=True,
        ),
    ):
        pass
    provider.shutdown()
    assert led.flush()
    r = dict(led.anchor(identity) or {})
    assert [a["tool_call_id"] for a in led.session_anchors("conv")] == [identity]
    assert r["status"] == "success"
    assert (r["batch_id"], r["session_id"], r["turn"], r["agent_id"]) == (
        "resp_1",
        "conv",
        2,
        "coder",
    )
    assert r["span_id"] is not None  # what the processor knows is still written


@pytest.mark.parametrize("app", ["in_flight", "background", "success", "error"])
def test_an_abandon_never_downgrades_a_call_the_app_took_over(any_ledger: Ledger, app: str) -> None:
    # The tap's stream stopped (it abandons the calls it saw unfinished), but the application
    # already runs (or ran) this one: the row keeps the app's status and label.
    led = any_ledger
    led.record(streaming("Searching for", session_id="conv"))
    led.record(
        w(
            app,
            intent="Searching for OAuth",
            end_ns=None if app in ("in_flight", "background") else 5,
        )
    )
    before = row(led)
    led.record(w("abandoned", intent="Searching for", end_ns=9, error="the stream was cut"))
    after = row(led)
    assert (after["status"], after["label"], after["intent"]) == (
        before["status"], before["label"], before["intent"],
    )  # fmt: skip
    assert after["error"] == (before["error"] or "the stream was cut")  # only a gap filled


def test_an_abandon_settles_a_call_still_streaming_and_the_app_can_revive_it(
    any_ledger: Ledger,
) -> None:
    led = any_ledger
    led.record(streaming("Searching for", session_id="conv"))
    led.record(w("abandoned", intent="Searching for", end_ns=9, error="the stream was cut"))
    gone = row(led)
    assert (gone["status"], gone["label"]) == ("abandoned", "Searching for · abandoned")
    assert gone["settle_seq"] is not None
    # the processor's thread lagged the tap's: its in-flight write arrives after the abandon
    led.record(w("in_flight", intent="Searching for OAuth", start_ns=3))
    back = row(led)
    assert (back["status"], back["label"]) == ("in_flight", "Searching for OAuth")
    assert back["end_ns"] is None and back["error"] is None and back["settle_seq"] is None
    led.record(w("success", outcome="Found it", end_ns=10))
    done = row(led)
    assert (done["status"], done["label"]) == ("success", "Found it")
    assert done["settle_seq"] is not None and done["seq"] == gone["seq"]


def test_abandon_and_revival_in_one_batch(any_ledger: Ledger) -> None:
    led = any_ledger
    led.record(streaming("Reading", session_id="conv"))
    led.record(w("abandoned", intent="Reading", end_ns=9, error="cut"))
    led.record(w("in_flight", intent="Reading the router"))
    r = row(led)
    assert (r["status"], r["settle_seq"], r["end_ns"]) == ("in_flight", None, None)
    led.record(w("success", end_ns=20))
    assert row(led)["settle_seq"] is not None
