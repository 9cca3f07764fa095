"""One scenario for every agent framework test (tests/frameworks): the model asks for two
intent-carrying ``search_code`` calls in parallel and one ``read_file`` call that fails.

``framework_run`` sets tracing up the way a user does (``configure``) with three real
destinations: OTLP/HTTP protobuf to a loopback receiver, the real Langfuse SDK posting to the
same receiver, and a SQLite ledger. ``FrameworkRun.finish()`` flushes everything and returns
what each destination holds; ``check`` compares it with what a user should see:

* the exported copy's names: the outcome for the two successes, ``<intent> · failed``;
* the Langfuse view of the copy (the server's own rules, tests/support/langfuse_server.py):
  that name, type TOOL, the session, the ``tool-intent`` tag;
* the ledger rows: intent, tool, status, session, the batch of the two parallel calls;
* no internal errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wrapt
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from tests.support.langfuse_server import (
    langfuse_name,
    langfuse_session,
    langfuse_tags,
    langfuse_type,
)
from tests.support.otlp_receiver import OtlpReceiver, WireSpan
from tests.support.sse import SSEServer
from tracing import TracingSetup, configure, default_registry, session
from tracing import attributes as A
from tracing.anchor import Anchor
from tracing.ledger import Ledger, open_ledger

# litellm (under DSPy; imported by Agno's model scan) fetches its price list from the network
# unless told not to
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SESSION = "conv-frameworks"
AGENT = "coder"
LANGFUSE_PATH = "/api/public/otel/v1/traces"
OTLP_PATH = "/v1/traces"

SEARCHES = [
    ("Searching for OAuth handling", "oauth"),
    ("Searching for MCP wiring", "mcp"),
]
FAILING = ("Reading the missing router", "nope.py")
# framework users whose tool functions declare `intent` themselves register those names
INTENT_TOOLS = ["search_code", "read_file"]

OUTCOMES = {intent: f"Found 2 results for {query}" for intent, query in SEARCHES}
FAILED_NAME = f"{FAILING[0]} · failed"


CALLS: list[tuple[str, str, dict[str, str]]] = [
    *((f"call_{n}", "search_code", {"intent": i, "query": q}) for n, (i, q) in enumerate(SEARCHES)),
    ("call_9", "read_file", {"intent": FAILING[0], "path": FAILING[1]}),
]
"""The scenario's calls as the model asks for them: (call id, tool, arguments)."""


def chat_completion(message: dict[str, Any], finish_reason: str) -> bytes:
    """An OpenAI Chat Completions response body (not streamed), as the API sends it."""
    body = {
        "id": "chatcmpl-frameworks",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
    return json.dumps(body).encode()


@contextlib.contextmanager
def scripted_openai_model(final_tool: str | None = None, tool_prefix: str = "") -> Iterator[str]:
    """The scripted model behind a loopback OpenAI Chat Completions endpoint (its base URL,
    ``.../v1``, is yielded): one response asking for the scenario's three calls at once, then
    the final answer ``done`` (as a call of ``final_tool`` with ``{"answer": "done"}`` for
    frameworks that end a run by a tool); ``tool_prefix`` goes before the tool names (Semantic
    Kernel's ``<plugin>-``)."""
    tool_calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": tool_prefix + n, "arguments": json.dumps(a)},
        }
        for i, n, a in CALLS
    ]
    final: dict[str, Any] = {"role": "assistant", "content": "done"}
    if final_tool is not None:
        answer = {"name": final_tool, "arguments": json.dumps({"answer": "done"})}
        final = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_final", "type": "function", "function": answer}],
        }
    server = SSEServer().start()
    try:
        for message, finish in (
            ({"role": "assistant", "content": None, "tool_calls": tool_calls}, "tool_calls"),
            (final, "stop" if final_tool is None else "tool_calls"),
        ):
            server.respond([chat_completion(message, finish)], content_type="application/json")
        yield f"{server.url}/v1"
    finally:
        server.stop()


def search_result(query: str) -> dict[str, Any]:
    """What the ``search_code`` tool of every framework returns (its outcome names the call)."""
    return {"hits": 2, "outcome": f"Found 2 results for {query}"}


def search_code(intent: str, query: str) -> str:
    """Search the code base."""
    return json.dumps(search_result(query))


def read_file(intent: str, path: str) -> str:
    """Read one file."""
    raise FileNotFoundError(path)


@dataclass(frozen=True)
class Exported:
    """What reached each destination, the tool calls only."""

    otlp: list[WireSpan]
    langfuse: list[WireSpan]
    anchors: list[Anchor]
    internal_errors: list[tuple[str, str]]
    all_otlp: list[WireSpan]


def without_tool(got: Exported, tool: str) -> Exported:
    """``got`` less the calls of ``tool`` (a framework's own tool, e.g. smolagents'
    ``final_answer``), which must be there once, unnamed (not label-bearing)."""
    rows = [a for a in got.anchors if a["tool_name"] == tool]
    assert len(rows) == 1 and rows[0]["intent"] is None, rows

    def others(spans: list[WireSpan]) -> list[WireSpan]:
        return [s for s in spans if s.attributes.get(A.TOOL_NAME) != tool]

    return dataclasses.replace(
        got,
        otlp=others(got.otlp),
        langfuse=others(got.langfuse),
        anchors=[a for a in got.anchors if a["tool_name"] != tool],
    )


def _tool_spans(spans: list[WireSpan]) -> list[WireSpan]:
    return sorted((s for s in spans if A.TOOL_CALL_ID in s.attributes), key=lambda s: s.name)


@dataclass
class FrameworkRun:
    rx: OtlpReceiver
    provider: TracerProvider
    setup: TracingSetup
    ledger: Ledger

    def session(self) -> contextlib.AbstractContextManager[Any]:
        """The conversation the framework's calls belong to, and its turn's span (on the run's
        provider: a user's ``configure()`` makes that provider the global one, the tests do
        not)."""
        return session(SESSION, agent_id=AGENT, turn=1, tracer=self.provider.get_tracer("app"))

    def finish(self) -> Exported:
        """Flush every destination (the exporters post synchronously in a flush)."""
        assert self.setup.force_flush()
        assert self.ledger.flush(10.0)
        return Exported(
            otlp=_tool_spans(self.rx.spans(OTLP_PATH)),
            langfuse=_tool_spans(self.rx.spans(LANGFUSE_PATH)),
            anchors=sorted(self.ledger.session_anchors(SESSION), key=lambda a: a["label"]),
            internal_errors=self.setup.processor.internal_errors(),
            all_otlp=self.rx.spans(OTLP_PATH),
        )


@contextlib.contextmanager
def framework_run(tmp_path: Path, intent_tools: Any = INTENT_TOOLS) -> Iterator[FrameworkRun]:
    """Tracing configured as a user would, exporting to a loopback receiver and a ledger;
    ``intent_tools`` is the registry step (names, or the framework's tool or agent objects)."""
    key = uuid.uuid4().hex[:12]
    with OtlpReceiver() as rx:
        ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
        provider = TracerProvider()
        setup = configure(
            provider=provider,
            set_global=False,
            ledger=ledger,
            intent_tools=intent_tools,  # the registry step (a registry of this setup's own)
            exporters=[OTLPSpanExporter(endpoint=rx.traces_url)],
            langfuse={
                "public_key": f"pk-lf-{key}",
                "secret_key": f"sk-lf-{key}",
                "base_url": rx.url,
                "flush_interval": 0.1,
            },
        )
        assert not set(INTENT_TOOLS) & default_registry().names()  # the process-wide one stays
        try:
            yield FrameworkRun(rx=rx, provider=provider, setup=setup, ledger=ledger)
        finally:
            if setup.langfuse is not None:
                setup.langfuse.shutdown()
            setup.shutdown()


def run_langgraph_agent(run: FrameworkRun) -> Exported:
    """A LangGraph ReAct agent over a scripted LangChain chat model (the scenario's three calls
    in one step, then ``done``), its tools run by a ``ToolNode`` (the two searches at once);
    invoked in the run's session. Returns what the destinations got."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode, create_react_agent

    class FakeChatModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    calls = [{"name": n, "args": a, "id": i} for i, n, a in CALLS]
    replies = iter([AIMessage(content="", tool_calls=calls), AIMessage(content="done")])
    agent = create_react_agent(
        FakeChatModel(messages=replies),
        ToolNode([tool(search_code), tool(read_file)], handle_tool_errors=True),
    )
    with run.session():
        result = agent.invoke({"messages": [("user", "find the auth code")]})
    assert result["messages"][-1].content == "done"
    return run.finish()


def _patchable(prefixes: tuple[str, ...]) -> dict[tuple[type, str], Any]:
    """Every class attribute of the loaded modules under ``prefixes``."""
    found: dict[tuple[type, str], Any] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(prefixes):
            continue
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and cls.__module__ == name:
                for attr, value in list(vars(cls).items()):
                    found[(cls, attr)] = value
    return found


@contextlib.contextmanager
def undo_patches(*prefixes: str) -> Iterator[None]:
    """Put the classes of the modules under ``prefixes`` back as they were: an instrumentor
    whose ``uninstrument()`` leaves its wrappers in place (Traceloop's OpenLLMetry 0.62 names
    the module to unwrap as the class: its LangChain callback wrapper stays, so a later run
    sends every span to the first provider, and its OpenAI wrappers stay on the client) must
    not change what later tests of the process run."""
    before = _patchable(prefixes)
    try:
        yield
    finally:
        for (cls, attr), value in _patchable(prefixes).items():
            if (cls, attr) in before:
                if before[(cls, attr)] is not value:
                    setattr(cls, attr, before[(cls, attr)])
            elif isinstance(value, wrapt.BaseObjectProxy):  # wrapped in a module loaded since
                inner: Any = value
                while isinstance(inner, wrapt.BaseObjectProxy):
                    inner = inner.__wrapped__
                setattr(cls, attr, inner)


@contextlib.contextmanager
def instrumented_run(
    tmp_path: Path, instrumentor: Any, intent_tools: Any = INTENT_TOOLS
) -> Iterator[FrameworkRun]:
    """``framework_run`` with an OpenTelemetry instrumentor on its provider for the run."""
    with framework_run(tmp_path, intent_tools) as fw:
        instrumentor.instrument(tracer_provider=fw.provider)
        try:
            yield fw
        finally:
            instrumentor.uninstrument()


def check(
    got: Exported,
    *,
    parallel_batch: bool = True,
    args_stripped: bool = True,
    failure_on_span: bool = True,
    tool_prefix: str = "",
) -> None:
    """What every framework's user should see (see the module docstring).

    Args:
        parallel_batch: the two parallel calls share one batch (frameworks whose model step is
            visible as a span parenting both; otherwise each call is its own batch).
        args_stripped: the ledger's ``args`` column holds no intent (docs/ledger.md).
        failure_on_span: the failing call's span has an ERROR status; where the framework's
            instrumentation loses it (the span ends OK), the call is named by its intent alone
            and its ledger row says success: nothing on the span tells it failed.
        tool_prefix: what the tool names of the ledger rows start with (the model's names).
    """
    failed_name = FAILED_NAME if failure_on_span else FAILING[0]
    expected_names = sorted([*OUTCOMES.values(), failed_name])
    assert not got.internal_errors, got.internal_errors
    # the exported copy, as decoded from the OTLP bytes
    assert [s.name for s in got.otlp] == expected_names, [s.name for s in got.all_otlp]
    by_name = {s.name: s for s in got.otlp}
    for intent, outcome in OUTCOMES.items():
        assert by_name[outcome].attributes.get(A.INTENT) == intent, by_name[outcome].attributes
        assert by_name[outcome].attributes[A.OUTCOME] == outcome
        assert by_name[outcome].status_code != 2
    assert by_name[failed_name].attributes[A.INTENT] == FAILING[0]
    assert (by_name[failed_name].status_code == 2) == failure_on_span
    # the Langfuse view of the copy
    assert sorted(langfuse_name(s) for s in got.langfuse) == expected_names
    for span in got.langfuse:
        assert langfuse_type(span) == "TOOL", span.attributes
        assert langfuse_session(span.attributes) == SESSION
        assert A.DEFAULT_LANGFUSE_TAG in langfuse_tags(span.attributes)
    # the ledger rows
    rows = [
        (a["label"], a["intent"], a["tool_name"], a["status"], a["session_id"], a["turn"])
        for a in got.anchors
    ]
    assert rows == sorted(
        [
            *(
                (OUTCOMES[i], i, f"{tool_prefix}search_code", "success", SESSION, 1)
                for i, _ in SEARCHES
            ),
            (
                failed_name,
                FAILING[0],
                f"{tool_prefix}read_file",
                "error" if failure_on_span else "success",
                SESSION,
                1,
            ),
        ]
    )
    assert all(a["parent_call_id"] is None for a in got.anchors)
    if args_stripped:
        assert_args_stripped(got)
    searches = [a for a in got.anchors if a["tool_name"] == f"{tool_prefix}search_code"]
    if parallel_batch:
        assert searches[0]["batch_id"] is not None
        assert searches[0]["batch_id"] == searches[1]["batch_id"]
    # one trace per turn: every call under the turn's invoke_agent span
    (turn,) = [s for s in got.all_otlp if s.name == f"{A.GEN_AI_INVOKE_AGENT} {AGENT}"]
    assert {s.trace_id for s in got.otlp} == {turn.trace_id}


def assert_args_stripped(got: Exported) -> None:
    intents = [*OUTCOMES, FAILING[0]]
    leaked = [a["args"] for a in got.anchors if a["args"] and any(i in a["args"] for i in intents)]
    assert not leaked, leaked
