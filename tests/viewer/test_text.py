"""The display sanitizer (viewer._text): property tests over hostile text, examples."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tracing.status import FRAME_BACKGROUND, FRAME_ERROR
from viewer import _text
from viewer._story import split_frame

# C0/C1 controls (newline and tab aside), DEL, bidi embeddings/overrides/isolates, surrogates
_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\u2028\u2029]"
)
_PIECES = st.one_of(
    st.characters(codec=None),
    st.sampled_from(["\x1b[31m", "\x1b]8;;http://x\x07", "\u202e", "\u2066", "\x00", "\x85",
                     "\r\n", "\t", "\ud800", "<b>", "認証", "**", "\u200d", "\x9b"]),
)  # fmt: skip
_HOSTILE = st.lists(_PIECES, max_size=40).map("".join)


@given(_HOSTILE)
def test_block_removes_every_control_and_bidi_override(text: str) -> None:
    out = _text.block(text)
    assert not _UNSAFE.search(out)
    assert "\x1b" not in out
    assert _text.block(out) == out  # idempotent


@given(_HOSTILE, st.integers(min_value=1, max_value=200))
def test_one_line_is_one_safe_line(text: str, limit: int) -> None:
    out = _text.one_line(text, limit)
    assert "\n" not in out and "\t" not in out
    assert not _UNSAFE.search(out)
    assert len(out) <= limit


@given(_HOSTILE, st.sampled_from(_text.FRAMES))
def test_short_label_keeps_the_framing(intent: str, frame: str) -> None:
    out = _text.short_label(intent + frame)
    head = _text.one_line(intent, 10**6)
    if head:
        assert out.endswith(frame)
        assert len(out) <= _text.INTENT_CHARS + len(frame)
    assert not _UNSAFE.search(out)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _HOSTILE,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_HOSTILE, inner, max_size=4),
    max_leaves=12,
)


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return ("dict", len(value))
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


@given(_JSON)
def test_structure_keeps_json_shape_and_sanitizes_strings(value: Any) -> None:
    out = _text.structure(value)
    assert _shape(out) == _shape(value)  # keys that differ only by removed characters stay two
    assert not [s for s in _strings(out) if _UNSAFE.search(s)]
    json.dumps(out)  # still JSON


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        pairs: dict[str, Any] = value
        return [s for k, v in pairs.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        items: list[Any] = value
        return [s for v in items for s in _strings(v)]
    return []


def test_examples() -> None:
    assert _text.one_line("invoice\u202egnp.exe") == "invoicegnp.exe"
    assert _text.block("a\x1b[31mred\x1b[0m\nline\x07two\u2067") == "ared\nlinetwo"
    long = "Reading " + "x" * 10_000 + FRAME_ERROR
    short = _text.short_label(long)
    assert short.endswith("…" + FRAME_ERROR) and len(short) == _text.INTENT_CHARS + len(FRAME_ERROR)
    assert split_frame("Indexing" + FRAME_BACKGROUND) == ("Indexing", FRAME_BACKGROUND)
    assert _text.structure({"k\u202e": ["v\x00", 1, None]}) == {"k": ["v", 1, None]}
