"""OpenLLMetry (Traceloop): a LangGraph ReAct agent (a scripted chat model) traced by
Traceloop's LangChain instrumentation (``traceloop.span.kind=tool`` spans with
``traceloop.entity.input``), in the scenario of tests/support/frameworks.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.frameworks import (
    FAILING,
    SEARCHES,
    Exported,
    FrameworkRun,
    assert_args_stripped,
    check,
    framework_run,
    search_result,
)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[FrameworkRun]:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    with framework_run(tmp_path) as fw:
        instrumentor = LangchainInstrumentor()
        instrumentor.instrument(tracer_provider=fw.provider)
        try:
            yield fw
        finally:
            instrumentor.uninstrument()


def _drive(run: FrameworkRun) -> Exported:
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
        return json.dumps(search_result(query))

    @tool
    def read_file(intent: str, path: str) -> str:
        """Read one file."""
        raise FileNotFoundError(path)

    calls = [
        *(
            {"name": "search_code", "args": {"intent": i, "query": q}, "id": f"c{n}"}
            for n, (i, q) in enumerate(SEARCHES)
        ),
        {"name": "read_file", "args": {"intent": FAILING[0], "path": FAILING[1]}, "id": "c9"},
    ]
    replies = iter([AIMessage(content="", tool_calls=calls), AIMessage(content="done")])
    agent = create_react_agent(
        FakeChatModel(messages=replies),
        ToolNode([search_code, read_file], handle_tool_errors=True),
    )
    with run.session():
        result = agent.invoke({"messages": [("user", "find the auth code")]})
    assert result["messages"][-1].content == "done"
    return run.finish()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.xfail(
    strict=False,
    reason="passes alone; once, late in the full suite, a copy lacked intentrace.intent "
    "(order or timing dependent, not investigated yet)",
)
def test_langgraph_agent_with_traceloop_langchain(run: FrameworkRun) -> None:
    # one agent run per module: a second instrumented run in the same process did not show the
    # gap below (why is not investigated)
    got = _drive(run)
    check(got, args_stripped=False)
    # A known gap, kept visible: the ledger's args keep the intent (Traceloop's entity input
    # holds the args under `inputs` and as a Python repr in `input_str`, which the wrapped-args
    # rule does not strip). When this fails the gap is closed: drop args_stripped=False.
    with pytest.raises(AssertionError):
        assert_args_stripped(got)
