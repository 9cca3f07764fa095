"""A real backend: spans exported through ``configure(otlp=...)`` to an Arize Phoenix server
(``phoenix serve``, OTLP/HTTP on ``/v1/traces``) and read back through its REST API
(``GET /v1/projects/<name>/spans``) as a user would see them: the tool spans named by their
labels, of kind TOOL, the turn one trace under its AGENT span, the failure ERROR.

The server starts once for the module (20 s to 90 s on a loaded machine: its imports and
migrations); ``scripts/test.sh`` installs it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tests.support.phoenix_server import PhoenixServer
from tracing import IntentRegistry, configure, session, tool_call

pytestmark = [pytest.mark.phoenix, pytest.mark.timeout(420)]

REGISTRY = IntentRegistry(["search_code", "read_file"])
PROJECT_KEY = "openinference.project.name"  # Phoenix's project: a resource attribute


@pytest.fixture(scope="module")
def phoenix() -> Iterator[PhoenixServer]:
    with PhoenixServer() as server:
        yield server


def _export_turn(phoenix: PhoenixServer, project: str) -> None:
    setup = configure(
        otlp=phoenix.traces_url,
        provider=TracerProvider(resource=Resource({PROJECT_KEY: project})),
        set_global=False,
        ledger=False,
        registry=REGISTRY,
    )
    tracer = setup.provider.get_tracer("app")
    with session("conv-phx", agent_id="coder", turn=1, user_id="u-1", tracer=tracer):
        with tool_call(
            "search_code", {"intent": "Searching for OAuth handlers", "q": "oauth"},
            call_id="call-1", tracer=tracer,
        ) as call:  # fmt: skip
            call.set_result(["auth.py"], outcome="Found 1 OAuth handler")
        with tool_call(
            "read_file", {"intent": "Reading the router", "path": "router.py"},
            call_id="call-2", tracer=tracer,
        ) as call:  # fmt: skip
            call.set_result("def route(): ...")
        try:
            with tool_call(
                "read_file", {"intent": "Reading the missing file", "path": "gone.py"},
                call_id="call-3", tracer=tracer,
            ):  # fmt: skip
                raise FileNotFoundError("gone.py")
        except FileNotFoundError:
            pass
    assert setup.force_flush()
    setup.shutdown()


def test_a_turn_reads_back_from_phoenix_named_by_intent(phoenix: PhoenixServer) -> None:
    project = f"intentrace-{uuid.uuid4().hex[:8]}"
    _export_turn(phoenix, project)
    spans = phoenix.wait_for_spans(project, 4)
    by_name: dict[str, dict[str, Any]] = {s["name"]: s for s in spans}
    assert set(by_name) == {
        "invoke_agent coder",
        "Found 1 OAuth handler",
        "Reading the router",
        "Reading the missing file · failed",
    }, sorted(by_name)

    root = by_name.pop("invoke_agent coder")
    assert root["span_kind"] == "AGENT"
    assert root["parent_id"] in (None, "")
    assert {s["context"]["trace_id"] for s in spans} == {root["context"]["trace_id"]}
    for span in by_name.values():  # the calls: children of the turn span, kind TOOL
        assert span["span_kind"] == "TOOL", span
        assert span["parent_id"] == root["context"]["span_id"]

    assert by_name["Reading the missing file · failed"]["status_code"] == "ERROR"
    assert by_name["Reading the router"]["status_code"] != "ERROR"
    assert by_name["Found 1 OAuth handler"]["status_code"] != "ERROR"


def test_the_session_groups_the_turn_in_phoenix(phoenix: PhoenixServer) -> None:
    project = f"intentrace-{uuid.uuid4().hex[:8]}"
    _export_turn(phoenix, project)
    spans = phoenix.wait_for_spans(project, 4)
    root = next(s for s in spans if s["name"] == "invoke_agent coder")
    attrs = root["attributes"]
    # Phoenix groups a project's traces into sessions by the root span's session.id
    assert attrs["session.id"] == "conv-phx" and attrs["user.id"] == "u-1", attrs
    for span in spans:
        if span is not root:
            assert span["attributes"]["intentrace.session.id"] == "conv-phx"
