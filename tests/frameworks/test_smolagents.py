"""smolagents: a ``ToolCallingAgent`` with two ``@tool``s, its ``OpenAIServerModel`` pointed at
a loopback Chat Completions endpoint (a scripted model that ends the run by calling
``final_answer``), traced by OpenInference's smolagents instrumentation (TOOL spans with
``tool.name`` and the args in ``input.value`` as ``{"args": [], "sanitize_inputs_outputs":
true, "kwargs": {...}}`` from their start), in the scenario of tests/support/frameworks.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import frameworks as scenario
from tests.support.frameworks import FrameworkRun


@pytest.fixture
def run(tmp_path: Path) -> Iterator[FrameworkRun]:
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    # its uninstrument() leaves the wrappers of some model classes' generate (0.1.43)
    with (
        scenario.undo_patches("smolagents"),
        scenario.instrumented_run(tmp_path, SmolagentsInstrumentor()) as fw,
    ):
        yield fw


def _tools() -> list[Any]:
    from smolagents import tool

    @tool
    def search_code(intent: str, query: str) -> str:
        """Search the code base.

        Args:
            intent: why the call is made.
            query: what to look for.
        """
        return json.dumps(scenario.search_result(query))

    @tool
    def read_file(intent: str, path: str) -> str:
        """Read one file.

        Args:
            intent: why the call is made.
            path: the file.
        """
        raise FileNotFoundError(path)

    return [search_code, read_file]


def test_smolagents_tool_calling_agent_with_openinference(run: FrameworkRun) -> None:
    from smolagents import OpenAIServerModel, ToolCallingAgent

    with scenario.scripted_openai_model(final_tool="final_answer") as base_url:
        model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=base_url, api_key="sk-test")
        agent = ToolCallingAgent(tools=_tools(), model=model, max_steps=3, verbosity_level=0)
        with run.session():
            answer = agent.run("find the auth code")
    assert answer == "done"
    scenario.check(scenario.without_tool(run.finish(), "final_answer"))


def test_smolagents_is_as_it_was_after_a_run() -> None:
    # (runs after the test above: the fixture's teardown put the classes back)
    import smolagents.models
    import wrapt

    for cls in (smolagents.models.ApiModel, smolagents.models.AzureOpenAIModel):
        assert not isinstance(vars(cls).get("generate"), wrapt.BaseObjectProxy)
