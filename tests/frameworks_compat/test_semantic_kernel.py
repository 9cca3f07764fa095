"""Semantic Kernel: a ``ChatCompletionAgent`` whose kernel holds the tools as a plugin, its
OpenAI chat service pointed at a loopback Chat Completions endpoint (a scripted model), traced
by Semantic Kernel's own GenAI-semconv instrumentation (``execute_tool <plugin>-<function>``
spans; the arguments and result only with its sensitive diagnostics on), in the scenario of
tests/support/frameworks.py. The tools are named ``<plugin>-<function>`` everywhere (the model's
calls, the spans, the ledger); the registry step takes the plugin's functions."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.frameworks import (
    FrameworkRun,
    check,
    framework_run,
    read_file,
    scripted_openai_model,
    search_code,
)

PLUGIN = "code"


def code_plugin() -> Any:
    """The scenario's tools as a Semantic Kernel plugin."""
    from semantic_kernel.functions import KernelPlugin, kernel_function

    class CodePlugin:
        @kernel_function(name="search_code", description="Search the code base.")
        def search_code(self, intent: str, query: str) -> str:
            return search_code(intent, query)

        @kernel_function(name="read_file", description="Read one file.")
        def read_file(self, intent: str, path: str) -> str:
            return read_file(intent, path)

    return KernelPlugin.from_object(PLUGIN, CodePlugin())


async def respond(agent: Any, message: str) -> Any:
    return await agent.get_response(messages=message)


@dataclass
class SKRun:
    fw: FrameworkRun
    plugin: Any


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SKRun]:
    from semantic_kernel.utils.telemetry.model_diagnostics import function_tracer

    # what SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true gives (read
    # once, at import): the tool spans carry the arguments and the result
    monkeypatch.setattr(
        function_tracer.MODEL_DIAGNOSTICS_SETTINGS, "enable_otel_diagnostics_sensitive", True
    )
    # the module (`semantic_kernel.functions.kernel_function` is its decorator once imported)
    sk_function = importlib.import_module("semantic_kernel.functions.kernel_function")
    plugin = code_plugin()
    # the registry step: the plugin's functions (each by `<plugin>-<function>` too)
    with framework_run(tmp_path, intent_tools=list(plugin)) as fw:
        # Semantic Kernel traces on the global provider, which a user's configure() sets
        monkeypatch.setattr(sk_function, "tracer", fw.provider.get_tracer(sk_function.__name__))
        yield SKRun(fw, plugin)


def test_semantic_kernel_agent_with_genai_semconv(run: SKRun) -> None:
    from openai import AsyncOpenAI
    from semantic_kernel import Kernel
    from semantic_kernel.agents import ChatCompletionAgent
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion

    with scripted_openai_model(tool_prefix=f"{PLUGIN}-") as base_url:
        client = AsyncOpenAI(api_key="sk-test", base_url=base_url)
        service = OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client)
        kernel = Kernel()
        kernel.add_plugin(run.plugin)
        agent = ChatCompletionAgent(kernel=kernel, service=service, name="coder")
        with run.fw.session():
            reply = asyncio.run(respond(agent, "find the auth code"))
    assert str(reply.content) == "done"
    check(run.fw.finish(), tool_prefix=f"{PLUGIN}-")
