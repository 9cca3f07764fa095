"""DSPy: a ``Predict`` whose signature outputs ``dspy.ToolCalls`` (native function calling) over
an LM pointed at a loopback OpenAI Chat Completions endpoint (a scripted model, through
litellm); the app runs the calls it got, the two searches at once, through ``dspy.Tool``.
Traced by OpenInference's DSPy instrumentation (TOOL spans ``<tool>.acall`` with the args
in ``input.value`` as ``{"kwargs": {...}}`` from their start), in the scenario of
tests/support/frameworks.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import frameworks as scenario
from tests.support.frameworks import FrameworkRun


@pytest.fixture
def run(tmp_path: Path) -> Iterator[FrameworkRun]:
    from openinference.instrumentation.dspy import DSPyInstrumentor

    with scenario.instrumented_run(tmp_path, DSPyInstrumentor()) as fw:
        yield fw


def test_dspy_tool_calls_with_openinference(run: FrameworkRun) -> None:
    import dspy

    tools = {t.name: t for t in (dspy.Tool(scenario.search_code), dspy.Tool(scenario.read_file))}

    async def call(name: str, args: dict[str, Any]) -> Any:
        try:
            return await tools[name].acall(**args)
        except FileNotFoundError as exc:
            return exc

    with scenario.scripted_openai_model() as base_url:
        lm = dspy.LM("openai/gpt-4o-mini", api_base=base_url, api_key="sk-test", cache=False)
        adapter = dspy.ChatAdapter(use_native_function_calling=True)
        with run.session(), dspy.context(lm=lm, adapter=adapter):
            plan = dspy.Predict("question: str, tools: list[dspy.Tool] -> calls: dspy.ToolCalls")(
                question="find the auth code", tools=list(tools.values())
            )
            calls = plan.calls.tool_calls
            searches, failing = calls[:2], calls[2]

            async def main() -> list[Any]:
                both = await asyncio.gather(*(call(c.name, c.args) for c in searches))
                return [*both, await call(failing.name, failing.args)]

            results = asyncio.run(main())
    assert [type(r).__name__ for r in results] == ["str", "str", "FileNotFoundError"]
    scenario.check(run.finish())
