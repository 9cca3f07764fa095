"""Real agent frameworks, no network: a pydantic-ai agent (FunctionModel) and a LangGraph agent
(a fake chat model + OpenInference's LangChain instrumentation), each calling an
intent-carrying tool twice in parallel with different intents and once with a failure."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tracing import IntentRegistry
from tracing import attributes as A
from tracing.testing import Capture, capture

CALLS = [
    ("c1", "search_code", {"intent": "Searching for OAuth handling", "query": "oauth"}),
    ("c2", "search_code", {"intent": "Searching for MCP wiring", "query": "mcp"}),
    ("c3", "read_file", {"intent": "Reading the missing router", "path": "nope.py"}),
]
# framework users whose tool functions declare `intent` themselves register those names
REGISTRY = IntentRegistry(["search_code", "read_file"])


def _tool_spans(cap: Capture) -> dict[str, dict[str, Any]]:
    """The exported tool spans by provider call id: found by our own ``intentrace.tool_call_id``
    (the anchor id), since a copy gains no ``gen_ai.tool.call.id`` its span did not have."""
    spans = {
        s["attributes"][A.TOOL_CALL_ID]: s for s in cap.dicts() if A.TOOL_CALL_ID in s["attributes"]
    }
    return {key: spans[a["tool_call_id"]] for key, a in cap.calls().items()}


def _check(cap: Capture) -> None:
    spans = _tool_spans(cap)
    anchors = cap.calls()
    cap.assert_no_internal_errors()
    assert spans["c1"]["name"] == "Found 2 results for oauth"
    assert spans["c2"]["name"] == "Found 2 results for mcp"
    assert spans["c3"]["name"] == "Reading the missing router · failed"
    assert spans["c1"]["attributes"][A.INTENT] == "Searching for OAuth handling"
    assert spans["c2"]["attributes"][A.INTENT] == "Searching for MCP wiring"
    assert spans["c3"]["status"] == "ERROR"
    assert {k: a["status"] for k, a in anchors.items()} == {
        "c1": "success",
        "c2": "success",
        "c3": "error",
    }
    # the two parallel calls are siblings of one model step
    assert anchors["c1"]["batch_id"] == anchors["c2"]["batch_id"]
    assert cap.processor.stats()["named_at_start"] == 3


def test_pydantic_ai_agent() -> None:
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in CALLS]
            )
        return ModelResponse(parts=[TextPart("done")])

    with capture(registry=REGISTRY) as cap:
        settings = InstrumentationSettings(tracer_provider=cap.provider)
        agent = Agent(FunctionModel(model), capabilities=[Instrumentation(settings=settings)])

        @agent.tool_plain
        def search_code(intent: str, query: str) -> dict[str, Any]:
            return {"hits": 2, "outcome": f"Found 2 results for {query}"}

        @agent.tool_plain(retries=1)
        def read_file(intent: str, path: str) -> str:
            raise ModelRetry(f"{path} does not exist")

        assert agent.run_sync("find the auth code").output == "done"
        _check(cap)


class _Instrumented:
    def __init__(self, cap: Capture) -> None:
        from openinference.instrumentation.langchain import LangChainInstrumentor

        self.instrumentor = LangChainInstrumentor()
        self.cap = cap

    def __enter__(self) -> None:
        self.instrumentor.instrument(tracer_provider=self.cap.provider)

    def __exit__(self, *exc: object) -> None:
        self.instrumentor.uninstrument()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_agent_with_openinference() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode, create_react_agent

    class FakeChatModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    @tool
    def search_code(intent: str, query: str) -> str:
        """Search the code base."""
        return json.dumps({"hits": 2, "outcome": f"Found 2 results for {query}"})

    @tool
    def read_file(intent: str, path: str) -> str:
        """Read one file."""
        raise FileNotFoundError(path)

    replies = iter(
        [
            AIMessage(
                content="",
                tool_calls=[{"name": n, "args": a, "id": cid} for cid, n, a in CALLS],
            ),
            AIMessage(content="done"),
        ]
    )
    with capture(registry=REGISTRY) as cap, _Instrumented(cap):
        agent = create_react_agent(
            FakeChatModel(messages=replies),
            ToolNode([search_code, read_file], handle_tool_errors=True),
        )
        result = agent.invoke({"messages": [("user", "find the auth code")]})
        assert result["messages"][-1].content == "done"
        _check(cap)
