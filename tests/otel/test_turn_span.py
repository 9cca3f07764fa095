"""One trace per turn: ``session(..., turn=N)`` (or ``turn(N)``) opens an ``invoke_agent
<agent>`` span that parents the turn's calls and activity blocks, with the session, user and
turn on it for GenAI semconv, OpenInference and Langfuse readers. Real OTLP over loopback."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.otlp_receiver import OtlpReceiver, WireSpan
from tracing import IntentRegistry, activity, configure, session, tool_call, turn
from tracing import attributes as A

REGISTRY = IntentRegistry(["search_code", "read_file"])


def _run(rx: OtlpReceiver, body: str) -> list[WireSpan]:
    setup = configure(
        otlp=rx.traces_url, provider=TracerProvider(), set_global=False, ledger=False,
        registry=REGISTRY,
    )  # fmt: skip
    tracer = setup.provider.get_tracer("app")

    def calls() -> None:
        with tool_call("search_code", {"intent": "Searching for OAuth"}, tracer=tracer):
            pass
        with (
            activity("Reading the router", tracer=tracer),
            tool_call("read_file", {"intent": "Reading the router"}, tracer=tracer),
        ):
            pass
        try:
            with tool_call("read_file", {"intent": "Reading the missing file"}, tracer=tracer):
                raise FileNotFoundError("gone.py")
        except FileNotFoundError:
            pass

    if body == "session":
        with session("conv-7", agent_id="coder", turn=2, user_id="u-1", tracer=tracer):
            calls()
    else:
        with session("conv-7", agent_id="coder", user_id="u-1"), turn(2, tracer=tracer):
            calls()
    setup.force_flush()
    setup.shutdown()
    return rx.wait_for_spans(5)


def _check(spans: list[WireSpan]) -> None:
    by_name = {s.name: s for s in spans}
    root = by_name["invoke_agent coder"]
    assert root.parent_span_id is None
    assert {s.trace_id for s in spans} == {root.trace_id}  # one trace for the turn
    attrs = root.attributes
    assert attrs[A.GEN_AI_OPERATION_NAME] == A.GEN_AI_INVOKE_AGENT
    assert attrs[A.GEN_AI_AGENT_NAME] == "coder"
    assert attrs[A.GEN_AI_CONVERSATION_ID] == "conv-7"
    assert attrs[A.OPENINFERENCE_SPAN_KIND] == A.OPENINFERENCE_AGENT
    assert attrs[A.SESSION_ID_KEY] == "conv-7" and attrs[A.LANGFUSE_SESSION_ID] == "conv-7"
    assert attrs[A.OI_USER_ID] == "u-1" and attrs[A.LANGFUSE_USER_ID] == "u-1"
    assert attrs[A.TURN] == 2
    block = by_name["Reading the router"]
    assert block.parent_span_id == root.span_id
    assert by_name["Searching for OAuth"].parent_span_id == root.span_id
    assert by_name["Reading the missing file · failed"].status_code == 2
    assert root.status_code != 2  # the failure was handled inside the turn
    for span in spans:
        assert span.attributes[A.SESSION_ID] == "conv-7"


def test_session_with_a_turn_makes_one_trace() -> None:
    with OtlpReceiver() as rx:
        _check(_run(rx, "session"))


def test_a_turn_inside_a_session_makes_one_trace() -> None:
    with OtlpReceiver() as rx:
        _check(_run(rx, "turn"))


def test_no_turn_span_when_asked() -> None:
    setup = configure(provider=TracerProvider(), set_global=False, ledger=False)
    tracer = setup.provider.get_tracer("app")
    exporter = InMemorySpanExporter()
    setup.processor.add_processor(SimpleSpanProcessor(exporter))
    with (
        session("c", turn=1, turn_span=False, tracer=tracer),
        tool_call("t", {"intent": "Doing it"}, tracer=tracer, label_bearing=True),
    ):
        pass
    setup.force_flush()
    (span,) = exporter.get_finished_spans()
    assert span.name == "Doing it" and span.parent is None
    setup.shutdown()
