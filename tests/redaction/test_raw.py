"""JSON text scrubbed where it lies (``redaction._raw``) against the pure-Python walker, its
oracle: the same removals, in the same order, under the same paths, and output that parses to
the walker's (byte for byte when the input is laid out as the walker writes JSON)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.redaction import build_payload, build_text_args
from redaction import ScrubOptions
from redaction._patterns import sensitive_key
from redaction._raw import KEY_WORDS, RawJson
from redaction._scrubber import Scrubber
from tests.redaction.test_engine import KEYS, PLANTED, SOUP, TEXT, VALUES

pytest.importorskip("hyperscan")

FAST = Scrubber(ScrubOptions(engine="hyperscan"))
PYTHON = Scrubber(ScrubOptions(engine="python"))
SMALL = ScrubOptions(max_depth=4, max_nodes=40)
SMALL_PAIR = (
    Scrubber(ScrubOptions(**{**vars(SMALL), "engine": "hyperscan"})),
    Scrubber(ScrubOptions(**{**vars(SMALL), "engine": "python"})),
)


def _canon(v: Any) -> Any:
    """``v`` with JSON text inside strings parsed (the walkers re-serialise what they scrub)."""
    if isinstance(v, str):
        if v.lstrip()[:1] in ("{", "["):
            try:
                return ("json", _canon(json.loads(v)))
            except ValueError:
                return v
        return v
    if isinstance(v, dict):
        return {k: _canon(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_canon(x) for x in v]
    return v


def _raw(scrubber: Scrubber) -> RawJson:
    fast = scrubber._fast
    assert fast is not None and fast.raw is not None
    return fast.raw


def _dump(doc: Any, layout: dict[str, Any]) -> str:
    return json.dumps(doc, **layout)


def _check(text: str, pair: tuple[Scrubber, Scrubber] = (FAST, PYTHON)) -> bool:
    """Raw path vs oracle on ``text``; False when the raw path left it to a walker."""
    fast, python = pair
    raw = _raw(fast)
    got = raw.scrub(text, "$")
    want, want_trail = python.scrub_text(text)
    if got is None:
        return False
    out, trail = got
    assert [(e.path, e.rule) for e in trail] == [(e.path, e.rule) for e in want_trail]
    if not want_trail:
        assert out is text
        return True
    json.loads(out)  # still JSON text
    assert _canon(json.loads(out)) == _canon(json.loads(want))
    if text == json.dumps(json.loads(text), ensure_ascii=False):
        assert out == want
    return True


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# secret-looking keys at every depth, values of every kind (planted secrets, near misses,
# Unicode, big integers, JSON text inside strings, escaped or not)
DOCS = st.recursive(
    VALUES.map(_jsonable),
    lambda kids: st.one_of(
        st.dictionaries(KEYS, kids, max_size=4),
        st.lists(kids, max_size=4),
        st.dictionaries(KEYS, kids, max_size=3).map(json.dumps),
    ),
    max_leaves=30,
).map(lambda v: {"args": v})
LAYOUTS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"ensure_ascii": False},
        {"ensure_ascii": True},
        {"indent": 1},
        {"separators": (",", ":")},
        {"ensure_ascii": True, "indent": "\t"},
    ]
)


@SETTINGS
@given(DOCS, LAYOUTS)
def test_raw_path_gives_the_walkers_removals(doc: Any, layout: dict[str, Any]) -> None:
    _check(_dump(doc, layout))


@SETTINGS
@given(
    st.lists(st.tuples(KEYS, PLANTED | TEXT | SOUP), min_size=1, max_size=12),
    st.lists(KEYS, max_size=6),
    LAYOUTS,
)
def test_secrets_and_secret_keys_at_every_depth(
    items: list[tuple[str, str]], levels: list[str], layout: dict[str, Any]
) -> None:
    doc: Any = dict(items)
    for i, key in enumerate(levels):
        doc = [doc, {"k": i}] if i % 2 else {key: doc, "n": 10**15 + i}
    _check(_dump(doc, layout))
    # the same inside JSON text inside a string, at that depth
    _check(json.dumps({"text": _dump(doc, layout), "n": 1}))


@SETTINGS
@given(DOCS)
def test_bounds_are_the_walkers(doc: Any) -> None:
    """Depth and node bounds: the raw path gives the walker's cuts or leaves them to it."""
    _check(json.dumps(doc), SMALL_PAIR)


def test_the_benchmark_payloads_take_the_raw_path() -> None:
    for size in (5_000, 100_000):
        payload, clean, _ = build_payload(7, size)
        for doc in (payload, clean):
            for layout in ({}, {"indent": 1}, {"ensure_ascii": False, "separators": (",", ":")}):
                assert _check(_dump(doc, layout))
        # a few long strings: left to the walker (it scans them once)
        text, _, _ = build_text_args(7, size)
        assert _check(text) == (size < 10_000)
        _check_walkers_agree(text)


def test_what_the_raw_path_leaves_to_the_walkers() -> None:
    raw = _raw(FAST)
    gh = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
    pad = "x" * 5000
    for text in [
        '{"a": "' + gh + '", "b": "' + pad + '"',  # not JSON: scrubbed as text by a walker
        '{"a": 1, "a": "' + gh + '"}',  # duplicate keys
        '{"' + gh + '": 1}',  # a key with something to remove
        '["\\ud800' + gh + '"]',  # a lone surrogate (json.loads takes it, jiter does not)
        "[" * 40 + "]" * 40,  # deeper than the bound
    ]:
        assert raw.scrub(text, "$") is None
        _check_walkers_agree(text)


def _check_walkers_agree(text: str) -> None:
    assert FAST.scrub_text(text) == PYTHON.scrub_text(text)


@settings(max_examples=300, deadline=None)
@given(KEYS | st.text(max_size=30))
def test_every_sensitive_key_holds_a_key_word(key: str) -> None:
    # the engine finds keys by these words (caseless ASCII, with the look-alike spellings)
    if sensitive_key(key):
        assert any(w in key.lower() for w in KEY_WORDS)


def _singles(auto: Any) -> list[Any]:
    from redaction._engine import Automaton

    return [Automaton((e,)) for e in auto.expressions]


ENGINES = {
    "value rules": _raw(FAST).fast.auto,
    "raw JSON": _raw(FAST).auto,
}
SINGLES = {name: _singles(auto) for name, auto in ENGINES.items()}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.builds(_dump, DOCS, LAYOUTS),
        st.lists(SOUP | TEXT | st.sampled_from(['"max_tokens": ', '"b": "{}"', '" [', "{"])).map(
            "".join
        ),
    ),
    st.sampled_from(sorted(ENGINES)),
)
def test_the_database_reports_what_each_expression_reports(text: str, engine: str) -> None:
    # Vectorscan 5.4.12 has missed (and misplaced) matches of one expression in a database of
    # many (``redaction._raw.OPENERS``): every match must be there, and only those
    data = text.encode("utf-8", "surrogatepass")
    got = set(ENGINES[engine].scan(data))
    want = {(end, i) for i, one in enumerate(SINGLES[engine]) for end, _ in one.scan(data)}
    assert got == want
