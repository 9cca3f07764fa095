"""``tool_call`` strips the intent by the registry the tracer's ``configure`` was given, not
only by ``default_registry()`` (so ``search_code(**c.args)`` works)."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing import IntentRegistry, configure, default_registry, inject_intent, tool, tool_call
from tracing import attributes as A

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_code",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]


def search_code(query: str) -> str:
    return f"results for {query}"


def test_the_configured_registry_strips_and_names() -> None:
    registry = IntentRegistry()
    inject_intent(TOOLS, registry=registry)
    assert not default_registry().is_label_bearing("search_code")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    setup = configure(provider=provider, registry=registry, ledger=False, set_global=False)
    setup.processor.add_processor(SimpleSpanProcessor(exporter))
    tracer = setup.provider.get_tracer("app")
    args = json.dumps({"intent": "Searching for OAuth handling", "query": "oauth"})
    with tool_call("search_code", args, tracer=tracer) as c:
        assert (c.label_bearing, c.intent) == (True, "Searching for OAuth handling")
        assert c.args == {"query": "oauth"}
        c.set_result(search_code(**c.args))
    setup.force_flush()
    (span,) = exporter.get_finished_spans()
    assert span.name == "Searching for OAuth handling"
    assert (span.attributes or {})[A.INTENT] == "Searching for OAuth handling"
    setup.shutdown()


def test_an_explicit_registry_and_the_decorator() -> None:
    registry = IntentRegistry(["search_code", "search"])
    args = {"intent": "Looking", "query": "q"}
    with tool_call("search_code", args, registry=registry) as c:
        assert c.args == {"query": "q"}
    with tool_call("search_code", args, registry=IntentRegistry()) as c:
        assert c.args == args  # not ours by that registry: a business parameter stays

    @tool(registry=registry)
    def search(query: str) -> str:
        return query

    assert search(intent="Looking", query="q") == "q"  # pyright: ignore[reportCallIssue]
