"""The precursor masks' bit reader against the plain definition (one loop per distance), and
the name tokens of the vagueness measure against the plain words."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tracing.analytics._definitions import (
    NAME_JOINER,
    information,
    intent_tokens,
    normalize_intent,
)
from tracing.analytics._structure import MAX_WINDOW, _following_bits


def _plain(bits: list[int]) -> list[int]:
    n = len(bits)
    return [
        sum(bits[i + d] << (d - 1) for d in range(1, MAX_WINDOW + 1) if i + d < n) for i in range(n)
    ]


@given(st.lists(st.integers(0, 1), max_size=200))
def test_following_bits_is_the_next_window_of_bits(bits: list[int]) -> None:
    got = _following_bits(np.array(bits, dtype=np.int64))
    assert got.tolist() == _plain(bits)


def test_following_bits_all_ones() -> None:
    """Every bit set: the full window where 32 positions follow, fewer near the end."""
    n = 40
    got = _following_bits(np.ones(n, dtype=np.int64)).tolist()
    assert got[0] == (1 << MAX_WINDOW) - 1
    assert got[n - 2] == 1 and got[n - 1] == 0


@given(st.text(alphabet="abcXY09 /._:-#を読む検索é", max_size=40))
def test_name_tokens_are_the_words_regrouped(intent: str) -> None:
    """Names (``src/db.py``) only regroup the normalized intent's words: the same words in the
    same order, the same information (the generic rule compares the same text)."""
    norm = normalize_intent(intent)
    tokens = intent_tokens(norm, intent) or norm
    if norm is None:
        assert tokens is None
        return
    assert tokens is not None
    plain = intent_tokens(norm) or norm
    assert tokens.replace(NAME_JOINER, " ").split(" ") == plain.split(" ")
    assert information(tokens) == information(norm)
