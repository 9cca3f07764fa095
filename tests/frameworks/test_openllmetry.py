"""OpenLLMetry (Traceloop): a LangGraph ReAct agent (a scripted chat model) traced by
Traceloop's LangChain instrumentation (``traceloop.span.kind=tool`` spans with
``traceloop.entity.input``), in the scenario of tests/support/frameworks.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.frameworks import (
    FrameworkRun,
    check,
    instrumented_run,
    run_langgraph_agent,
    undo_patches,
)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[FrameworkRun]:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    # LangchainInstrumentor.uninstrument() (0.62) leaves its wrappers (undo_patches says why)
    with (
        undo_patches("langchain_core", "langchain", "langgraph"),
        instrumented_run(tmp_path, LangchainInstrumentor()) as fw,
    ):
        yield fw


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langgraph_agent_with_traceloop_langchain(run: FrameworkRun) -> None:
    # Traceloop's tool input is {"input_str": "<the args as a Python repr>", "inputs": {args},
    # "kwargs": {...}, "tags": ..., "metadata": ...}: the intent is read from `inputs` by the
    # wrapped-args rule and the ledger's args keep it neither there nor in `input_str`
    check(run_langgraph_agent(run))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("attempt", range(4))
def test_parallel_calls_keep_their_own_intents(run: FrameworkRun, attempt: int) -> None:
    # ToolNode starts the two parallel search_code calls in either order; the model span's
    # listed calls are matched to tool spans by order, so a run whose calls started the other
    # way round used to name each call by the other's intent (1 run in 5 here) until the tool
    # span's own args (Traceloop's `inputs`) were read
    check(run_langgraph_agent(run))


def test_langchain_is_as_it_was_after_a_run() -> None:
    # (runs after the tests above: the fixture's teardown put the classes back)
    import wrapt
    from langchain_core.callbacks import BaseCallbackManager

    assert not isinstance(vars(BaseCallbackManager)["__init__"], wrapt.BaseObjectProxy)
