"""Activity-label spans (the second label layer) reach Langfuse with a tag of their own, so the
family can be filtered (§11.3): ``activity-label`` by default, configurable like ``tool-intent``
(``IntentOptions(activity_tag=...)``, ``INTENTRACE_ACTIVITY_TAG``; empty or False: none).
Real OTLP bytes to a loopback receiver at a Langfuse path, read with the server's tag rule."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider

from tests.support.langfuse_server import langfuse_tags
from tests.support.otlp_receiver import OtlpReceiver, WireSpan
from tracing import IntentOptions, IntentRegistry, activity, configure, session, tool_call
from tracing import attributes as A
from tracing.environment_variables import INTENTRACE_ACTIVITY_TAG

LABEL = "Explored the auth flow"


def _export(options: IntentOptions | None = None) -> dict[str, WireSpan]:
    with OtlpReceiver() as rx:
        setup = configure(
            otlp=f"{rx.url}/api/public/otel/v1/traces",
            provider=TracerProvider(),
            set_global=False,
            ledger=False,
            registry=IntentRegistry(["search_code"]),
            options=options,
        )
        tracer = setup.provider.get_tracer("agent")
        with (
            session("conv-1", tracer=tracer),
            activity(LABEL, tracer=tracer),
            tool_call("search_code", {"intent": "Searching for OAuth"}, tracer=tracer),
        ):
            pass
        setup.force_flush()
        setup.shutdown()
        return {s.name: s for s in rx.wait_for_spans(2)}


def test_activity_spans_carry_their_own_tag() -> None:
    spans = _export()
    assert langfuse_tags(spans[LABEL].attributes) == [A.DEFAULT_ACTIVITY_TAG]
    assert langfuse_tags(spans["Searching for OAuth"].attributes) == [A.DEFAULT_LANGFUSE_TAG]


def test_the_tag_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    spans = _export(IntentOptions(activity_tag="second-layer"))
    assert langfuse_tags(spans[LABEL].attributes) == ["second-layer"]
    monkeypatch.setenv(INTENTRACE_ACTIVITY_TAG, "from-env")
    assert langfuse_tags(_export()[LABEL].attributes) == ["from-env"]
    assert langfuse_tags(_export(IntentOptions(activity_tag=False))[LABEL].attributes) == []
    monkeypatch.setenv(INTENTRACE_ACTIVITY_TAG, "")
    assert langfuse_tags(_export()[LABEL].attributes) == []
