"""OpenAI Agents SDK: an ``Agent`` with two function tools, its Chat Completions model pointed
at a loopback endpoint (a scripted model), traced by OpenInference's OpenAI Agents
instrumentation (the SDK's own traces as OpenTelemetry spans: TOOL spans named by the tool,
the args in ``input.value`` at their end), in the scenario of tests/support/frameworks.py.
The registry step passes the agent itself (``intent_tools=[agent]``: its tools)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support import frameworks as scenario
from tracing import IntentRegistry


def test_openai_agents_with_openinference(tmp_path: Path) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    with scenario.scripted_openai_model() as base_url:
        client = AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        agent = Agent(
            name="coder",
            model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
            tools=[function_tool(scenario.search_code), function_tool(scenario.read_file)],
        )
        # the instrumentor's processor replaces the SDK's own (which would post to OpenAI)
        with scenario.instrumented_run(
            tmp_path, OpenAIAgentsInstrumentor(), intent_tools=[agent]
        ) as run:
            with run.session():
                result = asyncio.run(Runner.run(agent, "find the auth code"))
            assert result.final_output == "done"
            registry = run.setup.registry
            assert isinstance(registry, IntentRegistry)
            assert set(scenario.INTENT_TOOLS) <= registry.names()
            assert "coder" not in registry  # the agent stands for its tools, not its name
            scenario.check(run.finish())
