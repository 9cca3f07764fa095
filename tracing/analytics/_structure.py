"""Per-call columns that depend on the other calls of the session (vectorized with numpy).

They do not depend on any analysis parameter, so they are computed once when a session changes
and kept in the columnar copy; the analyses then only filter, join and group. Input rows are the
calls of whole sessions in ``(session_id, seq, tool_call_id)`` order; strings arrive as 64-bit
hashes (every grouping is inside one session, where a collision is practically impossible).

* ``rn``: 1-based position of the call in its session.
* ``scope_rn``: 1-based position of the call in its *scope*: the calls of the same session,
  agent and turn (the sequence a failure's precursor window is taken from).
* ``step_rn``: the ``scope_rn`` where the call's model step began (the first call of its batch
  in the scope; its own ``scope_rn`` when it has no batch). A precursor window of ``k`` is the
  ``k`` scope positions before it, so a call's own siblings are never in its window.
* ``owner0..2`` / ``fail0..2``: bit planes of precursor masks: bit ``d-1`` of plane ``b`` is
  bit ``b`` of the number of settled (failed) calls whose model step began ``d`` scope positions
  later; so the windows a call is in, for any ``k`` up to ``MAX_WINDOW``, are counted without a
  join (``step_owners``: settled calls whose step began at this call; the masks are exact while
  it stays below 8).
* ``gap_intent`` / ``gap_phrase``: scope positions to the next call of the scope with the same
  normalized intent / leading phrase (-1: none). A window that holds an intent several times is
  credited to its last occurrence only, so each window counts it once.
* ``sibling``: the call's batch (one model step) has at least two calls of its tool.
* ``redundant_sibling``: an earlier call of the same batch and tool has equivalent arguments.
* ``batch_head``: the first call of a batch's calls of one tool, when there are at least two
  (one per sibling batch and tool: what per-batch figures count).
* ``batch_redundant``: ``batch_head`` of a batch whose calls of that tool hold a redundant
  sibling.
* ``repeat``: an earlier call of the session in another batch had the same tool and equivalent
  arguments, and the latest such call did not fail (so it is not a retry after an error).
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
"""Largest precursor window ``k``."""

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class SessionRows:
    """The inputs, one entry per call, in ``(session_id, seq, tool_call_id)`` order."""

    session: U64
    scope: U64
    """A hash of the call's agent and turn (its scope inside the session)."""
    batch: U64
    has_batch: Bools
    intent: U64
    has_intent: Bools
    phrase: U64
    tool: U64
    args: U64
    has_args: Bools
    owner: Bools
    """The call is settled: it owns a precursor window."""
    failed: Bools


PLANES: Final = 3
"""Bit planes of the per-position owner counts the masks hold (counts up to 7)."""


@dataclass(frozen=True)
class Structure:
    """The outputs, aligned with the input rows."""

    rn: I64
    scope_rn: I64
    step_rn: I64
    gap_intent: I64
    gap_phrase: I64
    owner_planes: tuple[I64, ...]
    fail_planes: tuple[I64, ...]
    step_owners: I64
    sibling: Bools
    redundant_sibling: Bools
    batch_head: Bools
    batch_redundant: Bools
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


def _first_of_group(start: Bools) -> I64:
    """For each position of a grouped order, the position where its group starts."""
    positions = np.arange(len(start), dtype=np.int64)
    return np.maximum.accumulate(np.where(start, positions, 0))


def _following_bits(bits: I64) -> I64:
    """For each position ``i`` of a 0/1 array, the ``MAX_WINDOW`` bits after it as one integer
    (bit ``d-1`` = ``bits[i + d]``; zero past the end). The bits are packed once and each
    result is read as an unaligned 64-bit word at its byte, then shifted: a few passes over
    the array instead of one per distance."""
    n = len(bits)
    packed = np.packbits(bits.astype(np.uint8), bitorder="little")
    padded = np.zeros(len(packed) + 9, dtype=np.uint8)
    padded[: len(packed)] = packed
    # every byte offset as the start of a little-endian 64-bit word (overlapping views)
    words = np.ndarray(
        shape=(len(packed) + 1,), dtype="<u8", buffer=padded.data, offset=0, strides=(1,)
    )
    after = np.arange(1, n + 1, dtype=np.int64)  # bit index of the position just after
    values = words[after >> 3] >> (after & 7).astype(np.uint64)
    return (values & np.uint64((1 << MAX_WINDOW) - 1)).astype(np.int64)


def _window_masks(
    rows: SessionRows, order: I64, start: Bools, scope_rn: I64, step_rn: I64
) -> tuple[tuple[I64, ...], tuple[I64, ...], I64]:
    """The precursor masks: for each call, bit ``d-1`` of plane ``b`` is bit ``b`` of the number
    of settled (failed) calls whose model step began ``d`` scope positions later
    (``d`` = 1..``MAX_WINDOW``), and per call the number of settled calls whose step began at
    it (``step_owners``). Worked in scope order, then put back in row order."""
    n = len(order)
    first = _first_of_group(start)
    step_at = first + step_rn[order] - 1  # scope-order index where each call's step began
    owners_at = np.bincount(step_at[rows.owner[order]], minlength=n).astype(np.int64)
    fails_at = np.bincount(step_at[rows.failed[order]], minlength=n).astype(np.int64)
    group_end = np.empty(n, dtype=np.int64)
    if n:
        ends = np.append(np.flatnonzero(start)[1:], n) - 1
        group_end = np.repeat(ends, np.diff(np.append(np.flatnonzero(start), n)))
    keep = (np.int64(1) << np.minimum(group_end - np.arange(n, dtype=np.int64), MAX_WINDOW)) - 1
    planes: list[tuple[I64, ...]] = []
    for counts in (owners_at, fails_at):
        out: list[I64] = []
        for b in range(PLANES):
            bits = (counts >> b) & 1
            mask = np.zeros(n, dtype=np.int64)
            if bits.any():
                # bit d-1: the position d later; read across scope ends, then cut at them
                mask = _following_bits(bits) & keep
            placed = np.empty(n, dtype=np.int64)
            placed[order] = mask
            out.append(placed)
        planes.append(tuple(out))
    step_owners = np.empty(n, dtype=np.int64)
    step_owners[order] = owners_at
    return planes[0], planes[1], step_owners


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

    scope, batch, tool = _combine(sid, _dense(rows.scope)), _dense(rows.batch), _dense(rows.tool)
    intent, phrase, args = _dense(rows.intent), _dense(rows.phrase), _dense(rows.args)

    scope_rn = np.zeros(n, dtype=np.int64)
    scope_order, scope_start = _in_order(scope)
    scope_rn[scope_order] = np.arange(n, dtype=np.int64) - _first_of_group(scope_start) + 1

    step_rn = scope_rn.copy()
    idx = np.flatnonzero(rows.has_batch)
    if len(idx):
        order, start = _in_order(_combine(scope[idx], batch[idx]))
        in_order = idx[order]
        step_rn[in_order] = scope_rn[in_order[_first_of_group(start)]]

    owner_planes, fail_planes, step_owners = _window_masks(
        rows, scope_order, scope_start, scope_rn, step_rn
    )

    def next_gap(key: I64) -> I64:
        gap = np.full(n, -1, dtype=np.int64)
        idx = np.flatnonzero(rows.has_intent)
        if len(idx) < 2:
            return gap
        order, start = _in_order(_combine(scope[idx], key[idx]))
        same_next = ~start[1:]
        here, nxt = idx[order[:-1][same_next]], idx[order[1:][same_next]]
        gap[here] = scope_rn[nxt] - scope_rn[here]
        return gap

    gap_intent = next_gap(intent)
    gap_phrase = next_gap(phrase)

    sibling = np.zeros(n, dtype=np.bool_)
    redundant = np.zeros(n, dtype=np.bool_)
    head = np.zeros(n, dtype=np.bool_)
    batch_redundant = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_batch & rows.has_args)
    if len(idx):
        order, start = _in_order(_combine(sid[idx], batch[idx], tool[idx], args[idx]))
        redundant[idx[order]] = ~start
    idx = np.flatnonzero(rows.has_batch)
    if len(idx):
        order, start = _in_order(_combine(sid[idx], batch[idx], tool[idx]))
        in_order = idx[order]
        starts = np.flatnonzero(start)
        sizes = np.diff(np.append(starts, len(order)))
        sibling[in_order] = np.repeat(sizes, sizes) > 1
        heads = in_order[starts][sizes > 1]
        head[heads] = True
        has_redundant = np.maximum.reduceat(redundant[in_order].astype(np.int64), starts) > 0
        batch_redundant[in_order[starts][(sizes > 1) & has_redundant]] = True

    repeat = np.zeros(n, dtype=np.bool_)
    idx = np.flatnonzero(rows.has_args)
    if len(idx):
        order, first = _in_order(_combine(sid[idx], tool[idx], args[idx]))
        in_order = idx[order]
        # a call without a batch is a model step of its own
        step = np.where(rows.has_batch, batch, len(batch) + np.arange(n, dtype=np.int64))
        run_start = first.copy()
        run_start[1:] |= step[in_order[1:]] != step[in_order[:-1]]
        run_first = _first_of_group(run_start)  # earlier calls of the same batch: one run
        group_first = _first_of_group(first)
        previous = run_first - 1  # the latest equivalent call of another batch
        has_previous = run_first > group_first
        prev_failed = rows.failed[in_order[np.maximum(previous, 0)]]
        repeat[in_order] = has_previous & ~prev_failed

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
        scope_rn=scope_rn,
        step_rn=step_rn,
        gap_intent=gap_intent,
        gap_phrase=gap_phrase,
        owner_planes=owner_planes,
        fail_planes=fail_planes,
        step_owners=step_owners,
        sibling=sibling,
        redundant_sibling=redundant,
        batch_head=head,
        batch_redundant=batch_redundant,
        repeat=repeat,
        reused=reused,
    )
