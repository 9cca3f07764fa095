"""pydantic-ai: an ``Agent`` over a ``FunctionModel`` (the scripted model) with its own
OpenTelemetry instrumentation (GenAI semconv ``execute_tool`` spans with the args as start
attributes: named live), in the scenario of tests/support/frameworks.py. The failing call
raises ``ModelRetry`` (pydantic-ai's way for a tool to fail back to the model)."""

from __future__ import annotations

from pathlib import Path

from tests.support import frameworks as scenario


def test_pydantic_ai_agent(tmp_path: Path) -> None:
    from pydantic_ai import Agent, ModelRetry, Tool
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart(n, a, tool_call_id=i) for i, n, a in scenario.CALLS]
            )
        return ModelResponse(parts=[TextPart("done")])

    def read_file(intent: str, path: str) -> str:
        raise ModelRetry(f"{path} does not exist")

    tools = [Tool(scenario.search_code), Tool(read_file, max_retries=1)]
    with scenario.framework_run(tmp_path, intent_tools=tools) as run:
        settings = InstrumentationSettings(tracer_provider=run.provider)
        agent = Agent(
            FunctionModel(model), tools=tools, capabilities=[Instrumentation(settings=settings)]
        )
        with run.session():
            assert agent.run_sync("find the auth code").output == "done"
        # pydantic-ai's spans carry logfire.msg ("running tool: search_code"), which the Langfuse
        # server names an observation by when there is no gen_ai.tool.name: the copy for
        # Langfuse carries the label there
        scenario.check(run.finish())
        # (read once the processor's thread has handled every start: finish() flushes it)
        assert run.setup.processor.stats()["named_at_start"] == 3
