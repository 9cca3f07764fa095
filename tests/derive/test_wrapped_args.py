"""The intent read from args however an instrumentation wraps them (by rule: wrapper members
``kwargs``/``args``/``input``/``arguments`` beside any flags, a first positional mapping or
string, nested up to a bound), and the ledger's args without it at the same path."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from redaction import RedactionPolicy
from tracing import attributes as A
from tracing.derive._call import _ledger_args, derive_call
from tracing.derive._conventions import AttributeConvention, SpanView, intent_candidate
from tracing.intent import IntentRegistry, read_intent
from tracing.intent._args import MAX_WRAP_DEPTH, WRAPPER_KEYS, locate_intent, without_path

INTENT = "Searching for MCP wiring"
REGISTRY = IntentRegistry(["search_code"])

key = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8).filter(
    lambda k: k != "intent" and k not in WRAPPER_KEYS
)
leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
flags = st.dictionaries(key, leaf, max_size=3)
business = st.dictionaries(key, leaf, max_size=4)


@st.composite
def wrapped(draw: st.DrawFn) -> tuple[Any, Any]:
    """(args with the intent, the same args without it), wrapped up to MAX_WRAP_DEPTH deep."""
    intent = draw(st.text(min_size=1, max_size=20).filter(lambda t: t.strip() != ""))
    rest = draw(business)
    with_it: Any = {"intent": intent, **rest}
    without: Any = dict(rest)
    budget = draw(st.integers(0, MAX_WRAP_DEPTH))
    while budget > 0:
        how = draw(st.sampled_from([*WRAPPER_KEYS, "positional"]))
        extra = draw(flags)
        if how == "positional":  # the first positional argument is a mapping
            if isinstance(with_it, list):  # a list of positional args is never itself one
                with_it, without = {"args": with_it, **extra}, {"args": without, **extra}
                budget -= 1
                continue
            tail = draw(st.lists(leaf, max_size=2))
            with_it, without = [with_it, *tail], [without, *tail]
            budget -= 1
            if budget and draw(st.booleans()):
                with_it, without = {"args": with_it, **extra}, {"args": without, **extra}
                budget -= 1
            continue
        if how == "args":
            if budget < 2:
                continue
            if not isinstance(with_it, list):  # positional args already are the list
                with_it, without = [with_it], [without]
            budget -= 1
        budget -= 1
        others = {"args": []} if how == "kwargs" and draw(st.booleans()) else {}
        with_it = {**extra, **others, how: with_it}
        without = {**extra, **others, how: without}
    return with_it, without


def _found_everywhere(text: str) -> bool:
    return intent_candidate(text, read=read_intent) is not None


@given(wrapped(), st.booleans())
def test_the_intent_is_found_in_any_wrapper_and_stripped_at_its_path(
    shapes: tuple[Any, Any], as_text: bool
) -> None:
    with_it, without = shapes
    raw: Any = json.dumps(with_it) if as_text else with_it
    hit = locate_intent(with_it, read=read_intent)
    assert hit is not None
    assert intent_candidate(raw, read=read_intent) == hit[0]
    assert without_path(with_it, hit[1]) == without
    # the ledger's args of the labelled call are what the args without the intent give
    stored = _ledger_args(json.dumps(with_it), "keep", True, hit[1])
    assert stored is not None
    assert json.loads(stored) == json.loads(str(_ledger_args(json.dumps(without), "keep", False)))


@given(st.dictionaries(key, leaf, max_size=4), flags)
def test_no_intent_nowhere(rest: dict[str, Any], extra: dict[str, Any]) -> None:
    for shape in ({"kwargs": rest, **extra}, {"args": [rest], **extra}, {"input": [rest]}):
        assert locate_intent(shape, read=read_intent) is None


def test_deeper_than_the_bound_is_not_searched() -> None:
    node: Any = {"intent": INTENT}
    for _ in range(MAX_WRAP_DEPTH + 1):
        node = {"kwargs": node}
    assert locate_intent(node, read=read_intent) is None


def _span(args: str, **extra: Any) -> SpanView:
    return SpanView(
        name="search_code",
        attributes={
            A.OPENINFERENCE_SPAN_KIND: A.OPENINFERENCE_TOOL,
            A.OI_TOOL_NAME: "search_code",
            A.OI_INPUT_VALUE: args,
            **extra,
        },
        trace_id="ab" * 16,
        span_id="cd" * 8,
        start_ns=1,
        end_ns=2,
    )


def test_a_wrapper_with_a_flag_names_the_call_and_the_ledger_loses_the_intent() -> None:
    args = json.dumps(
        {"args": [], "kwargs": {"intent": INTENT, "query": "mcp"}, "sanitize_inputs_outputs": True}
    )
    derived = derive_call(_span(args), policy=RedactionPolicy.default(), registry=REGISTRY)
    assert derived is not None
    assert derived.name == INTENT
    assert derived.anchor.get("intent") == INTENT
    stored = json.loads(str(derived.anchor.get("args")))
    assert stored == {"args": [], "kwargs": {"query": "mcp"}, "sanitize_inputs_outputs": True}


def test_a_first_positional_string_is_stripped_too() -> None:
    args = json.dumps({"args": [INTENT, "mcp"], "kwargs": {}})
    derived = derive_call(_span(args), policy=RedactionPolicy.default(), registry=REGISTRY)
    assert derived is not None
    assert derived.name == INTENT
    assert INTENT not in str(derived.anchor.get("args"))


def test_a_custom_convention_names_the_args_path() -> None:
    convention = AttributeConvention(
        name="acme",
        match=lambda name, attrs: attrs.get("acme.kind") == "tool",
        tool_name_keys=("acme.tool",),
        args_keys=("acme.payload",),
        args_path=("request", "params"),
    )
    args = json.dumps(
        {"request": {"params": {"intent": INTENT, "q": "x"}, "method": "tools/call"}, "v": 2}
    )
    view = SpanView(
        name="acme tool",
        attributes={"acme.kind": "tool", "acme.tool": "search_code", "acme.payload": args},
        trace_id="ab" * 16,
        span_id="cd" * 8,
        start_ns=1,
        end_ns=2,
    )
    derived = derive_call(
        view, policy=RedactionPolicy.default(), registry=REGISTRY, conventions=(convention,)
    )
    assert derived is not None
    assert derived.name == INTENT
    assert json.loads(str(derived.anchor.get("args"))) == {
        "request": {"params": {"q": "x"}, "method": "tools/call"},
        "v": 2,
    }


echo_args = st.dictionaries(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=8).filter(lambda k: k != "intent"),
    st.text(max_size=12) | st.integers(),
    max_size=3,
)


@given(st.text(min_size=1, max_size=30).filter(lambda t: t.strip() != ""), echo_args, st.booleans())
def test_traceloop_inputs_name_the_call_and_their_text_copy_loses_the_intent(
    intent: str, rest: dict[str, Any], as_json: bool
) -> None:
    # Traceloop's LangChain tool input: the args under `inputs`, and spelled out once more as
    # text in `input_str` (a Python repr; JSON when the tool was given a JSON string)
    args = {"intent": intent, **rest}
    text = json.dumps(args) if as_json else repr(args)
    wrapper = {"input_str": text, "tags": [], "inputs": args, "kwargs": {"tool_call_id": "c0"}}
    hit = locate_intent(wrapper, read=read_intent)
    assert hit == (intent, ("inputs", "intent"))
    assert hit is not None
    stored = json.loads(str(_ledger_args(json.dumps(wrapper), "keep", True, hit[1])))
    assert stored["inputs"] == rest
    assert stored["input_str"] == (json.dumps(rest) if as_json else repr(rest))
    assert stored["kwargs"] == {"tool_call_id": "c0"}


def test_an_intent_written_last_is_cut_with_its_comma() -> None:
    args = {"query": "mcp", "intent": INTENT}
    wrapper = {"input_str": repr(args), "inputs": args}
    stored = json.loads(str(_ledger_args(json.dumps(wrapper), "keep", True, ("inputs", "intent"))))
    assert stored == {"input_str": "{'query': 'mcp'}", "inputs": {"query": "mcp"}}
