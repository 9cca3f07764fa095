"""The sink matrix: secrets planted by every entry path, looked for in every sink.

Entry paths (``PATHS``): our own instrumentation (``tool_call``/``activity``); foreign GenAI
semconv, OpenInference, OpenLLMetry and Langfuse SDK spans through the in-process processor;
``intentrace collect`` (OTLP/HTTP from an app without our processor, in-process and as the CLI
process); ``intentrace import`` (OTLP JSON lines through the CLI).

Each path plants one secret of every kind of the corpus (``tests/support/secrets.py``) at every
placement (``PLACEMENTS``), each secret unique, plus the data of tools whose policy hides it
(markers that must vanish) and innocent payloads (that must arrive unchanged).

Sinks (``Sinks``): the OTLP bodies a real ``OTLPSpanExporter`` posted and the bodies the real
Langfuse SDK exporter posted (both to a loopback receiver), the SQLite ledger's rows and raw
file bytes (db, WAL, shm), the PostgreSQL ledger's rows, the viewer (AppTest: every string and
byte of every element it rendered), the output of every CLI command, the log records, and every
file written under the run's data and cache folders (Parquet snapshots read back as rows).

``run_matrix(tmp, postgres_url)`` runs it all once; ``survivors(...)`` says what leaked where.
``SABOTAGE`` switches (``scrub_off``, ``raw_plain``) exist to show that the matrix fails when
scrubbing is off or when one path forwards its spans raw.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from redaction import RedactionPolicy
from tests.support.otlp_receiver import OtlpReceiver, WireSpan
from tests.support.secrets import KINDS, Secret, make_secret
from tracing import IntentRegistry, activity, configure, session, tool_call
from tracing import attributes as A
from tracing.anchor import AnchorWrite
from tracing.cli import main
from tracing.collect import CollectOptions, CollectReceiver, SpanFeed
from tracing.ledger import Ledger, open_ledger

LANGFUSE_PATH = "/api/public/otel/v1/traces"
HASH_KEY = "matrix-hash-key-0123456789abcdef"
POLICY_TOML = """
[tools.vault_read]
args = "redact"
output = "redact"

[tools.db_query]
args = "hash"

[scrub]
emails = true
phones = true
"""
LABEL_BEARING = (
    "search_code",
    "gather",
    "read_file",
    "run_tests",
    "vault_read",
    "db_query",
    "read_docs",
)

PLACEMENTS = (
    "intent",
    "nested_args",
    "json_in_string",
    "result",
    "outcome",
    "error_message",
    "exception_event",
    "activity_label",
    "model_span_call",
    "model_span_result",
    "attribute_name",
    "attribute_key",
    "tool_name",
    "resource",
)
"""Where a secret is planted (``attribute_name``: under a sensitive attribute name;
``attribute_key``: the secret is the attribute name)."""

IN_PROCESS = ("ours", "genai", "openinference", "openllmetry", "langfuse")
PATHS = (*IN_PROCESS, "collect", "import")
SINKS = (
    "otlp",
    "langfuse",
    "sqlite_rows",
    "sqlite_bytes",
    "postgres_rows",
    "viewer",
    "cli",
    "logs",
    "files",
)
EXPORT_SINKS = ("otlp", "langfuse")

CODE = 'def handler(request):\n    """Checks state."""\n    return {"ok": True, "n": [1, 2]}\n'
INNOCENT: dict[str, Any] = {
    "code": CODE,
    "uuid": "3f2b8c1e-9d4a-4b7e-8f21-6c5d4e3a2b10",
    "sha": "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "image": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==",
    "url": "https://example.com/docs/oauth?section=callback#flow",
    "prose": "The tokenizer counts tokens before the author resets the password policy page.",
    "numbers": [1700000000123, 3.25, 42],
}

SABOTAGE_ENV = "INTENTRACE_MATRIX_SABOTAGE"
SABOTAGES = ("scrub_off", "raw_plain")


# ---------------------------------------------------------------------------------- plants


@dataclass(frozen=True)
class Plant:
    path: str
    kind: str
    placement: str
    secret: Secret


class Garden:
    """The secrets and hidden markers one path plants (each one unique)."""

    def __init__(self, path: str, number: int) -> None:
        self.path = path
        self.session = f"matrix-{path}"
        self.detail_session = f"matrix-{path}-calls"
        """A small session of its own for the calls whose details the viewer shows."""
        self.plants: list[Plant] = []
        self.hidden: list[str] = []
        self._n = number * 100_000
        self._calls = 0
        self.calls: dict[str, str] = {}
        """Role -> call id of the calls the viewer opens (bulk, error, exception, innocent)."""

    def plant(self, kind: str, placement: str) -> Secret:
        self._n += 1
        secret = make_secret(kind, self._n)
        self.plants.append(Plant(self.path, kind, placement, secret))
        return secret

    def all(self, placement: str) -> list[Secret]:
        return [self.plant(kind, placement) for kind in KINDS]

    def mark(self, what: str) -> str:
        """Hidden data: an innocent-looking word that must vanish (its tool hides it)."""
        self._n += 1
        word = f"hidden{self.path}{what}{self._n}q"
        self.hidden.append(word)
        return word

    def call_id(self, role: str | None = None) -> str:
        self._calls += 1
        call_id = f"{self.path}-call-{self._calls}"
        if role is not None:
            self.calls[role] = call_id
        return call_id


# ---------------------------------------------------------------------------------- kits
# How each entry path makes its spans: a model span listing calls, a tool span, an activity
# (a block of calls with its label), an agent span carrying a conversation.

Call = tuple[str, str, dict[str, Any]]
"""(tool name, call id, args)."""
Result = tuple[str, str, Any]
"""(tool name, call id, result)."""


class Kit(Protocol):
    def session(self, session_id: str) -> contextlib.AbstractContextManager[Any]: ...

    def activity(self, label: str) -> contextlib.AbstractContextManager[Any]: ...

    def model(self, calls: list[Call], results: list[Result], attrs: dict[str, Any]) -> None: ...

    def tool(
        self,
        name: str,
        call_id: str,
        args: dict[str, Any],
        result: Any = None,
        *,
        attrs: dict[str, Any] | None = None,
        error: str | None = None,
        exception: Exception | None = None,
    ) -> None: ...

    def agent(self, attrs: dict[str, Any]) -> None: ...


def genai_messages(calls: list[Call], results: list[Result]) -> tuple[str, str]:
    """(``gen_ai.input.messages``, ``gen_ai.output.messages``) JSON of GenAI semconv."""
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": "Please look into it."}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": cid, "name": tool, "arguments": {"q": "earlier"}}
                for tool, cid, _ in results
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": cid, "response": value}
                for _, cid, value in results
            ],
        },
    ]
    outputs = [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": cid, "name": tool, "arguments": args}
                for tool, cid, args in calls
            ],
            "finish_reason": "tool_call",
        }
    ]
    return json.dumps(inputs), json.dumps(outputs)


def openai_chat(calls: list[Call], results: list[Result]) -> list[dict[str, Any]]:
    """An OpenAI chat conversation listing ``calls`` and the ``results`` of earlier calls."""
    return [
        {"role": "user", "content": "Please look into it."},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps({"q": "earlier"})},
                }
                for tool, cid, _ in results
            ],
        },
        *(
            {"role": "tool", "tool_call_id": cid, "content": json.dumps(value)}
            for _, cid, value in results
        ),
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(args)},
                }
                for tool, cid, args in calls
            ],
        },
    ]


class OursKit:
    """Our own instrumentation; model spans as an LLM instrumentation makes them (GenAI)."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def session(self, session_id: str) -> contextlib.AbstractContextManager[Any]:
        return session(session_id, agent_id="coder", turn=1)

    def activity(self, label: str) -> contextlib.AbstractContextManager[Any]:
        return activity(label, tracer=self.tracer)

    def model(self, calls: list[Call], results: list[Result], attrs: dict[str, Any]) -> None:
        inputs, outputs = genai_messages(calls, results)
        with self.tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                A.GEN_AI_OPERATION_NAME: "chat",
                A.GEN_AI_REQUEST_MODEL: "gpt-4.1",
                "gen_ai.input.messages": inputs,
                A.GEN_AI_OUTPUT_MESSAGES: outputs,
                **attrs,
            },
        ):
            pass

    def tool(
        self,
        name: str,
        call_id: str,
        args: dict[str, Any],
        result: Any = None,
        *,
        attrs: dict[str, Any] | None = None,
        error: str | None = None,
        exception: Exception | None = None,
    ) -> None:
        bearing = name in LABEL_BEARING
        call = tool_call(
            name,
            args,
            call_id=call_id,
            label_bearing=bearing,
            tracer=self.tracer,
            attributes=attrs,
        )
        if exception is not None:
            with pytest.raises(type(exception)), call:
                raise exception
            return
        with call as c:
            if error is not None:
                c.fail(error)
                return
            outcome = result.get("outcome") if isinstance(result, dict) else None
            c.set_result(result, outcome=outcome if isinstance(outcome, str) else None)

    def agent(self, attrs: dict[str, Any]) -> None:
        with self.tracer.start_as_current_span("invoke_agent coder", attributes=attrs):
            pass


class ForeignKit:
    """Spans as a third-party instrumentation writes them, by convention."""

    def __init__(self, tracer: Tracer, convention: str, session_id: str) -> None:
        self.tracer = tracer
        self.convention = convention
        self.session_key = {
            "genai": A.GEN_AI_CONVERSATION_ID,
            "openinference": A.SESSION_ID_KEY,
            "openllmetry": A.TRACELOOP_SESSION_ID,
        }[convention]
        self.session_attrs: dict[str, Any] = {self.session_key: session_id}

    @contextlib.contextmanager
    def session(self, session_id: str) -> Iterator[None]:
        before = self.session_attrs
        self.session_attrs = {self.session_key: session_id}
        try:
            yield
        finally:
            self.session_attrs = before

    @contextlib.contextmanager
    def activity(self, label: str) -> Iterator[Any]:
        with self.tracer.start_as_current_span(
            "agent step", attributes={A.ACTIVITY: label, **self.session_attrs}
        ) as span:
            yield span

    def model(self, calls: list[Call], results: list[Result], attrs: dict[str, Any]) -> None:
        base = {**self.session_attrs, **attrs}
        if self.convention == "genai":
            inputs, outputs = genai_messages(calls, results)
            base.update(
                {
                    A.GEN_AI_OPERATION_NAME: "chat",
                    A.GEN_AI_REQUEST_MODEL: "gpt-4.1",
                    "gen_ai.input.messages": inputs,
                    A.GEN_AI_OUTPUT_MESSAGES: outputs,
                }
            )
            name = "chat gpt-4.1"
        elif self.convention == "openinference":
            base[A.OPENINFERENCE_SPAN_KIND] = "LLM"
            base["llm.model_name"] = "gpt-4.1"
            for m, (tool, cid, value) in enumerate(results):
                p = f"llm.input_messages.{m + 1}.message."
                base.update(
                    {
                        f"{p}role": "tool",
                        f"{p}tool_call_id": cid,
                        f"{p}name": tool,
                        f"{p}content": json.dumps(value),
                    }
                )
            base["llm.input_messages.0.message.role"] = "user"
            base["llm.input_messages.0.message.content"] = "Please look into it."
            for j, (tool, cid, args) in enumerate(calls):
                p = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
                base.update(
                    {
                        f"{p}id": cid,
                        f"{p}function.name": tool,
                        f"{p}function.arguments": json.dumps(args),
                    }
                )
            base["input.value"] = json.dumps({"messages": openai_chat([], results)})
            base["input.mime_type"] = "application/json"
            name = "ChatCompletion"
        else:
            base["llm.request.type"] = "chat"
            base["gen_ai.system"] = "openai"
            base["gen_ai.request.model"] = "gpt-4.1"
            base["gen_ai.prompt.0.role"] = "user"
            base["gen_ai.prompt.0.content"] = "Please look into it."
            for m, (_tool, cid, value) in enumerate(results):
                p = f"gen_ai.prompt.{m + 1}."
                base.update(
                    {f"{p}role": "tool", f"{p}tool_call_id": cid, f"{p}content": json.dumps(value)}
                )
            for j, (tool, cid, args) in enumerate(calls):
                p = f"gen_ai.completion.0.tool_calls.{j}."
                base.update({f"{p}id": cid, f"{p}name": tool, f"{p}arguments": json.dumps(args)})
            name = "openai.chat"
        with self.tracer.start_as_current_span(name, attributes=base):
            pass

    def tool(
        self,
        name: str,
        call_id: str,
        args: dict[str, Any],
        result: Any = None,
        *,
        attrs: dict[str, Any] | None = None,
        error: str | None = None,
        exception: Exception | None = None,
    ) -> None:
        base: dict[str, Any] = {**self.session_attrs, **(attrs or {})}
        if self.convention == "genai":
            base.update(
                {
                    A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
                    A.GEN_AI_TOOL_NAME: name,
                    A.GEN_AI_TOOL_CALL_ID: call_id,
                    A.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(args),
                }
            )
            result_key, span_name = A.GEN_AI_TOOL_CALL_RESULT, f"execute_tool {name}"
        elif self.convention == "openinference":
            base.update(
                {
                    A.OPENINFERENCE_SPAN_KIND: "TOOL",
                    A.OI_TOOL_NAME: name,
                    A.OI_TOOL_CALL_ID: call_id,
                    A.OI_INPUT_VALUE: json.dumps(args),
                }
            )
            result_key, span_name = A.OI_OUTPUT_VALUE, name
        else:
            base.update(
                {
                    A.TRACELOOP_SPAN_KIND: "tool",
                    A.TRACELOOP_ENTITY_NAME: name,
                    A.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [], "kwargs": args}),
                }
            )
            result_key, span_name = A.TRACELOOP_ENTITY_OUTPUT, f"{name}.tool"
        with self.tracer.start_as_current_span(
            span_name, attributes=base, record_exception=False, set_status_on_exception=False
        ) as span:
            if result is not None:
                span.set_attribute(result_key, json.dumps(result))
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, error))
            if exception is not None:
                span.record_exception(exception)
                span.set_status(
                    Status(StatusCode.ERROR, f"{type(exception).__name__}: {exception}")
                )

    def agent(self, attrs: dict[str, Any]) -> None:
        kind = {"openinference": {A.OPENINFERENCE_SPAN_KIND: "CHAIN"}}.get(self.convention, {})
        with self.tracer.start_as_current_span(
            "agent run", attributes={**self.session_attrs, **kind, **attrs}
        ):
            pass


class LangfuseKit:
    """The Langfuse SDK's own observations (tool, generation), under our ``activity``."""

    def __init__(self, client: Any, tracer: Tracer) -> None:
        self.client = client
        self.tracer = tracer

    def session(self, session_id: str) -> contextlib.AbstractContextManager[Any]:
        return session(session_id, agent_id="coder", turn=1)

    def activity(self, label: str) -> contextlib.AbstractContextManager[Any]:
        return activity(label, tracer=self.tracer)

    def model(self, calls: list[Call], results: list[Result], attrs: dict[str, Any]) -> None:
        output = {"role": "assistant", "tool_calls": openai_chat(calls, [])[-1]["tool_calls"]}
        with self.client.start_as_current_observation(
            name="chat",
            as_type="generation",
            model="gpt-4.1",
            input=openai_chat([], results),
            output=output,
            metadata=attrs,
        ):
            pass

    def tool(
        self,
        name: str,
        call_id: str,
        args: dict[str, Any],
        result: Any = None,
        *,
        attrs: dict[str, Any] | None = None,
        error: str | None = None,
        exception: Exception | None = None,
    ) -> None:
        meta = {"call_id": call_id, **(attrs or {})}
        if exception is not None:
            with (
                pytest.raises(type(exception)),
                self.client.start_as_current_observation(
                    name=name, as_type="tool", input=args, metadata=meta
                ),
            ):
                raise exception
            return
        with self.client.start_as_current_observation(
            name=name, as_type="tool", input=args, metadata=meta
        ) as obs:
            if error is not None:
                obs.update(level="ERROR", status_message=error)
            elif result is not None:
                obs.update(output=result)

    def agent(self, attrs: dict[str, Any]) -> None:
        with self.client.start_as_current_observation(
            name="agent run", as_type="agent", metadata=attrs
        ):
            pass


def plant_everything(kit: Kit, g: Garden) -> None:
    """The scenario every path runs: every kind at every placement, hidden tools, innocents."""
    previous = g.call_id()
    for kind in KINDS:
        with kit.activity(f"Looking into {g.plant(kind, 'activity_label').text}"):
            call_id = g.call_id()
            intent = f"Searching for {g.plant(kind, 'intent').text} in the code"
            kit.model(
                calls=[
                    (
                        "search_code",
                        call_id,
                        {"intent": intent, "q": g.plant(kind, "model_span_call").text},
                    )
                ],
                results=[
                    ("search_code", previous, {"log": g.plant(kind, "model_span_result").text})
                ],
                attrs={
                    "app.auth.password": g.plant(kind, "attribute_name").text,
                    f"app.note.{g.plant(kind, 'attribute_key').text}": "x",
                },
            )
            kit.tool(
                "search_code",
                call_id,
                {"intent": intent, "q": "oauth"},
                {"outcome": f"Found {g.plant(kind, 'outcome').text} twice", "hits": 2},
                attrs={
                    "app.db.password": g.plant(kind, "attribute_name").text,
                    f"app.flag.{g.plant(kind, 'attribute_key').text}": "on",
                },
            )
            previous = call_id
            kit.tool(g.plant(kind, "tool_name").text, g.call_id(), {"q": "x"}, {"ok": True})
    with kit.session(g.detail_session):
        _plant_details(kit, g)


def _plant_details(kit: Kit, g: Garden) -> None:
    kit.tool(
        "gather",
        g.call_id("bulk"),
        {
            "intent": "Gathering the bulk payload",
            "nested": {
                "deep": [
                    {kind: s.text} for kind, s in zip(KINDS, g.all("nested_args"), strict=True)
                ]
            },
            "blob": json.dumps({"inner": [s.text for s in g.all("json_in_string")]}),
        },
        {"items": [s.text for s in g.all("result")]},
    )
    kit.tool(
        "read_file",
        g.call_id("error"),
        {"intent": "Reading the config file", "path": "/etc/app.conf"},
        error="cannot read: " + " ; ".join(s.text for s in g.all("error_message")),
    )
    kit.tool(
        "run_tests",
        g.call_id("exception"),
        {"intent": "Running the test suite", "target": "tests/"},
        exception=ValueError("boom: " + " ; ".join(s.text for s in g.all("exception_event"))),
    )
    # tools whose policy hides their args (and, for vault_read, their results)
    vault, query = g.call_id("vault"), g.call_id("query")
    vault_args = {"intent": f"Reading the {g.mark('intent')} entry", "path": g.mark("args")}
    query_args = {"intent": f"Querying {g.mark('intent')} rows", "sql": f"select {g.mark('sql')}"}
    kit.model(
        calls=[("vault_read", vault, vault_args), ("db_query", query, query_args)],
        results=[("vault_read", g.call_id(), {"value": g.mark("result")})],
        attrs={},
    )
    kit.tool("vault_read", vault, vault_args, {"value": g.mark("result")})
    kit.tool("db_query", query, query_args, {"rows": 1})
    kit.agent(
        {
            "app.conversation": json.dumps(
                openai_chat(
                    [("vault_read", g.call_id(), {"intent": f"Opening {g.mark('intent')}"})],
                    [("vault_read", vault, {"value": g.mark("result")})],
                )
            )
        }
    )
    kit.tool(
        "read_docs", g.call_id("innocent"), {"intent": "Reading the docs", **INNOCENT}, INNOCENT
    )


def resource_for(g: Garden) -> Resource:
    secrets = g.all("resource")
    return Resource(
        {
            "service.name": f"matrix-{g.path}",
            "deploy.note": "started with " + " ; ".join(s.text for s in secrets[:11]),
            "process.command_args": ("app", "--token", *(s.text for s in secrets[11:])),
        }
    )


# ---------------------------------------------------------------------------------- sinks


@dataclass
class Sinks:
    """What reached each sink, as text and bytes, with a label saying where."""

    blobs: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)
    """sink -> [(where, content)], for every path (a plant is unique to its path)."""
    per_path: dict[tuple[str, str], list[tuple[str, bytes]]] = field(default_factory=dict)
    """(path, sink) -> content only that path produced (the exports)."""
    wire: dict[tuple[str, str], list[WireSpan]] = field(default_factory=dict)
    """(path, otlp|langfuse) -> decoded spans."""
    anchors: list[dict[str, Any]] = field(default_factory=list)
    file_modes: dict[str, int] = field(default_factory=dict)
    """Files written under the user's data and cache folders -> mode."""

    def add(self, sink: str, where: str, content: bytes | str) -> None:
        data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
        self.blobs.setdefault(sink, []).append((where, data))

    def content(self, path: str, sink: str) -> list[tuple[str, bytes]]:
        if sink in EXPORT_SINKS:
            return self.per_path.get((path, sink), [])
        return self.blobs.get(sink, [])


@dataclass
class Matrix:
    gardens: dict[str, Garden]
    sinks: Sinks
    internal_errors: list[str]
    postgres_password: str
    sabotage: str | None


def survivors(matrix: Matrix, path: str, sink: str) -> list[str]:
    """Every planted secret (and hidden marker) of ``path`` found in ``sink``."""
    from ahocorasick_rs import BytesAhoCorasick

    garden = matrix.gardens[path]
    labels = [f"{p.kind} @ {p.placement}" for p in garden.plants]
    needles = [p.secret.vanish.encode() for p in garden.plants]
    labels += [f"hidden data {mark}" for mark in garden.hidden]
    needles += [mark.encode() for mark in garden.hidden]
    automaton = BytesAhoCorasick(needles)
    seen: dict[int, str] = {}
    for where, data in matrix.sinks.content(path, sink):
        for index, _, _ in automaton.find_matches_as_indexes(data, overlapping=True):
            seen.setdefault(index, where)
    return [f"{labels[i]} -> {sink}: {where}" for i, where in sorted(seen.items())]


def applies(path: str, sink: str) -> bool:
    return not (sink in EXPORT_SINKS and path not in IN_PROCESS)


def _proto_strings(message: Any, out: list[bytes]) -> None:
    for _, value in message.ListFields():
        _proto_value(value, out)


def _proto_value(value: Any, out: list[bytes]) -> None:
    if hasattr(value, "ListFields"):
        _proto_strings(value, out)
    elif isinstance(value, str):
        out.append(value.encode("utf-8", "surrogatepass"))
    elif isinstance(value, bytes):
        out.append(value)
    elif hasattr(value, "items"):  # a map field
        for k, v in value.items():
            _proto_value(k, out)
            _proto_value(v, out)
    elif hasattr(value, "__iter__"):  # a repeated field
        for item in value:
            _proto_value(item, out)


def app_test_content(at: Any) -> bytes:
    """Every string and byte of every element an AppTest run rendered."""
    out: list[bytes] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields"):
            _proto_strings(proto, out)
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            for child in children.values():
                walk(child)

    walk(at._tree)
    return b"\n".join(out)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a record whose arguments do not format: keep its parts
            text = f"{record.msg!r} {record.args!r}"
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(f"{record.name}: {text}")


class Tee:
    """A ledger sink writing to two ledgers (SQLite and PostgreSQL)."""

    def __init__(self, *ledgers: Ledger) -> None:
        self.ledgers = ledgers

    def record(self, write: AnchorWrite) -> None:
        for ledger in self.ledgers:
            ledger.record(dict(write))  # pyright: ignore[reportArgumentType]

    def set_activity(
        self, session_id: str, batch_id: str, label: str, *, turn: int | None = None
    ) -> None:
        for ledger in self.ledgers:
            ledger.set_activity(session_id, batch_id, label, turn=turn)

    def flush(self, timeout: float = 30.0) -> bool:
        return all(ledger.flush(timeout) for ledger in self.ledgers)


# ---------------------------------------------------------------------------------- running


def _sabotage(mp: pytest.MonkeyPatch, which: str | None) -> None:
    if which is None:
        return
    if which == "scrub_off":  # the scrubber returns everything as it came
        from redaction._scrubber import Scrubber

        def nothing(self: Any, value: Any, root: str = "$") -> tuple[Any, list[Any]]:
            return value, []

        mp.setattr(Scrubber, "scrub", nothing)
        mp.setattr(Scrubber, "scrub_text", nothing)
    elif which == "raw_plain":
        from tracing.otel._calls import CallTracker

        def raw(self: Any, span: ReadableSpan, agent: str | None = None, **_: Any) -> None:
            self._owner.forward(span, span)

        mp.setattr(CallTracker, "forward_other", raw)
    else:
        raise ValueError(f"{SABOTAGE_ENV}: one of {', '.join(SABOTAGES)}")


def _langfuse_kwargs(rx: OtlpReceiver) -> dict[str, Any]:
    key = uuid.uuid4().hex[:12]
    return {
        "public_key": f"pk-lf-{key}",
        "secret_key": f"sk-lf-{key}",
        "base_url": rx.url,
        "flush_interval": 0.1,
    }


def _in_process(path: str, g: Garden, policy: RedactionPolicy, sink: Tee, sinks: Sinks) -> None:
    with OtlpReceiver() as rx, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.traces_url)
        setup = configure(
            otlp=True,
            langfuse=_langfuse_kwargs(rx),
            provider=TracerProvider(resource=resource_for(g)),
            set_global=False,
            ledger=sink,
            policy=policy,
            registry=IntentRegistry(LABEL_BEARING),
        )
        client = setup.langfuse
        assert client is not None
        try:
            tracer = setup.provider.get_tracer(
                {
                    "ours": "app",
                    "genai": "opentelemetry.instrumentation.openai_v2",
                    "openinference": "openinference.instrumentation.openai",
                    "openllmetry": "opentelemetry.instrumentation.openai",
                    "langfuse": "app",
                }[path]
            )
            kit: Kit
            if path == "ours":
                kit = OursKit(tracer)
            elif path == "langfuse":
                kit = LangfuseKit(client, tracer)
            else:
                kit = ForeignKit(tracer, path, g.session)
            if path in ("ours", "langfuse"):
                with session(g.session, agent_id="coder", turn=1):
                    plant_everything(kit, g)
            else:
                plant_everything(kit, g)
            assert setup.force_flush()
            client.flush()
        finally:
            client.shutdown()
            setup.shutdown()
        for request in rx.requests:
            which = "langfuse" if request.path == LANGFUSE_PATH else "otlp"
            sinks.per_path.setdefault((path, which), []).append(
                (f"{which} request {request.path}", request.body)
            )
            sinks.wire.setdefault((path, which), []).extend(request.spans)


def foreign_spans(g: Garden) -> list[ReadableSpan]:
    """What an app without our processor exports: the three foreign conventions' spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource_for(g))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for convention in ("genai", "openinference", "openllmetry"):
        tracer = provider.get_tracer(f"matrix.{convention}")
        plant_everything(ForeignKit(tracer, convention, g.session), g)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _collect(
    g: Garden,
    policy: RedactionPolicy,
    sqlite: Ledger,
    cli_env: dict[str, str],
    pg_url: str,
    policy_file: Path,
    sinks: Sinks,
) -> None:
    spans = foreign_spans(g)
    # in process: the receiver of `intentrace collect`, feeding the SQLite ledger
    feed = SpanFeed(sqlite, policy=policy, registry=IntentRegistry(LABEL_BEARING))
    with CollectReceiver(feed, CollectOptions(port=0)) as rx:
        exporter = OTLPSpanExporter(endpoint=rx.traces_url)
        assert exporter.export(spans).name == "SUCCESS"
        exporter.shutdown()
    # the CLI process, feeding PostgreSQL (its URL carries a password)
    tools = [arg for tool in LABEL_BEARING for arg in ("--tool", tool)]
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "intentrace"),
            "collect",
            "--port",
            "0",
            "--ledger",
            pg_url,
            "--policy",
            str(policy_file),
            *tools,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    found = re.search(r"on (http://127\.0\.0\.1:\d+/v1/traces)", first)
    assert found, (first, proc.stderr.read() if proc.poll() is not None else "")
    exporter = OTLPSpanExporter(endpoint=found.group(1))
    assert exporter.export(spans).name == "SUCCESS"
    exporter.shutdown()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    sinks.add("cli", "intentrace collect (process)", first + out + err)


def _import(
    g: Garden, sqlite_url: str, pg_url: str, inputs: Path, policy_file: Path, sinks: Sinks
) -> None:
    spans = foreign_spans(g)
    path = inputs / "export.jsonl"
    lines = []
    for start in range(0, len(spans), 50):  # several export requests, one per line
        request = encode_spans(spans[start : start + 50])
        lines.append(json.dumps(json.loads(json_format.MessageToJson(request))))
    lines.append('{"resourceSpans": [{"broken": ')  # a bad line: its report is output too
    path.write_text("\n".join(lines) + "\n")
    tools = [arg for tool in LABEL_BEARING for arg in ("--tool", tool)]
    for url in (sqlite_url, pg_url):
        result = CliRunner().invoke(
            main, ["import", str(path), "--ledger", url, "--policy", str(policy_file), *tools]
        )
        assert result.exit_code == 0, result.output
        sinks.add("cli", f"intentrace import --ledger {url}", _cli_text(result))


def _cli_text(result: Any) -> str:
    text = result.output
    with contextlib.suppress(ValueError, AttributeError):
        text += result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        text += repr(result.exception)
    return text


def _cli_commands(
    g_sessions: list[str], sqlite_url: str, pg_url: str, sinks: Sinks, mp: pytest.MonkeyPatch
) -> None:
    from tracing.cli import _view

    mp.setattr(
        _view.subprocess,
        "Popen",
        lambda argv, env=None: subprocess.Popen([sys.executable, "-c", "pass"], env=env),
    )
    runner = CliRunner()
    for url in (sqlite_url, pg_url):
        commands: list[list[str]] = [
            ["sessions"],
            ["sessions", "--format", "json", "--limit", "1000"],
            ["summary", "no-such-session"],
            ["sql", "SELECT tool_call_id, tool_name, label, intent, outcome, error FROM anchors"],
            ["sql", "SELECT * FROM anchors", "--format", "csv"],
            ["sql", "SELECT * FROM blocks", "--format", "csv"],
            ["sql", "SELECT * FROM calls", "--columnar", "--format", "csv"],
            ["watch", "--once", "--recent", "100000", "--format", "plain"],
            ["view", "--port", "8599"],
            ["doctor"],
            ["doctor", "--json"],
            *(["summary", s, "--max-chars", "1000000"] for s in g_sessions),
            *(
                ["report", d]
                for d in ("failures", "intent_quality", "redundant_calls", "tool_health")
            ),
            ["report", "tool_health", "--format", "json"],
            ["report", "vague_intents", "--format", "csv"],
        ]
        for args in commands:
            result = runner.invoke(main, [*args, "--ledger", url])
            sinks.add("cli", f"intentrace {' '.join(args)} --ledger {url}", _cli_text(result))
    result = runner.invoke(main, ["demo", "--sessions", "1", "--ledger", pg_url])
    sinks.add("cli", "intentrace demo", _cli_text(result))


def _viewer(
    gardens: dict[str, Garden], sqlite_url: str, sinks: Sinks, mp: pytest.MonkeyPatch
) -> None:
    from tests.viewer.conftest import run_app
    from tracing.environment_variables import INTENTRACE_LEDGER_URL

    mp.setenv(INTENTRACE_LEDGER_URL, sqlite_url)
    runs: list[tuple[str, dict[str, str], str | None]] = [
        ("sessions", {}, None),
        ("analytics", {}, "analytics"),
    ]
    for path, g in gardens.items():
        runs.append((f"session {path}", {"session": g.session}, "session"))
        # the calls whose detail pane shows the args, result and error placements
        runs.append((f"session {path} (calls)", {"session": g.detail_session}, "session"))
        for role in ("bulk", "error", "exception", "vault"):
            if role in g.calls:
                params = {"session": g.detail_session, "anchor": g.calls[role]}
                runs.append((f"{path} {role} call", params, "session"))
    for where, params, page in runs:
        at = run_app(params, page=page)
        sinks.add("viewer", f"viewer: {where}", app_test_content(at))


def _rows_sqlite(path: Path) -> Iterator[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                yield table, repr(row)
    finally:
        conn.close()


def _rows_postgres(base: str, schema: str) -> Iterator[tuple[str, str]]:
    import psycopg
    from psycopg import sql

    with psycopg.connect(base, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                [schema],
            )
        ]
        for table in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            for row in conn.execute(query):
                yield table, repr(row)


def _files(roots: list[Path], sinks: Sinks) -> None:
    import duckdb

    for root in roots:
        for file in sorted(root.rglob("*")):
            if not file.is_file():
                continue
            sinks.file_modes[str(file)] = file.stat().st_mode & 0o777
            if file.suffix == ".parquet":
                db = duckdb.connect()
                try:
                    rows = db.execute("SELECT * FROM read_parquet(?)", [str(file)]).fetchall()
                    meta = db.execute(
                        "SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
                        [str(file)],
                    ).fetchall()
                finally:
                    db.close()
                sinks.add("files", f"{file} (rows)", repr(rows))
                sinks.add("files", f"{file} (metadata)", repr(meta))
            else:
                sinks.add("files", str(file), file.read_bytes())


def _sqlite_bytes(db: Path, sinks: Sinks, when: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        file = db.with_name(db.name + suffix)
        if file.exists():
            sinks.add("sqlite_bytes", f"{file.name} ({when})", file.read_bytes())


def run_matrix(
    tmp: Path,
    postgres_url: str,
    *,
    paths: tuple[str, ...] = PATHS,
    sabotage: str | None = None,
    full: bool = True,
) -> Matrix:
    """Run every entry path into every sink once (``paths``: a subset, for quicker checks;
    ``full=False``: the exports and the ledgers only, no CLI, viewer or file sinks)."""
    from tests.ledger.conftest import pg_schema_url
    from tracing import diagnostics

    data, cache, inputs = tmp / "data", tmp / "cache", tmp / "inputs"
    for d in (data, cache, inputs):
        d.mkdir()
    password = "PgLedgerPw" + uuid.uuid4().hex[:12]
    base = postgres_url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@")
    pg_url = pg_schema_url(base)
    schema = re.search(r"search_path%3D(\w+)", pg_url)
    assert schema is not None
    db = data / "ledger.db"
    sqlite_url = f"sqlite:///{db}"
    policy_file = inputs / "policy.toml"
    policy_file.write_text(POLICY_TOML)
    sinks = Sinks()
    gardens = {path: Garden(path, n) for n, path in enumerate(paths)}
    handler = _Records()
    root = logging.getLogger()
    root.addHandler(handler)
    mark = diagnostics.last_seq()
    levels = {name: logging.getLogger(name).level for name in ("tracing", "redaction")}
    with pytest.MonkeyPatch.context() as mp:
        for name in levels:
            logging.getLogger(name).setLevel(logging.DEBUG)
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("XDG_DATA_HOME", str(data))
        mp.setenv("INTENTRACE_REDACTION_HASH_KEY", HASH_KEY)
        mp.delenv("INTENTRACE_REDACTION_POLICY", raising=False)
        mp.delenv("INTENTRACE_LEDGER_URL", raising=False)
        _sabotage(mp, sabotage)
        cli_env = {**os.environ, "XDG_CACHE_HOME": str(cache), "XDG_DATA_HOME": str(data)}
        policy = RedactionPolicy.from_toml(POLICY_TOML)
        sqlite, postgres = open_ledger(sqlite_url), open_ledger(pg_url)
        try:
            tee = Tee(sqlite, postgres)
            for path in paths:
                g = gardens[path]
                if path in IN_PROCESS:
                    _in_process(path, g, policy, tee, sinks)
                elif path == "collect":
                    _collect(g, policy, sqlite, cli_env, pg_url, policy_file, sinks)
            assert tee.flush(60)
            if "import" in paths:
                _import(gardens["import"], sqlite_url, pg_url, inputs, policy_file, sinks)
            _sqlite_bytes(db, sinks, "open")
        finally:
            sqlite.close()
            postgres.close()
        _sqlite_bytes(db, sinks, "closed")
        for table, row in _rows_sqlite(db):
            sinks.add("sqlite_rows", f"sqlite {table}", row)
        for table, row in _rows_postgres(base, schema.group(1)):
            sinks.add("postgres_rows", f"postgres {table}", row)
        with open_ledger(sqlite_url, read_only=True) as reader:
            sinks.anchors = [dict(a) for a in reader.changed_since(-1, limit=1_000_000)]
        if full:
            sessions = [s for g in gardens.values() for s in (g.session, g.detail_session)]
            _cli_commands(sessions, sqlite_url, pg_url, sinks, mp)
            _viewer(gardens, sqlite_url, sinks, mp)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    root.removeHandler(handler)
    if full:
        _files([data, cache], sinks)
    sinks.add("logs", "log records", "\n".join(handler.lines))
    errors = [
        f"{e.component} / {e.where}: {e.error}" for e in diagnostics.internal_errors(since=mark)
    ]
    return Matrix(gardens, sinks, errors, password, sabotage)


def wire_args(span: WireSpan) -> Any:
    for key in (
        A.GEN_AI_TOOL_CALL_ARGUMENTS,
        A.OI_INPUT_VALUE,
        A.TRACELOOP_ENTITY_INPUT,
        A.LANGFUSE_OBSERVATION_INPUT,
    ):
        if key in span.attributes:
            return json.loads(span.attributes[key])
    return None


def wire_result(span: WireSpan) -> Any:
    for key in (
        A.GEN_AI_TOOL_CALL_RESULT,
        A.OI_OUTPUT_VALUE,
        A.TRACELOOP_ENTITY_OUTPUT,
        A.LANGFUSE_OBSERVATION_OUTPUT,
    ):
        if key in span.attributes:
            return json.loads(span.attributes[key])
    return None


def unwrap(args: Any) -> Any:
    if isinstance(args, dict) and set(args) == {"args", "kwargs"}:
        return args["kwargs"]
    return args


SelectSpan = Callable[[WireSpan], bool]
