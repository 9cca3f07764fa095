"""LangChain/LangGraph: a LangGraph ReAct agent (a scripted chat model) traced by OpenInference's
LangChain instrumentation (TOOL spans that start with no attributes, named at start from the
calls the model span listed, their args in ``input.value`` at settle), in the scenario of
tests/support/frameworks.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.frameworks import FrameworkRun, check, instrumented_run, run_langgraph_agent


@pytest.fixture
def run(tmp_path: Path) -> Iterator[FrameworkRun]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    with instrumented_run(tmp_path, LangChainInstrumentor()) as fw:
        yield fw


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_agent_with_openinference(run: FrameworkRun) -> None:
    check(run_langgraph_agent(run))
    # each live span was named from its start (the model span listed the calls first); read
    # once finish() (in run_langgraph_agent) flushed the processor's thread
    assert run.setup.processor.stats()["named_at_start"] == 3
