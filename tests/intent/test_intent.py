"""Intent primitives: schemas, reading, stripping, outcomes (tracing.intent._schema)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracing import (
    INTENT_ARG,
    INTENT_DESCRIPTION,
    INTENT_LABEL_MARKER,
    apply_outcome,
    can_inject_intent,
    has_intent_marker,
    read_intent,
    strip_intent,
    with_intent,
    without_intent,
)

SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query"],
}
# A CRM tool whose own parameter is called `intent`: a business value, never a label.
CRM = {
    "type": "object",
    "properties": {
        "customer": {"type": "string"},
        "intent": {"type": "string", "enum": ["purchase", "refund"]},
    },
    "required": ["customer", "intent"],
}


def test_constants() -> None:
    assert INTENT_ARG == "intent"
    assert INTENT_LABEL_MARKER == "ALWAYS write this field FIRST"
    assert INTENT_DESCRIPTION.startswith(INTENT_LABEL_MARKER)
    assert len(INTENT_DESCRIPTION) <= 240


def test_with_intent_puts_intent_first() -> None:
    out = with_intent(SEARCH)
    assert list(out["properties"]) == ["intent", "query", "limit"]
    assert out["properties"]["intent"] == {"type": "string", "description": INTENT_DESCRIPTION}
    assert out["required"] == ["query"]
    assert has_intent_marker(out)
    assert not has_intent_marker(SEARCH)


def test_with_intent_required_adds_once() -> None:
    out = with_intent(SEARCH, required=True)
    assert out["required"] == ["intent", "query"]
    assert with_intent(out, required=True)["required"] == ["intent", "query"]
    assert with_intent({"type": "object"}, required=True)["required"] == ["intent"]


def test_with_intent_idempotent_and_moves_marked_intent_first() -> None:
    once = with_intent(SEARCH)
    assert with_intent(once) == once
    # a marked intent that is not first (a framework reordered it) comes back first
    shuffled = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "intent": once["properties"]["intent"]},
    }
    assert list(with_intent(shuffled)["properties"]) == ["intent", "query"]


def test_with_intent_survives_read_only_mappings() -> None:
    frozen = MappingProxyType(
        {
            "type": "object",
            "properties": MappingProxyType({"q": MappingProxyType({"type": "string"})}),
            "required": ("q",),
        }
    )
    out = with_intent(frozen, required=True)
    assert list(out["properties"]) == ["intent", "q"]
    assert out["required"] == ["intent", "q"]
    json.dumps(out)  # plain dicts and lists all the way down
    assert "intent" not in frozen["properties"]
    assert without_intent(MappingProxyType(out)) == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }


def test_with_intent_shares_nothing_with_input() -> None:
    schema = copy.deepcopy(SEARCH)
    out = with_intent(schema)
    out["properties"]["query"]["type"] = "number"
    out["required"].append("limit")
    assert schema == SEARCH


@pytest.mark.parametrize(
    ("schema", "ok"),
    [
        (SEARCH, True),
        ({}, True),
        ({"type": "object"}, True),
        ({"properties": {"a": {"type": "string"}}}, True),
        (CRM, False),  # business `intent` parameter
        ({"type": "string"}, False),
        ({"type": "array", "items": {}}, False),
        ({"anyOf": [{"type": "object"}, {"type": "null"}]}, False),
        ({"type": "object", "properties": ["a"]}, False),
        ("not a schema", False),
        (None, False),
    ],
)
def test_can_inject_intent(schema: Any, ok: bool) -> None:
    assert can_inject_intent(schema) is ok
    if ok:
        assert next(iter(with_intent(schema)["properties"])) == "intent"
    else:
        with pytest.raises(ValueError, match="cannot inject 'intent'"):
            with_intent(schema)


def test_can_inject_into_already_injected() -> None:
    assert can_inject_intent(with_intent(SEARCH))


def test_without_intent_removes_only_ours() -> None:
    injected = with_intent(SEARCH, required=True)
    assert without_intent(injected) == SEARCH
    assert without_intent(CRM) == CRM  # the business parameter stays
    assert without_intent(SEARCH) == SEARCH


def test_marker_is_checked_on_the_description() -> None:
    near_miss = {
        "type": "object",
        "properties": {"intent": {"type": "string", "description": "always write this first"}},
    }
    assert not has_intent_marker(near_miss)
    assert not has_intent_marker({"properties": {"intent": "x"}})
    assert not has_intent_marker(None)


# --- reading and stripping -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"intent": "Searching", "q": 1}, "Searching"),
        (MappingProxyType({"intent": "Searching"}), "Searching"),
        ({"q": 1}, None),
        ({"intent": 5}, None),
        ('{"intent": "Searching", "q": 1}', "Searching"),
        (b'{"intent": "Searching", "q": 1}', "Searching"),
        ('{"q": 1, "intent": "Reordered"}', "Reordered"),
        ('{"q": [1, 2], "intent": "Truncated mid-val', "Truncated mid-val"),
        ('{"intent": "Complete", "q": "trunc', "Complete"),
        ('{"intent": "Lone \\ud800 surrogate"}', "Lone \ufffd surrogate"),
        ('{"q": 1, "intent": "Lone \\ud800 surrogate"}', "Lone \ud800 surrogate"),
        ('{"intent": null}', None),
        ({"intent": "   "}, None),  # only white space: no intent
        ({"intent": "\t\n "}, None),
        ('{"intent": "  ", "q": 1}', None),
        ('{"q": 1, "intent": "\\n"}', None),
        ({"intent": ""}, None),
        ("[1, 2]", None),
        ("", None),
        ("not json", None),
        (b"\xff\xfe", None),
        (None, None),
        (42, None),
    ],
)
def test_read_intent(args: Any, expected: str | None) -> None:
    assert read_intent(args) == expected


def test_read_intent_with_schema_ignores_business_intent() -> None:
    args = {"customer": "acme", "intent": "refund"}
    assert read_intent(args, schema=CRM) is None
    assert read_intent(json.dumps(args), schema=CRM) is None
    assert read_intent({"intent": "Refunding acme"}, schema=with_intent(SEARCH)) == "Refunding acme"


@given(
    st.dictionaries(
        st.text(max_size=6),
        st.none() | st.integers() | st.text(max_size=10) | st.lists(st.integers(), max_size=3),
        max_size=5,
    ),
    st.booleans(),
)
def test_read_intent_agrees_with_a_full_parse(obj: dict[str, Any], ensure_ascii: bool) -> None:
    text = json.dumps(obj, ensure_ascii=ensure_ascii)
    expected = obj.get("intent") if isinstance(obj.get("intent"), str) else None
    assert read_intent(text) == expected
    assert read_intent(text.encode()) == expected
    assert read_intent(obj) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"intent": "x", "q": 1}, {"q": 1}),
        (MappingProxyType({"intent": "x", "q": 1}), {"q": 1}),
        ({"q": 1}, {"q": 1}),
        ('{"intent": "x", "q": 1}', '{"q": 1}'),
        ('{"intent":"x"}', "{}"),
        ('  {"intent" : "a \\" b" ,\n "q":1.50}', '{"q":1.50}'),  # edited in place, not re-encoded
        (b'{"intent":"x","q":1}', b'{"q":1}'),
        ('{"q": 1, "intent": "x"}', '{"q": 1}'),
        (b'{"q": 1, "intent": "x"}', b'{"q": 1}'),
        ('{"intent":"a","q":{"intent":"nested stays"}}', '{"q": {"intent": "nested stays"}}'),
        ('{"intent":"x","q":"trunc', '{"q":"trunc'),
        ('{"q":"trunc', '{"q":"trunc'),
        ("not json", "not json"),
        ("[1]", "[1]"),
        (None, None),
        (7, 7),
    ],
)
def test_strip_intent(args: Any, expected: Any) -> None:
    assert strip_intent(args) == expected
    assert type(strip_intent(args)) is (dict if isinstance(args, MappingProxyType) else type(args))


def test_strip_intent_does_not_mutate() -> None:
    args = {"intent": "x", "q": 1}
    strip_intent(args)
    assert args == {"intent": "x", "q": 1}


def test_business_intent_is_never_stripped_removed_or_read() -> None:
    args = {"customer": "acme", "intent": "refund"}
    text = json.dumps(args)
    assert strip_intent(args, schema=CRM) == args
    assert strip_intent(text, schema=CRM) == text
    assert read_intent(args, schema=CRM) is None
    assert without_intent(CRM) == CRM
    assert not can_inject_intent(CRM)
    # with our schema the label goes
    assert strip_intent({"intent": "Looking", "q": 1}, schema=with_intent(SEARCH)) == {"q": 1}


# --- outcomes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, "Searching for OAuth handlers"),
        ({"outcome": "Found 12 results"}, "Found 12 results"),
        (
            {"outcome": "Found 12", "outcome_patch": {"from": "Searching", "to": "Searched"}},
            "Found 12",
        ),
        ({"outcome_patch": {"from": "Searching", "to": "Searched"}}, "Searched for OAuth handlers"),
        ({"outcome_patch": {"from": "searching", "to": "x"}}, "Searching for OAuth handlers"),
        ({"outcome_patch": {"from": "absent", "to": "x"}}, "Searching for OAuth handlers"),
        ({"outcome_patch": {"from": "O", "to": "0"}}, "Searching for 0Auth handlers"),
        ({"outcome_patch": {"from": "", "to": "x"}}, "Searching for OAuth handlers"),
        ({"outcome_patch": {"to": "x"}}, "Searching for OAuth handlers"),
        ({"outcome_patch": {"from": 1, "to": "x"}}, "Searching for OAuth handlers"),
        ({"outcome": ""}, "Searching for OAuth handlers"),
        ({"outcome": "   "}, "Searching for OAuth handlers"),  # only white space: no outcome
        (
            {"outcome": " \n", "outcome_patch": {"from": "Searching", "to": "Searched"}},
            "Searched for OAuth handlers",
        ),
    ],
)
def test_apply_outcome(kwargs: dict[str, Any], expected: str) -> None:
    assert apply_outcome("Searching for OAuth handlers", **kwargs) == expected


def test_apply_outcome_no_tense_rewriting_in_any_language() -> None:
    assert apply_outcome("Buscando errores") == "Buscando errores"
    assert apply_outcome(
        "ファイルを読んでいます", outcome_patch={"from": "読んで", "to": "読み"}
    ) == ("ファイルを読みいます")


def test_docs_state_the_description_and_its_length() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "intent.md").read_text(encoding="utf-8")
    quoted = " ".join(
        line.removeprefix("> ").strip() for line in doc.splitlines() if line.startswith("> ")
    )
    assert quoted == INTENT_DESCRIPTION
    assert f"**{len(INTENT_DESCRIPTION)} characters**" in doc
    assert f"({len(INTENT_DESCRIPTION.split())} words;" in doc
    prop = json.dumps(
        {"intent": {"type": "string", "description": INTENT_DESCRIPTION}}, separators=(",", ":")
    )[1:-1]
    assert f"{len(prop)} characters for the whole property" in doc


prop_names = st.text(min_size=1, max_size=8).filter(lambda n: n != "intent")
prop_schemas = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "array", "object"])},
    optional={
        "description": st.text(max_size=20),
        "enum": st.lists(st.text(max_size=3), max_size=3),
    },
)


@st.composite
def object_schemas(draw: st.DrawFn) -> tuple[Any, dict[str, Any]]:
    """(schema, a deep copy of it as plain dicts)."""
    props = draw(st.dictionaries(prop_names, prop_schemas, max_size=6))
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if props and draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    plain = copy.deepcopy(schema)
    if draw(st.booleans()):  # a read-only schema, as some frameworks hand out
        return MappingProxyType({**schema, "properties": MappingProxyType(props)}), plain
    return schema, plain


@given(object_schemas(), st.booleans())
def test_with_intent_properties(case: tuple[Any, dict[str, Any]], required: bool) -> None:
    schema, before = case
    out = with_intent(schema, required=required)
    assert dict(schema) == before  # never mutates
    assert dict(schema["properties"]) == before["properties"]
    assert next(iter(out["properties"])) == "intent"  # always first
    assert list(out["properties"])[1:] == list(schema["properties"])  # the rest keep their order
    assert with_intent(out, required=required) == out  # idempotent
    assert with_intent(out) == out
    assert ("intent" in out.get("required", [])) is required
    if required:
        assert out["required"] == ["intent", *schema.get("required", [])]
    else:
        assert out.get("required") == schema.get("required")
    assert has_intent_marker(out) and can_inject_intent(out)
    stripped = without_intent(out)
    assert list(stripped["properties"]) == list(schema["properties"])
    assert "intent" not in stripped.get("required", [])


def test_outcome_inside_traceloop_langchain_tool_output() -> None:
    from tracing.intent._args import result_outcome

    # Traceloop's LangChain instrumentation: {"output": <serialized ToolMessage>, "kwargs": {...}}
    content = json.dumps({"hits": 2, "outcome": "Found 2 results for oauth"})
    raw = json.dumps(
        {
            "output": {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "ToolMessage"],
                "kwargs": {"content": content, "type": "tool", "tool_call_id": "c1"},
            },
            "kwargs": {"tags": [], "name": "search_code"},
        }
    )
    assert result_outcome(raw) == ("Found 2 results for oauth", None)
