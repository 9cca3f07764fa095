"""OpenLLMetry (Traceloop) for the OpenAI SDK: a Chat Completions call (the real ``openai``
client, the loopback scripted model) traced by Traceloop's OpenAI instrumentation (a model
span listing the requested calls as ``gen_ai.completion.0.tool_calls.N.*``), the app running
the calls itself through ``tracing.tool_call`` (the two searches at once), in the scenario of
tests/support/frameworks.py. The calls are matched to the model span's by call id and form
its block."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import frameworks as scenario
from tests.support.frameworks import FrameworkRun
from tracing import attributes as A
from tracing import tool_call

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionToolParam


@pytest.fixture
def run(tmp_path: Path) -> Iterator[FrameworkRun]:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    # OpenAIInstrumentor.uninstrument() (0.62) leaves its wrappers on the client's resources
    with (
        scenario.undo_patches("openai"),
        scenario.instrumented_run(tmp_path, OpenAIInstrumentor()) as fw,
    ):
        yield fw


def _schema(name: str, arg: str) -> ChatCompletionToolParam:
    properties = {"intent": {"type": "string"}, arg: {"type": "string"}}
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
    }


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pydantic v1-style config in it
def test_openai_chat_completions_with_traceloop(run: FrameworkRun) -> None:
    from openai import OpenAI

    tracer = run.provider.get_tracer("app")

    async def execute(call: Any) -> Any:
        args = json.loads(call.function.arguments)
        try:
            with tool_call(call.function.name, args, call_id=call.id, tracer=tracer) as c:
                if call.function.name == "read_file":
                    raise FileNotFoundError(args["path"])
                result = scenario.search_result(args["query"])
                c.set_result(result, outcome=result["outcome"])
                return result
        except FileNotFoundError as exc:
            return exc

    with scenario.scripted_openai_model() as base_url:
        client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        with run.session():
            response = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "find the auth code"}],
                tools=[_schema("search_code", "query"), _schema("read_file", "path")],
            )
            calls = list(response.choices[0].message.tool_calls or [])

            async def main() -> list[Any]:
                both = await asyncio.gather(*(execute(c) for c in calls[:2]))
                return [*both, await execute(calls[2])]

            results = asyncio.run(main())
    assert [type(r).__name__ for r in results] == ["dict", "dict", "FileNotFoundError"]
    got = run.finish()
    (model_span,) = [s for s in got.all_otlp if s.attributes.get(A.GEN_AI_OUTPUT_MESSAGES)]
    assert {a["provider_call_id"] for a in got.anchors} == {i for i, _, _ in scenario.CALLS}
    # the model span's calls form one block
    assert {a["batch_id"] for a in got.anchors} == {model_span.span_id}
    scenario.check(got)


def test_no_wrapper_is_left_on_the_client(run: FrameworkRun) -> None:
    import openai.resources.chat.completions as chat
    import wrapt

    assert isinstance(vars(chat.Completions)["create"], wrapt.BaseObjectProxy)  # instrumented now


def test_the_client_is_as_it_was_after_a_run() -> None:
    # (runs after the test above: the fixture's teardown put the classes back)
    import openai.resources.chat.completions as chat
    import wrapt

    assert not isinstance(vars(chat.Completions)["create"], wrapt.BaseObjectProxy)
    assert not isinstance(vars(chat.AsyncCompletions)["create"], wrapt.BaseObjectProxy)
