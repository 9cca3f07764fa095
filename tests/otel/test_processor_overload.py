"""The processor under load and in odd threads: the app thread never waits on it (a full queue
sheds the span's processing, counted, and exports a scrubbed stub), the processor's own thread
never waits on its own queue (no deadlock when a background call times out), background calls
time out inline too, and every span forwarded is encodable by the OTLP exporter.

Real threads, the real SDK, real OTLP over loopback; hangs are caught with generous deadlines
(never timed assertions).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from redaction import RedactionPolicy
from tests.support.otlp_receiver import OtlpReceiver
from tracing import IntentOptions, IntentSpanProcessor, session, tool_call
from tracing import attributes as A
from tracing.cli import main
from tracing.ledger import open_ledger
from tracing.otel._processor import THREAD_NAME
from tracing.testing import RecordingLedger, SequentialIdGenerator, capture

SECRET = "sk-live-0123456789abcdefghijklmnopqrstuv"
HANG_S = 60.0
"""How long a step may take before the test calls it a hang (generous: a loaded CI machine)."""


class GatedPolicy:
    """The default policy, whose value scrubbing waits for ``gate`` in the processor's thread
    only: the processor falls behind while the app's threads run free."""

    def __init__(self) -> None:
        self.inner = RedactionPolicy.default()
        self.gate = threading.Event()

    def redact_call(self, **kwargs: Any) -> Any:
        return self.inner.redact_call(**kwargs)

    def scrub(self, value: Any) -> Any:
        if threading.current_thread().name == THREAD_NAME:
            self.gate.wait(HANG_S)
        return self.inner.scrub(value)

    def scrub_text(self, text: str) -> str:
        return self.inner.scrub_text(text)


def _run_threads(target: Any, n: int) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def _joined(threads: list[threading.Thread], timeout_s: float = HANG_S) -> bool:
    done = threading.Event()

    def join_all() -> None:
        for t in threads:
            t.join()
        done.set()

    threading.Thread(target=join_all, daemon=True).start()
    return done.wait(timeout_s)


def test_the_app_never_waits_for_a_processor_that_fell_behind() -> None:
    policy = GatedPolicy()
    ledger = RecordingLedger()
    cap = capture(policy=policy, ledger=ledger, options=IntentOptions(max_queue=16))
    spans = 300
    try:

        def app(i: int) -> None:
            for n in range(spans // 3):
                with tool_call(
                    f"search {SECRET}",
                    {"intent": f"Searching {SECRET}", "q": SECRET},
                    tracer=cap.tracer,
                    call_id=f"c{i}-{n}",
                    label_bearing=True,
                ) as c:
                    c.set_result({"token": SECRET})

        threads = _run_threads(app, 3)
        finished = _joined(threads)
        stats = cap.processor.stats()
    finally:
        policy.gate.set()
    assert finished, "the app's threads waited for the processor"
    assert stats["shed_spans"] > 0
    exported = cap.spans()  # (flushes: the processor catches up)
    assert len(exported) == spans  # each span exported once: shaped, or as a stub
    stubs = [s for s in exported if (s.attributes or {}).get(A.SHED)]
    assert len(stubs) == cap.processor.stats()["shed_spans"]
    wire = json.dumps([dict(s.attributes or {}) for s in exported]) + "".join(
        s.name for s in exported
    )
    assert SECRET not in wire  # never raw, stub or not
    for stub in stubs:
        assert stub.name == "execute_tool search [redacted:openai_key]"
        assert stub.events == ()
        assert set(stub.attributes or {}) <= {
            A.SHED,
            A.GEN_AI_OPERATION_NAME,
            A.GEN_AI_TOOL_NAME,
            A.GEN_AI_TOOL_CALL_ID,
            A.LABEL_BEARING,
            A.SESSION_ID,
            A.AGENT_ID,
            A.TURN,
        }
    # every call's anchor is settled (a shed end settles its in-flight anchor without outcome)
    anchors = ledger.anchors()
    assert all(a["status"] == "success" for a in anchors.values())
    assert ledger.dropped_total() == cap.processor.stats()["anchors_shed"] > 0
    cap.provider.shutdown()


def test_shed_calls_are_counted_in_the_ledger_and_the_cli_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shed.db'}"
    ledger = open_ledger(url)
    policy = GatedPolicy()
    exporter = InMemorySpanExporter()
    processor = IntentSpanProcessor(
        SimpleSpanProcessor(exporter),
        policy=policy,
        ledger=ledger,
        options=IntentOptions(max_queue=8),
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    try:
        with session("conv-shed"):
            for n in range(60):
                with tool_call("search", {"intent": f"Searching {n}"}, tracer=tracer):
                    pass
    finally:
        policy.gate.set()
    assert processor.force_flush(int(HANG_S * 1000)) and ledger.flush(HANG_S)
    shed = processor.stats()["anchors_shed"]
    assert shed > 0
    assert [(r["session_id"], r["source"], r["count"]) for r in ledger.dropped()] == [
        ("conv-shed", "processor", shed)
    ]
    assert ledger.session("conv-shed") is not None
    provider.shutdown()
    ledger.close()
    result = CliRunner().invoke(main, ["sessions", "--ledger", url])
    assert result.exit_code == 0, result.output
    assert f"warning: {shed} tool calls were shed under load" in result.stderr


def test_the_processor_thread_never_waits_on_its_own_queue() -> None:
    """Issue 21: a background call times out, the processor's thread ends its span, and that end
    comes back through ``on_end`` while the queue is full: it must not wait for room only the
    same thread can make (the app hung in 4 of 4 runs)."""
    cap = capture(options=IntentOptions(max_queue=8))
    stop = threading.Event()
    try:
        with tool_call(
            "crawl", {"intent": "Crawling the docs"}, tracer=cap.tracer, label_bearing=True
        ) as bg:
            bg.to_background(timeout_s=0.05)

        def busy(i: int) -> None:
            n = 0
            while not stop.is_set() and n < 400:
                with tool_call("search", {"intent": f"Searching {n}"}, tracer=cap.tracer):
                    n += 1

        threads = _run_threads(busy, 8)
        finished = _joined(threads)
        stop.set()
        assert finished, "the app hung"
        flushed = threading.Event()
        threading.Thread(
            target=lambda: cap.processor.force_flush(int(HANG_S * 1000)) and flushed.set(),
            daemon=True,
        ).start()
        assert flushed.wait(HANG_S), "the processor hung"
        assert cap.processor.stats()["background_timed_out"] == 1
        names = {s.name for s in cap.exporter.get_finished_spans()}
        assert "Crawling the docs · timed out" in names
    finally:
        stop.set()
        cap.provider.shutdown()


def test_background_calls_time_out_inline_too() -> None:
    with capture(options=IntentOptions(in_thread=False, background_timeout_s=0.05)) as cap:
        with tool_call(
            "crawl", {"intent": "Crawling the docs"}, tracer=cap.tracer, label_bearing=True
        ) as c:
            c.to_background()
        exported = threading.Event()

        class Seen(InMemorySpanExporter):
            def export(self, spans: Any) -> Any:
                exported.set()
                return super().export(spans)

        seen = Seen()
        cap.processor.add_processor(SimpleSpanProcessor(seen))
        assert exported.wait(HANG_S), "the background call never timed out"
        (span,) = seen.get_finished_spans()
        assert span.name == "Crawling the docs · timed out"
        assert cap.anchors()[c.anchor_id]["status"] == "error"
        assert cap.processor.stats()["background_timed_out"] == 1


@pytest.fixture
def rx() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


def test_non_tool_spans_with_lone_surrogates_are_repaired(rx: OtlpReceiver) -> None:
    """The app's own spans: a lone surrogate anywhere makes the OTLP encoder fail the whole batch
    (the tool spans in it too)."""
    provider = TracerProvider(id_generator=SequentialIdGenerator())
    processor = IntentSpanProcessor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=rx.traces_url)),
        policy=RedactionPolicy.default(),
        ledger=RecordingLedger(),
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("step \ud800") as span:
        span.set_status(Status(StatusCode.ERROR, "failed at \udcff"))
        span.add_event("retry \ud83d", {"why": "bad \udc00", "n": 1})
        span.set_attribute("note", "half \ud800 a pair")
        span.set_attribute("tags", ["ok", "x\udfff"])
        span.set_attribute("key \ud801", "value")
    with tracer.start_as_current_span("plain"):
        pass
    with tool_call("search", {"intent": "Searching"}, tracer=tracer, label_bearing=True):
        pass
    assert processor.force_flush(int(HANG_S * 1000))
    rx.wait_for_spans(3, timeout=HANG_S)
    spans = rx.by_name()
    provider.shutdown()
    assert set(spans) == {"step ?", "plain", "Searching"}
    step = spans["step ?"]
    assert step.status_message == "failed at ?"
    assert [e.name for e in step.events] == ["retry ?"]
    assert step.events[0].attributes == {"why": "bad ?", "n": 1}
    assert step.attributes["note"] == "half ? a pair"
    assert step.attributes["tags"] == ["ok", "x?"]
    assert step.attributes["key ?"] == "value"


def test_importing_tracing_leaves_opentelemetry_logging_alone() -> None:
    code = (
        "import logging, tracing, tracing.otel._processor;"
        "print(len(logging.getLogger('opentelemetry.sdk.trace').filters))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=HANG_S
    )
    assert out.stdout.strip() == "0"
