"""configure(...): OTLP from the standard variables, the ledger (the real one), an existing
provider, configuration errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redaction import PolicyError
from tracing import ConfigError, IntentSpanProcessor, activity, configure, session, tool_call
from tracing import attributes as A
from tracing.anchor import anchor_id
from tracing.ledger import open_ledger


def test_real_ledger_gets_in_flight_then_settled_anchors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    exporter = InMemorySpanExporter()
    setup = configure(
        ledger=url, provider=TracerProvider(), set_global=False, exporters=(), processors=()
    )
    setup.processor.add_processor(SimpleSpanProcessor(exporter))
    tracer = setup.provider.get_tracer("app")
    with (
        session("conv-db", agent_id="coder", turn=1),
        activity("Exploring auth", tracer=tracer),
        tool_call(
            "search", {"intent": "Searching auth"}, tracer=tracer, call_id="k1", label_bearing=True
        ) as c,
    ):
        setup.processor.force_flush()
        assert setup.ledger is not None
        setup.ledger.flush()  # pyright: ignore[reportAttributeAccessIssue]
        live = next(iter(open_ledger(url, read_only=True).by_provider_id("k1")), None)
        assert live is not None and live["status"] == "in_flight"
        assert live["intent"] == "Searching auth"
        c.set_outcome("Found auth")
    assert setup.force_flush()
    setup.shutdown()
    reader = open_ledger(url, read_only=True)
    (anchor,) = reader.session_anchors("conv-db")
    assert anchor["tool_call_id"] == anchor_id("k1", session_id="conv-db", turn=1)
    assert anchor["provider_call_id"] == "k1"
    assert anchor["status"] == "success" and anchor["label"] == "Found auth"
    assert anchor["agent_id"] == "coder" and anchor["turn"] == 1
    (block,) = reader.blocks("conv-db")
    assert block["activity_label"] == "Exploring auth"
    assert block["batch_id"] == anchor["batch_id"]
    assert [s.name for s in exporter.get_finished_spans()] == ["Found auth", "Exploring auth"]


def test_ledger_url_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTENTRACE_LEDGER_URL", f"sqlite:///{tmp_path / 'env.db'}")
    setup = configure(provider=TracerProvider(), set_global=False)
    assert setup.ledger is not None
    setup.shutdown()
    monkeypatch.delenv("INTENTRACE_LEDGER_URL")
    setup = configure(provider=TracerProvider(), set_global=False)
    assert setup.ledger is None
    setup.shutdown()


def test_existing_provider_processors_added_later_are_wrapped_too() -> None:
    provider = TracerProvider()
    early = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(early))
    setup = configure(provider=provider, set_global=False, ledger=False)
    late = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(late))  # e.g. a client made afterwards
    assert len(setup.processor.processors) == 2
    with tool_call(
        "t", {"intent": "Doing it"}, tracer=provider.get_tracer("app"), label_bearing=True
    ):
        pass
    setup.force_flush()
    assert [s.name for s in early.get_finished_spans()] == ["Doing it"]
    assert [s.name for s in late.get_finished_spans()] == ["Doing it"]
    # configuring twice does not wrap twice
    again = configure(provider=provider, set_global=False, ledger=False)
    assert len(again.processor.processors) == 2
    assert not any(isinstance(p, IntentSpanProcessor) for p in again.processor.processors)
    setup.shutdown()


def test_otlp_only_when_the_standard_variables_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    # as in a fresh process: no global SDK provider (OpenTelemetry sets one once per process,
    # and a test run earlier may have)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    setup = configure(set_global=False, ledger=False)
    assert setup.processor.processors == ()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    setup = configure(set_global=False, ledger=False)
    (batch,) = setup.processor.processors
    assert type(batch).__name__ == "BatchSpanProcessor"
    setup.shutdown()


def test_configuration_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="naming must be 'intent' or 'stable'"):
        configure(naming="loud", provider=TracerProvider(), set_global=False)  # pyright: ignore[reportArgumentType]
    bad = tmp_path / "policy.toml"
    bad.write_text('[tools.x]\nargs = "shred"\n')
    with pytest.raises(PolicyError) as info:
        configure(policy=bad, provider=TracerProvider(), set_global=False)
    assert "\n" not in str(info.value)


def test_stable_naming_argument() -> None:
    exporter = InMemorySpanExporter()
    setup = configure(
        naming="stable",
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        processors=[SimpleSpanProcessor(exporter)],
    )
    with tool_call(
        "t", {"intent": "Doing it"}, tracer=setup.provider.get_tracer("a"), label_bearing=True
    ):
        pass
    setup.force_flush()
    (span,) = exporter.get_finished_spans()
    assert span.name == "execute_tool t"
    assert (span.attributes or {})[A.INTENT] == "Doing it"
    setup.shutdown()


def test_a_convention_of_your_own_through_configure() -> None:
    import json

    from tests.otel.test_processor_conventions import ACME
    from tracing import DEFAULT_CONVENTIONS

    exporter = InMemorySpanExporter()
    setup = configure(
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        processors=[SimpleSpanProcessor(exporter)],
        conventions=[ACME, *DEFAULT_CONVENTIONS],
    )
    tracer = setup.provider.get_tracer("acme")
    span = tracer.start_span("acme.step")
    span.set_attributes({
        "acme.kind": "tool",
        "acme.tool": "lookup",
        "acme.args": json.dumps({"intent": "Looking up Ada", "id": 7}),
        A.LABEL_BEARING: True,  # the tool had the intent injected
    })  # fmt: skip
    span.end()
    setup.force_flush()
    (done,) = exporter.get_finished_spans()
    assert done.name == "Looking up Ada"
    assert (done.attributes or {})[A.CONVENTION] == "acme"
    setup.shutdown()
