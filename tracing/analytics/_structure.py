"""Per-call columns that depend on the other calls of the session (vectorized with numpy).

They do not depend on any analysis parameter, so they are computed once when a session changes
and kept in the columnar copy; the analyses then only filter and group. Input rows are the calls
of whole sessions in ``(session_id, seq, tool_call_id)`` order; strings arrive as 64-bit hashes
(every grouping is inside one session, where a collision is practically impossible).

* ``rn``: 1-based position of the call in its session.
* ``owner_mask`` / ``fail_mask``: bit ``d-1`` is set when the call ``d`` positions later in the
  same session (``d`` = 1..``MAX_WINDOW``) is settled / failed. A failure's precursor window of
  ``k`` calls is the ``k`` positions before it, so these masks let the precursor analysis count,
  for any ``k`` up to ``MAX_WINDOW``, the windows an intent falls into without a join.
* ``gap_intent`` / ``gap_phrase``: positions to the next call of the session with the same
  normalized intent / leading phrase (-1: none). A window that contains an intent several times
  is credited to its last occurrence only, so each window counts once.
* ``sibling``: the call's batch has at least two calls.
* ``dup_sibling``: an earlier call of the same batch has the same normalized intent.
* ``repeat``: an earlier call of the session had the same tool and equivalent arguments, and the
  latest such call did not fail (so it is not a retry after an error).
* ``reused``: the session used the call's normalized intent, for its tool, with at least two
  different arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

MAX_WINDOW: Final = 32
"""Largest precursor window ``k`` the masks support."""

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class SessionRows:
    """The inputs, one entry per call, in ``(session_id, seq, tool_call_id)`` order."""

    session: U64
    batch: U64
    has_batch: Bools
    intent: U64
    has_intent: Bools
    phrase: U64
    tool: U64
    args: U64
    has_args: Bools
    owner: Bools
    failed: Bools


@dataclass(frozen=True)
class Structure:
    """The outputs, aligned with the input rows."""

    rn: I64
    owner_mask: I64
    fail_mask: I64
    gap_intent: I64
    gap_phrase: I64
    sibling: Bools
    dup_sibling: Bools
    repeat: Bools
    reused: Bools


def _dense(key: npt.NDArray[np.generic]) -> I64:
    """Dense numbers (0..distinct-1) for the values of ``key`` (hash-based, no sort)."""
    array: Any = pa.array(key)  # (the stubs leave a dictionary array's types unknown)
    codes: I64 = array.dictionary_encode().indices.to_numpy().astype(np.int64)
    return codes


_LIMIT: Final = 1 << 62


def _combine(*codes: I64) -> I64:
    """One int64 key per row that is equal exactly when every one of ``codes`` (non-negative)
    is; renumbered densely only when the product of the ranges would overflow."""
    key = codes[0]
    for more in codes[1:]:
        width = int(more.max(initial=0)) + 1
        if (int(key.max(initial=0)) + 1) * width >= _LIMIT:
            key = _dense(key)
        key = key * width + more
    return key


def _in_order(key: I64) -> tuple[I64, Bools]:
    """The rows grouped by ``key``, each group in row order (a stable sort: the keys are
    session-major and rows come in session order, so this is mostly a merge of runs), and
    where each group starts in that order."""
    order = np.argsort(key, kind="stable").astype(np.int64)
    start = np.ones(len(order), dtype=np.bool_)
    if len(order):
        grouped = key[order]
        start[1:] = grouped[1:] != grouped[:-1]
    return order, start


def compute(rows: SessionRows) -> Structure:
    """The session-dependent columns of every call (see the module docstring).

    Rows come in session order, so within a session row order is ``rn`` order: every
    "earlier"/"next" below is a stable sort (or a hash lookup) on dense group codes, not a
    multi-key sort."""
    n = len(rows.session)
    session_start = np.ones(n, dtype=np.bool_)
    if n:
        session_start[1:] = rows.session[1:] != rows.session[:-1]
    sid = np.cumsum(session_start, dtype=np.int64) - 1
    firsts = np.flatnonzero(session_start)
    rn = np.arange(n, dtype=np.int64) - firsts[sid] + 1 if n else np.zeros(0, np.int64)

    # bit d-1: the call d positions later; built across session ends, then cut at them
    owner_mask = np.zeros(n, dtype=np.int64)
    fail_mask = np.zeros(n, dtype=np.int64)
    owner = rows.owner.astype(np.int64)
    failed = rows.failed.astype(np.int64)
    shifted = np.empty(n, dtype=np.int64)  # one scratch array, not 64 temporaries
    for d in range(1, min(MAX_WINDOW, n - 1) + 1):
        for bits, mask in ((owner, owner_mask), (failed, fail_mask)):
            np.left_shift(bits[d:], d - 1, out=shifted[:-d])
            np.bitwise_or(mask[:-d], shifted[:-d], out=mask[:-d])
    if n:
        lasts = np.append(firsts[1:], n) - 1
        left = np.minimum(lasts[sid] - np.arange(n, dtype=np.int64), MAX_WINDOW)
        keep = (np.int64(1) << left) - 1
        owner_mask &= keep
        fail_mask &= keep

    intent, phrase = _dense(rows.intent), _dense(rows.phrase)
    batch, tool, args = _dense(rows.batch), _dense(rows.tool), _dense(rows.args)

    def next_gap(key: I64) -> I64:
        gap = np.full(n, -1, dtype=np.int64)
        idx = np.flatnonzero(rows.has_intent)
        if len(idx) < 2:
            return gap
        order, start = _in_order(_combine(sid[idx], key[idx]))
        same_next = ~start[1:]
        here, nxt = idx[order[:-1][same_next]], idx[order[1:][same_next]]
        gap[here] = rn[nxt] - rn[here]
        return gap

    gap_intent = next_gap(intent)
    gap_phrase = next_gap(phrase)

    sibling = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_batch)
    if len(idx):
        order, start = _in_order(_combine(sid[idx], batch[idx]))
        sizes = np.diff(np.append(np.flatnonzero(start), len(order)))
        sibling[idx[order]] = np.repeat(sizes, sizes) > 1

    dup_sibling = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_batch & rows.has_intent)
    if len(idx):
        order, start = _in_order(_combine(sid[idx], batch[idx], intent[idx]))
        dup_sibling[idx[order]] = ~start

    repeat = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_args)
    if len(idx):
        order, first = _in_order(_combine(sid[idx], tool[idx], args[idx]))
        in_order = idx[order]
        prev_failed = np.zeros(len(order), dtype=np.bool_)
        prev_failed[1:] = rows.failed[in_order[:-1]]
        repeat[in_order] = ~first & ~prev_failed

    reused = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_intent)
    if len(idx):
        group = _combine(sid[idx], tool[idx], intent[idx])
        has_args = rows.has_args[idx]
        order, value_start = _in_order(_combine(group, has_args.astype(np.int64), args[idx]))
        grouped = group[order]
        group_start = np.ones(len(order), dtype=np.bool_)
        group_start[1:] = grouped[1:] != grouped[:-1]
        new_value = has_args[order] & value_start
        starts = np.flatnonzero(group_start)
        distinct = np.add.reduceat(new_value.astype(np.int64), starts)
        sizes = np.diff(np.append(starts, len(order)))
        reused[idx[order]] = np.repeat(distinct, sizes) > 1

    return Structure(
        rn=rn,
        owner_mask=owner_mask,
        fail_mask=fail_mask,
        gap_intent=gap_intent,
        gap_phrase=gap_phrase,
        sibling=sibling,
        dup_sibling=dup_sibling,
        repeat=repeat,
        reused=reused,
    )
