"""Google ADK (``google-adk`` 1.14, its own GenAI-semconv tracing): an ``LlmAgent`` over a
scripted model (a ``BaseLlm`` asking for the scenario's three calls at once, then ``done``; no
network), its tools run concurrently by ADK, in the scenario of tests/support/frameworks.py.

ADK's ``execute_tool <tool>`` spans start with no attributes and get everything at their end
(``gen_ai.operation.name=execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, the args
in ``gcp.vertex.agent.tool_call_args`` and the result in ``gcp.vertex.agent.tool_response``): the
calls are recognised and named at settle. A raising tool ends ADK's run unless a plugin's
``on_tool_error_callback`` turns the error into a response; the plugin here also marks the tool
span failed (the recipe of docs/tracing.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from tests.support.frameworks import (
    CALLS,
    FAILING,
    OUTCOMES,
    SESSION,
    FrameworkRun,
    check,
    framework_run,
    search_result,
)
from tracing import attributes as A

# the modules of google-adk 1.14 that bind ADK's tracer at import (from the global provider)
_TRACER_MODULES = (
    "google.adk.telemetry",
    "google.adk.agents.base_agent",
    "google.adk.flows.llm_flows.base_llm_flow",
    "google.adk.flows.llm_flows.functions",
    "google.adk.runners",
)


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FrameworkRun]:
    import importlib

    with framework_run(tmp_path) as fw:
        # ADK takes its tracer from the global provider (configure() sets it; tests do not)
        tracer = fw.provider.get_tracer("gcp.vertex.agent")
        for name in _TRACER_MODULES:
            monkeypatch.setattr(importlib.import_module(name), "tracer", tracer)
        yield fw


def search_code(intent: str, query: str) -> dict[str, Any]:
    """Search the code base."""
    # a dict: ADK wraps any other return value as {"result": ...}
    return search_result(query)


def read_file(intent: str, path: str) -> dict[str, Any]:
    """Read one file."""
    raise FileNotFoundError(path)


def _drive(fw: FrameworkRun, *, plugins: list[Any]) -> list[Any]:
    """The agent's run in the scenario's session; the events it yields."""
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.models import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    class ScriptedModel(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            answered = any(
                p.function_response is not None for c in llm_request.contents for p in c.parts or ()
            )
            if answered:
                parts = [types.Part(text="done")]
            else:
                parts = [
                    types.Part(function_call=types.FunctionCall(id=i, name=n, args=dict(a)))
                    for i, n, a in CALLS
                ]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    agent = LlmAgent(name="coder", model=ScriptedModel(), tools=[search_code, read_file])
    app = App(name="frameworks", root_agent=agent, plugins=plugins)
    runner = Runner(app=app, session_service=InMemorySessionService())

    async def main() -> list[Any]:
        adk = await runner.session_service.create_session(app_name="frameworks", user_id="u1")
        message = types.Content(role="user", parts=[types.Part(text="find the auth code")])
        return [
            event
            async for event in runner.run_async(
                user_id="u1", session_id=adk.id, new_message=message
            )
        ]

    with fw.session():
        return asyncio.run(main())


def _error_plugin() -> Any:
    from google.adk.plugins import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext

    class ToolErrors(BasePlugin):
        """A failing tool's error goes back to the model, and its span says it failed."""

        async def on_tool_error_callback(
            self,
            *,
            tool: BaseTool,
            tool_args: dict[str, Any],
            tool_context: ToolContext,
            error: Exception,
        ) -> dict[str, Any] | None:
            span = trace.get_current_span()  # the tool's execute_tool span
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            return {"error": f"{type(error).__name__}: {error}"}

    return ToolErrors(name="tool_errors")


def test_adk_agent_with_its_own_tracing(run: FrameworkRun) -> None:
    events = _drive(run, plugins=[_error_plugin()])
    final = events[-1].content.parts[0].text
    assert final == "done", events[-1]
    got = run.finish()
    check(got)
    # ADK's `execute_tool (merged)` span (the parallel responses again, for its web UI) is
    # exported as it is, and is no call
    assert "execute_tool (merged)" in [s.name for s in got.all_otlp]
    assert len(got.anchors) == 3


def test_a_raising_tool_without_a_plugin_ends_adks_run(run: FrameworkRun) -> None:
    # ADK (1.14) re-raises a tool's exception out of the run when no plugin handles it; the
    # failed tool's span then ends before ADK set any attribute (no tool name, no args): it is
    # exported as `execute_tool read_file` with an ERROR status and no ledger row. The calls
    # that completed are named as usual.
    with pytest.raises(FileNotFoundError):
        _drive(run, plugins=[])
    got = run.finish()
    assert not got.internal_errors, got.internal_errors
    assert sorted(s.name for s in got.otlp) == sorted(OUTCOMES.values())
    (failed,) = [s for s in got.all_otlp if s.name == "execute_tool read_file"]
    assert failed.status_code == 2 and A.TOOL_CALL_ID not in failed.attributes
    assert FAILING[0] not in str(failed.attributes)
    rows = sorted((a["intent"], a["tool_name"], a["status"], a["session_id"]) for a in got.anchors)
    assert rows == sorted((i, "search_code", "success", SESSION) for i in OUTCOMES)
