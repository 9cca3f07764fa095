"""CrewAI: a one-agent ``Crew`` with two tools, its LLM pointed at a loopback Chat Completions
endpoint (a scripted model), traced by OpenInference's CrewAI instrumentation (TOOL spans with
the args in ``input.value``), in the scenario of tests/support/frameworks.py."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.frameworks import (
    check,
    instrumented_run,
    read_file,
    scripted_openai_model,
    search_code,
)

# CrewAI's own telemetry and trace upload would reach for the network
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_DISABLE_TRACKING", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")


def test_crewai_crew_with_openinference(tmp_path: Path) -> None:
    from crewai import LLM, Agent, Crew, CrewOutput, Task
    from crewai.tools import tool
    from openinference.instrumentation.crewai import CrewAIInstrumentor

    with (
        instrumented_run(tmp_path, CrewAIInstrumentor()) as run,
        scripted_openai_model() as base_url,
    ):
        llm = LLM(model="openai/gpt-4o-mini", api_key="sk-test", base_url=base_url)
        agent = Agent(
            role="coder",
            goal="find the auth code",
            backstory="a code search agent",
            llm=llm,
            tools=[tool(search_code), tool(read_file)],
        )
        task = Task(description="find the auth code", expected_output="done", agent=agent)
        with run.session():
            result = Crew(agents=[agent], tasks=[task]).kickoff()
        assert isinstance(result, CrewOutput) and result.raw == "done"
        check(run.finish())
