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
from typing import Final

import numpy as np
import numpy.typing as npt

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


def _runs(keys: list[npt.NDArray[np.generic]], order: I64) -> Bools:
    """For rows taken in ``order``: True where a new run of equal keys starts."""
    n = len(order)
    start = np.zeros(n, dtype=np.bool_)
    if n == 0:
        return start
    start[0] = True
    for key in keys:
        k = key[order]
        start[1:] |= k[1:] != k[:-1]
    return start


def compute(rows: SessionRows) -> Structure:
    """The session-dependent columns of every call (see the module docstring)."""
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
    for d in range(1, min(MAX_WINDOW, n - 1) + 1):
        owner_mask[:-d] |= owner[d:] << (d - 1)
        fail_mask[:-d] |= failed[d:] << (d - 1)
    if n:
        lasts = np.append(firsts[1:], n) - 1
        left = np.minimum(lasts[sid] - np.arange(n, dtype=np.int64), MAX_WINDOW)
        keep = (np.int64(1) << left) - 1
        owner_mask &= keep
        fail_mask &= keep

    def next_gap(key: U64) -> I64:
        gap = np.full(n, -1, dtype=np.int64)
        idx = np.flatnonzero(rows.has_intent)
        if len(idx) < 2:
            return gap
        order = idx[np.lexsort((rn[idx], key[idx], sid[idx]))]
        same_next = (sid[order[1:]] == sid[order[:-1]]) & (key[order[1:]] == key[order[:-1]])
        here, nxt = order[:-1][same_next], order[1:][same_next]
        gap[here] = rn[nxt] - rn[here]
        return gap

    gap_intent = next_gap(rows.intent)
    gap_phrase = next_gap(rows.phrase)

    sibling = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_batch)
    if len(idx):
        order = idx[np.lexsort((rows.batch[idx], sid[idx]))]
        starts = np.flatnonzero(_runs([sid, rows.batch], order))
        sizes = np.diff(np.append(starts, len(order)))
        sibling[order] = np.repeat(sizes, sizes) > 1

    dup_sibling = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_batch & rows.has_intent)
    if len(idx):
        order = idx[np.lexsort((rn[idx], rows.intent[idx], rows.batch[idx], sid[idx]))]
        dup_sibling[order] = ~_runs([sid, rows.batch, rows.intent], order)

    repeat = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_args)
    if len(idx):
        order = idx[np.lexsort((rn[idx], rows.args[idx], rows.tool[idx], sid[idx]))]
        first = _runs([sid, rows.tool, rows.args], order)
        prev_failed = np.zeros(len(order), dtype=np.bool_)
        prev_failed[1:] = rows.failed[order[:-1]]
        repeat[order] = ~first & ~prev_failed

    reused = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_intent)
    if len(idx):
        has_args = rows.has_args.astype(np.int64)
        order = idx[
            np.lexsort((rows.args[idx], has_args[idx], rows.intent[idx], rows.tool[idx], sid[idx]))
        ]
        group_start = _runs([sid, rows.tool, rows.intent], order)
        new_value = rows.has_args[order] & (
            _runs([sid, rows.tool, rows.intent, has_args, rows.args], order)
        )
        starts = np.flatnonzero(group_start)
        distinct = np.add.reduceat(new_value.astype(np.int64), starts)
        sizes = np.diff(np.append(starts, len(order)))
        reused[order] = np.repeat(distinct, sizes) > 1

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
