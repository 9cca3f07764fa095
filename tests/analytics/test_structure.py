"""The precursor masks' bit reader against the plain definition (one loop per distance)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

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
