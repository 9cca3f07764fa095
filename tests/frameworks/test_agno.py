"""Agno: an ``Agent`` with two tools, its OpenAI model pointed at a loopback Chat Completions
endpoint (a scripted model), traced by OpenInference's Agno instrumentation (TOOL spans with
the args in ``input.value`` from their start), in the scenario of tests/support/frameworks.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.frameworks import (
    FrameworkRun,
    check,
    instrumented_run,
    read_file,
    scripted_openai_model,
    search_code,
)


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FrameworkRun]:
    import openinference.instrumentation.agno as oi_agno
    from agno.models.openai import OpenAIChat
    from openinference.instrumentation.agno import AgnoInstrumentor

    # the instrumentor imports every module of agno.models (each provider's SDK: ~15 s here) to
    # find the Model classes it wraps; this test's model is OpenAIChat, so it is given that one
    monkeypatch.setattr(oi_agno, "find_model_subclasses", lambda: [OpenAIChat])
    with instrumented_run(tmp_path, AgnoInstrumentor()) as fw:
        yield fw


def test_agno_agent_with_openinference(run: FrameworkRun) -> None:
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat

    with scripted_openai_model() as base_url:
        model = OpenAIChat(id="gpt-4o-mini", api_key="sk-test", base_url=base_url)
        agent = Agent(model=model, tools=[search_code, read_file])
        with run.session():
            reply = asyncio.run(agent.arun("find the auth code"))
    assert reply.content == "done"
    check(run.finish())
