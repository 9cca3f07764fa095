"""Tool calls listed in span data get their own tool's policy, in every shape we know."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redaction import AgentOverlay, RedactionPolicy, ToolRule
from tracing.derive._redact import TraceRedactor


def _policy() -> RedactionPolicy:
    return RedactionPolicy(
        tools=(
            ToolRule("vault_read", args="redact", output="redact"),
            ToolRule("db_query", args="hash"),
        ),
        hash_key=b"0123456789abcdef0123",
    )


HIDDEN = "zebra-quartz"  # the hidden tool's data: must vanish
SHOWN = "plain-lookup"  # a kept tool's data: must stay


def _redact(attrs: dict[str, Any], **kw: Any) -> dict[str, Any]:
    out, _ = TraceRedactor(_policy()).attributes(attrs, **kw)
    return dict(out)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


SHAPES: dict[str, dict[str, Any]] = {
    "genai parts": {
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": "c1",
                            "name": "vault_read",
                            "arguments": {"intent": f"Reading {HIDDEN}", "path": HIDDEN},
                        },
                        {
                            "type": "tool_call",
                            "id": "c2",
                            "name": "search",
                            "arguments": {"q": SHOWN},
                        },
                    ],
                }
            ]
        ),
        "gen_ai.input.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "tool_call", "id": "c1", "name": "vault_read", "arguments": "{}"}
                    ],
                },
                {
                    "role": "tool",
                    "parts": [
                        {"type": "tool_call_response", "id": "c1", "response": f"got {HIDDEN}"},
                        {"type": "tool_call_response", "id": "c2", "response": SHOWN},
                    ],
                },
            ]
        ),
    },
    "openai chat": {
        "input.value": json.dumps(
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {
                                    "name": "vault_read",
                                    "arguments": json.dumps({"intent": f"Reading {HIDDEN}"}),
                                },
                            },
                            {
                                "id": "c2",
                                "type": "function",
                                "function": {
                                    "name": "search",
                                    "arguments": json.dumps({"q": SHOWN}),
                                },
                            },
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": HIDDEN},
                    {"role": "tool", "tool_call_id": "c2", "content": SHOWN},
                ]
            }
        )
    },
    "openai responses": {
        "output.value": json.dumps(
            {
                "output": [
                    {
                        "type": "function_call",
                        "call_id": "c1",
                        "name": "vault_read",
                        "arguments": json.dumps({"path": HIDDEN}),
                    },
                    {
                        "type": "function_call",
                        "call_id": "c2",
                        "name": "search",
                        "arguments": json.dumps({"q": SHOWN}),
                    },
                    {"type": "function_call_output", "call_id": "c1", "output": HIDDEN},
                ]
            }
        )
    },
    "anthropic": {
        "llm.input": json.dumps(
            [
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "vault_read",
                            "input": {"path": HIDDEN},
                        },
                        {"type": "tool_use", "id": "t2", "name": "search", "input": {"q": SHOWN}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": HIDDEN}],
                },
            ]
        )
    },
    "gemini": {
        "gcp.vertex.agent.llm_request": json.dumps(
            {
                "contents": [
                    {
                        "parts": [
                            {"functionCall": {"name": "vault_read", "args": {"p": HIDDEN}}},
                            {"functionCall": {"name": "search", "args": {"q": SHOWN}}},
                        ]
                    },
                    {
                        "parts": [
                            {"functionResponse": {"name": "vault_read", "response": {"r": HIDDEN}}}
                        ]
                    },
                ]
            }
        )
    },
    "pydantic-ai": {
        "pydantic_ai.all_messages": json.dumps(
            [
                {
                    "parts": [
                        {
                            "part_kind": "tool-call",
                            "tool_name": "vault_read",
                            "tool_call_id": "p1",
                            "args": {"p": HIDDEN},
                        },
                        {"part_kind": "tool-call", "tool_name": "search", "args": {"q": SHOWN}},
                        {
                            "part_kind": "tool-return",
                            "tool_name": "vault_read",
                            "tool_call_id": "p1",
                            "content": HIDDEN,
                        },
                    ]
                }
            ]
        )
    },
    "openinference flattened": {
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "vault_read",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps(
            {"intent": f"Reading {HIDDEN}"}
        ),
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "search",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": json.dumps(
            {"q": SHOWN}
        ),
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.tool_call_id": "c1",
        "llm.input_messages.3.message.content": HIDDEN,
        "llm.input_messages.3.message.contents.0.message_content.text": HIDDEN,
    },
    "openllmetry flattened": {
        "gen_ai.completion.0.tool_calls.0.id": "c1",
        "gen_ai.completion.0.tool_calls.0.name": "vault_read",
        "gen_ai.completion.0.tool_calls.0.arguments": json.dumps({"p": HIDDEN}),
        "gen_ai.completion.0.tool_calls.1.name": "search",
        "gen_ai.completion.0.tool_calls.1.arguments": json.dumps({"q": SHOWN}),
        "gen_ai.prompt.4.role": "tool",
        "gen_ai.prompt.4.tool_call_id": "c1",
        "gen_ai.prompt.4.content": HIDDEN,
    },
    "truncated JSON text": {
        "traceloop.entity.input": json.dumps(
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "function": {
                                    "name": "vault_read",
                                    "arguments": json.dumps({"p": HIDDEN}),
                                },
                            },
                            {
                                "id": "c2",
                                "function": {
                                    "name": "search",
                                    "arguments": json.dumps({"q": SHOWN}),
                                },
                            },
                        ],
                    },
                    {"role": "user", "content": "and then some more text"},
                ]
            }
        )[:-30]
    },
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_listed_calls_get_their_own_tools_policy(shape: str) -> None:
    attrs = SHAPES[shape]
    out = _redact(attrs)
    text = " ".join(f"{k}={_text(v)}" for k, v in out.items())
    assert HIDDEN not in text
    assert SHOWN in text  # a kept tool's data stays
    assert "[redacted:policy]" in text


def test_hash_keeps_the_shape_and_correlates() -> None:
    args = {"sql": f"select * from {HIDDEN}"}
    attrs = {
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "tool_call", "id": "c9", "name": "db_query", "arguments": args}
                    ],
                }
            ]
        )
    }
    out = json.loads(_redact(attrs)["gen_ai.output.messages"])
    hashed = out[0]["parts"][0]["arguments"]
    assert set(hashed) == {"sql"} and hashed["sql"].startswith("[hmac:")
    # the same args on the tool span hash to the same value (and hashing twice changes nothing)
    policy = _policy()
    again = policy.redact_call(tool_name="db_query", args=args).args
    assert again == hashed
    assert policy.redact_call(tool_name="db_query", args=again).args == again


def test_a_result_of_an_unknown_call_gets_the_strictest_output_action() -> None:
    attrs = {
        "gen_ai.input.messages": json.dumps(
            [
                {
                    "role": "tool",
                    "parts": [
                        {"type": "tool_call_response", "id": "never-seen", "response": HIDDEN}
                    ],
                }
            ]
        )
    }
    assert HIDDEN not in _redact(attrs)["gen_ai.input.messages"]
    # ... unless the caller knows the call: a kept tool's result stays
    kept = _redact(attrs, resolve={"never-seen": "search"}.get)
    assert HIDDEN in kept["gen_ai.input.messages"]
    # with a keep-everything policy nothing is hidden, secrets are still scrubbed
    keep = TraceRedactor(RedactionPolicy())
    assert not keep.may_hide
    out, _ = keep.attributes(
        {"x": json.dumps({"role": "tool", "content": f"{HIDDEN} AKIAIOSFODNN7EXAMPLE"})}
    )
    assert HIDDEN in out["x"] and "AKIAIOSFODNN7EXAMPLE" not in out["x"]


def test_agent_overlays_apply_to_listed_calls() -> None:
    policy = RedactionPolicy(agents=(AgentOverlay("billing", args="redact"),))
    attrs = {
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": "c1",
                            "name": "search",
                            "arguments": {"q": HIDDEN},
                        }
                    ],
                }
            ]
        )
    }
    assert (
        HIDDEN
        in TraceRedactor(policy).attributes(attrs, agent="coder")[0]["gen_ai.output.messages"]
    )
    assert (
        HIDDEN
        not in TraceRedactor(policy).attributes(attrs, agent="billing")[0]["gen_ai.output.messages"]
    )


def test_model_span_tool_message_event() -> None:
    redactor = TraceRedactor(_policy())
    out, _ = redactor.attributes(
        {"id": "c1", "content": HIDDEN},
        event_name="gen_ai.tool.message",
        resolve={"c1": "vault_read"}.get,
    )
    assert out["content"] == "[redacted:policy]"


def test_key_names_and_values_of_any_span() -> None:
    out = _redact(
        {
            "app.request.password": "hunter2",
            "http.request.header.authorization": "Bearer abcdefghijklmnop1234",
            "note": "key AKIAIOSFODNN7EXAMPLE",
            "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5": "a secret used as a name",
            "gen_ai.usage.input_tokens": 12,
            "retry.enabled": True,
        }
    )
    assert out["app.request.password"] == "[redacted:key:password]"
    assert out["http.request.header.authorization"] == "[redacted:key:auth]"
    assert out["note"] == "key [redacted:aws_access_key]"
    assert not any(k.startswith("ghp_") for k in out)
    assert out["gen_ai.usage.input_tokens"] == 12 and out["retry.enabled"] is True


INNOCENT = {
    "code": "def f(x):\n    return {'a': [1, 2]}  # a dict\n",
    "uuid": "3f2b8c1e-9d4a-4b7e-8f21-6c5d4e3a2b10",
    "sha": "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "image": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==",
    "url": "https://example.com/docs/page?x=1#y",
    "prose": "The tokenizer counts tokens; the author reset the password policy docs.",
    "messages": json.dumps(
        [
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": "c2", "name": "search", "arguments": {"q": SHOWN}}
                ],
            }
        ]
    ),
}


def test_innocent_data_passes_as_it_is() -> None:
    redactor = TraceRedactor(_policy())
    out, removed = redactor.attributes(INNOCENT)
    assert removed == 0 and out is INNOCENT


_texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def _conversations(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """A random conversation in a random shape, with planted hidden-tool calls and results."""
    marks: list[str] = []
    items: list[Any] = []
    for n in range(draw(st.integers(1, 4))):
        mark = f"{HIDDEN}-{n}"
        marks.append(mark)
        filler = draw(_json)
        shape = draw(st.sampled_from(["genai", "chat", "responses", "anthropic", "pydantic"]))
        args = {"intent": f"Reading {mark}", "filler": filler}
        cid = f"id{n}"
        if shape == "genai":
            items.append(
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "tool_call", "id": cid, "name": "vault_read", "arguments": args}
                    ],
                }
            )
            items.append(
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": cid, "response": mark}],
                }
            )
        elif shape == "chat":
            items.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "vault_read", "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            items.append({"role": "tool", "tool_call_id": cid, "content": mark})
        elif shape == "responses":
            items.append(
                {
                    "type": "function_call",
                    "call_id": cid,
                    "name": "vault_read",
                    "arguments": json.dumps(args),
                }
            )
            items.append({"type": "function_call_output", "call_id": cid, "output": [mark]})
        elif shape == "anthropic":
            items.append({"type": "tool_use", "id": cid, "name": "vault_read", "input": args})
            items.append(
                {
                    "type": "tool_result",
                    "tool_use_id": cid,
                    "content": [{"type": "text", "text": mark}],
                }
            )
        else:
            items.append(
                {
                    "part_kind": "tool-call",
                    "tool_name": "vault_read",
                    "tool_call_id": cid,
                    "args": args,
                }
            )
            items.append(
                {
                    "part_kind": "tool-return",
                    "tool_name": "vault_read",
                    "tool_call_id": cid,
                    "content": mark,
                }
            )
        items.append(filler)
    order = draw(st.permutations(list(range(len(items)))))
    # results may come before or after their calls; ids still resolve within the span
    wrapped = draw(st.sampled_from(["list", "messages", "nested text"]))
    body: Any = [items[i] for i in order]
    if wrapped == "messages":
        body = {"messages": body}
    elif wrapped == "nested text":
        body = {"request": json.dumps({"input": body})}
    return body, marks


@given(_conversations(), st.booleans())
def test_no_hidden_call_survives_in_any_shape(case: tuple[Any, list[str]], as_text: bool) -> None:
    body, marks = case
    value = json.dumps(body) if as_text else body
    out, _ = TraceRedactor(_policy()).attributes({"payload": value})
    text = _text(out["payload"])
    for mark in marks:
        assert mark not in text


@given(_json)
def test_data_without_calls_is_left_to_the_scrubber(value: Any) -> None:
    redactor = TraceRedactor(_policy())
    plain = RedactionPolicy()
    out, _ = redactor.attributes({"v": json.dumps(value)})
    expected = plain.scrub({"v": json.dumps(value)}).value
    assert out["v"] == expected["v"] or json.loads(out["v"]) == json.loads(expected["v"])
