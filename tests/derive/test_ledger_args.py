"""The args a settled call stores in the ledger: cut out of the JSON text as written (fast on
large args) means the same JSON as parsing and re-serialising it (the oracle, as it was done)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tracing.derive._call import _ledger_args
from tracing.intent._args import parse_json, to_json_text, unwrap_args


def oracle(redacted: Any, gate: bool) -> str | None:
    """The ledger's args by parsing and re-serialising (the way before the fast path)."""
    kwargs, positional = unwrap_args(parse_json(redacted))
    if kwargs is not None:
        kept = {k: v for k, v in kwargs.items() if not (gate and k == "intent")}
        if positional:
            return to_json_text({"args": list(positional), "kwargs": kept})
        return to_json_text(kept)
    if positional is not None:
        return to_json_text({"args": list(positional)})
    return to_json_text(redacted)


text = st.text(st.characters(codec="utf-8"), max_size=30) | st.sampled_from(
    ['say "hi"', "back\\slash", "é ü 中", "\n\t", '{"intent": "x"}']
)
value = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
kwargs = st.dictionaries(text.filter(lambda k: k != "intent"), value, max_size=4)


@st.composite
def args_text(draw: st.DrawFn) -> str:
    shape = draw(st.sampled_from(["intent first", "intent later", "no intent", "wrapped"]))
    rest = draw(kwargs)
    if shape == "intent first":
        obj: Any = {"intent": draw(text), **rest}
    elif shape == "intent later":
        obj = {**rest, "intent": draw(text)}
    elif shape == "wrapped":
        obj = {"args": draw(st.lists(value, max_size=2)), "kwargs": {"intent": draw(text), **rest}}
    else:
        obj = rest
    dumped = json.dumps(
        obj,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.sampled_from([None, 2])),
        separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])),
    )
    if draw(st.booleans()) and shape == "intent first":  # a repeated key, as a model may write
        dumped = dumped[:-1] + ', "intent": "again"}'
    cut = draw(st.integers(min_value=0, max_value=len(dumped)))
    if draw(st.integers(0, 4)) == 0:  # truncated, as some conventions keep args
        dumped = dumped[:cut]
    return draw(st.sampled_from(["", " ", "\n"])) + dumped


def _same_json(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return a == b


@given(args_text(), st.booleans())
def test_args_as_written_mean_what_the_parsed_way_gives(raw: str, gate: bool) -> None:
    assert _same_json(_ledger_args(raw, "keep", gate), oracle(raw, gate))


def test_large_args_keep_their_text() -> None:
    content = "def handler(request):  # é\n" * 20_000
    raw = json.dumps({"intent": "Reading the handler", "path": "a.py", "content": content})
    assert _ledger_args(raw, "keep", True) == raw.replace('"intent": "Reading the handler", ', "")
