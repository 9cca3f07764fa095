"""AutoGen AgentChat: an ``AssistantAgent`` with two tools, its OpenAI model client pointed at a
loopback Chat Completions endpoint (a scripted model), traced by OpenInference's AutoGen
AgentChat instrumentation (TOOL spans with the call's arguments in ``input.value``; the agent
runs the parallel calls concurrently), in the scenario of tests/support/frameworks.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.frameworks import (
    check,
    instrumented_run,
    read_file,
    scripted_openai_model,
    search_code,
)


def test_autogen_assistant_agent_with_openinference(tmp_path: Path) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.messages import TextMessage
    from autogen_ext.models.openai import OpenAIChatCompletionClient
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    with (
        instrumented_run(tmp_path, AutogenAgentChatInstrumentor()) as run,
        scripted_openai_model() as base_url,
    ):
        client = OpenAIChatCompletionClient(
            model="gpt-4o-mini",
            api_key="sk-test",
            base_url=base_url,
            model_info={
                "vision": False,
                "function_calling": True,
                "json_output": False,
                "family": "gpt-4o",
                "structured_output": False,
            },
        )
        # reflect_on_tool_use: the model gets the results and answers (the scripted `done`)
        agent = AssistantAgent(
            "coder", model_client=client, tools=[search_code, read_file], reflect_on_tool_use=True
        )
        with run.session():
            result = asyncio.run(agent.run(task="find the auth code"))
        final = result.messages[-1]
        assert isinstance(final, TextMessage) and final.content == "done"
        # its instrumentation sets the tool span OK before ERROR for a failed call (0.1.22), and the
        # SDK keeps the first OK: the failure never reaches the span
        check(run.finish(), failure_on_span=False)
