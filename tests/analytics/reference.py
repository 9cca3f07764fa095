"""The analyses written the straightforward way: plain Python loops over every anchor.

Slow (seconds per 100k anchors) and obviously right; the tests check that the columnar fast
path returns exactly the same rows on hand-built and generated ledgers, and the benchmark
uses it as a cross-check.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tracing.analytics import Filters
from tracing.analytics._analyses import BUCKETS, get_analysis
from tracing.analytics._definitions import (
    PHRASE_WORDS,
    args_redacted,
    canonical_args,
    information,
    intent_hidden,
    intent_tokens,
    is_name,
    leading_phrase,
    names_tool,
    normalize_intent,
)

FAILED_STATUSES = frozenset({"error", "cancelled"})  # what "failed" means, stated once
SETTLED_STATUSES = frozenset({"success", "error", "cancelled"})  # abandoned: neither


@dataclass(frozen=True)
class _Call:
    keep: bool
    """The call passes the filters: it is counted (the others are context only)."""
    tool_call_id: str
    agent_id: str | None
    session_id: str
    seq: int
    turn: int | None
    batch_id: str | None
    tool_name: str
    status: str
    start_ns: int
    duration_ms: float | None
    intent: str | None
    norm: str | None
    phrase: str | None
    chars: int
    hidden: bool
    names_tool: bool
    args: str | None


def _calls(anchors: Iterable[Mapping[str, Any]], filters: Filters) -> list[_Call]:
    out: list[_Call] = []
    for a in anchors:
        norm = normalize_intent(a["intent"])
        redaction = a["redaction"]
        out.append(
            _Call(
                keep=filters.matches(a),
                tool_call_id=a["tool_call_id"],
                agent_id=a["agent_id"],
                session_id=a["session_id"],
                seq=a["seq"],
                turn=a["turn"],
                batch_id=a["batch_id"],
                tool_name=a["tool_name"],
                status=a["status"],
                start_ns=a["start_ns"],
                duration_ms=a["duration_ms"],
                intent=a["intent"],
                norm=norm,
                phrase=leading_phrase(norm, PHRASE_WORDS),
                chars=len(a["intent"]) if a["intent"] else 0,
                hidden=intent_hidden(redaction),
                names_tool=names_tool(norm, a["tool_name"]),
                args=None if args_redacted(redaction) else canonical_args(a["args"]),
            )
        )
    return out


def _sessions(calls: list[_Call]) -> dict[str, list[_Call]]:
    by: dict[str, list[_Call]] = defaultdict(list)
    for c in calls:
        by[c.session_id].append(c)
    for items in by.values():
        items.sort(key=lambda c: (c.seq, c.tool_call_id))
    return by


def _window(scope: list[_Call], call: _Call, k: int, include_siblings: bool) -> list[_Call]:
    """The k calls of ``scope`` (the calls ``call`` is compared with, in order) before the
    model step of ``call`` began (before ``call`` itself with ``include_siblings``)."""
    here = scope.index(call)
    start = here
    if not include_siblings and call.batch_id is not None:
        start = min(i for i, c in enumerate(scope) if c.batch_id == call.batch_id)
    return scope[max(0, start - k) : start]


def precursors(calls: list[_Call], p: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    k = p["k"]

    def item_of(c: _Call) -> str | None:
        return c.phrase if p["by"] == "phrase" else c.norm

    failures = settled = 0
    count: dict[str, int] = defaultdict(int)
    windows: dict[str, int] = defaultdict(int)
    occurrences: dict[str, int] = defaultdict(int)
    for items in _sessions(calls).values():
        for call in items:
            item = item_of(call)
            if item is not None and call.keep:
                occurrences[item] += 1
            if call.status not in SETTLED_STATUSES or not call.keep:
                continue
            settled += 1
            failed = call.status in FAILED_STATUSES
            failures += failed
            scope = [
                c
                for c in items
                if (p["across_agents"] or c.agent_id == call.agent_id)
                and (p["across_turns"] or c.turn == call.turn)
            ]
            window = _window(scope, call, k, p["include_siblings"])
            before = {item_of(c) for c in window} - {None}
            for x in before:
                assert x is not None
                windows[x] += 1
                count[x] += failed
    rows: list[tuple[Any, ...]] = []
    for item, n in count.items():
        if n == 0:
            continue
        support = n / failures
        if support < p["min_support"]:
            continue
        lift = (n * settled) / (failures * windows[item])
        rows.append((item, n, support, lift, windows[item], occurrences[item]))
    rows.sort(key=lambda r: (-r[3], -r[1], r[0]))
    return rows[: p["limit"]]


_REASONS = (None, "missing", "short", "names_tool", "generic", "reused")


def _generic(calls: list[_Call], p: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(tool, normalized intent) pairs whose tokens that are not common among the tool's
    distinct intents (over the whole ledger) carry less than ``min_novel`` information, and
    that name nothing (no path, file or identifier as written)."""
    # an intent's tokens: the greatest (as text) of its calls' tokens, names as written
    # differing between calls of one normalized intent (`src/db.py`, `src db.py`)
    intents: dict[str, dict[str, str]] = defaultdict(dict)
    named: set[tuple[str, str]] = set()  # a call of it names a path, file or identifier
    for c in calls:
        if c.norm is not None:
            mine = intent_tokens(c.norm, c.intent) or c.norm
            known = intents[c.tool_name].get(c.norm)
            intents[c.tool_name][c.norm] = mine if known is None else max(known, mine)
            if any(is_name(t) for t in mine.split(" ")):
                named.add((c.tool_name, c.norm))
    out: set[tuple[str, str]] = set()
    for tool, texts in intents.items():
        norms = set(texts)
        tokens = {n: set(texts[n].split(" ")) for n in norms}
        df: dict[str, int] = defaultdict(int)
        for toks in tokens.values():
            for t in toks:
                df[t] += 1
        least = max(p["common_min"], p["common_share"] * len(norms))
        for n, toks in tokens.items():
            novel = sum(information(t) for t in toks if df[t] < least)
            if novel < p["min_novel"] and (tool, n) not in named:
                out.add((tool, n))
    return out


def vague_intents(calls: list[_Call], p: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    generic = _generic(calls, p)
    arg_sets: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for c in calls:
        if c.norm is not None:
            key = (c.session_id, c.tool_name, c.norm)
            group = arg_sets[key]  # the group exists even when no call has args
            if c.args is not None:
                group.add(c.args)
    per_tool: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    per_intent: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    for c in calls:
        if c.hidden or not c.keep:
            continue
        info = information(c.norm)
        if c.norm is None:
            cat = 1
        elif info < p["min_info"]:
            cat = 2
        elif c.names_tool and info - information(normalize_intent(c.tool_name)) < p["min_info"]:
            cat = 3
        elif (c.tool_name, c.norm) in generic:
            cat = 4
        elif len(arg_sets[(c.session_id, c.tool_name, c.norm)]) > 1:
            cat = 5
        else:
            cat = 0
        counts = per_tool[c.tool_name]
        counts[0] += 1
        if cat:
            counts[cat] += 1
        per_intent[(c.tool_name, c.norm)].append(cat)
    rows: list[tuple[Any, ...]] = []
    if p["by"] == "intent":
        for (tool, norm), cats in per_intent.items():
            if len(cats) < p["min_calls"]:
                continue
            own = [c for c in cats if 1 <= c <= 4]
            reason = _REASONS[min(own)] if own else ("reused" if 5 in cats else None)
            rows.append((tool, norm, len(cats), information(norm), reason))
        rows.sort(key=lambda r: (r[4] is None, r[0], -r[2], r[1] is not None, r[1] or ""))
        return rows
    for tool, (n, missing, short, named, gen, reused) in per_tool.items():
        if n < p["min_calls"]:
            continue
        vague = missing + short + named + gen + reused
        rows.append((tool, n, missing, short, named, gen, reused, vague, vague / n))
    rows.sort(key=lambda r: (-r[8], -r[1], r[0]))
    return rows


def redundancy(calls: list[_Call], p: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for items in _sessions(calls).values():
        groups: dict[tuple[str, str], list[_Call]] = defaultdict(list)
        for c in items:
            if c.batch_id is not None:
                groups[(c.batch_id, c.tool_name)].append(c)
        for i, c in enumerate(items):
            key = c.tool_name if p["by"] == "tool" else c.session_id
            # a call that is filtered out still counts as the earlier call of later ones
            s = stats[key] if c.keep else [0, 0, 0, 0, 0]
            s[0] += 1
            group = groups.get((c.batch_id, c.tool_name), []) if c.batch_id is not None else []
            redundant = [
                x
                for j, x in enumerate(group)
                if x.args is not None and any(y.args == x.args for y in group[:j])
            ]
            if len(group) > 1 and group[0] is c:
                s[1] += 1  # a sibling batch (of this tool), counted at its first call
                s[2] += bool(redundant)
            s[3] += any(x is c for x in redundant)
            if c.args is not None:
                earlier = [
                    x
                    for x in items[:i]
                    if x.tool_name == c.tool_name
                    and x.args == c.args
                    and (x.batch_id is None or x.batch_id != c.batch_id)
                ]
                if earlier and earlier[-1].status not in FAILED_STATUSES:
                    s[4] += 1
    rows: list[tuple[Any, ...]] = []
    for key, (n, batches, red_batches, red, repeats) in stats.items():
        if n < p["min_calls"]:
            continue
        rows.append((key, n, batches, red_batches, red_batches / batches if batches else None,
                     red, repeats, repeats / n))  # fmt: skip
    rows.sort(key=lambda r: (-(r[5] + r[6]), -r[1], r[0]))
    return rows[: p["limit"]]


def _nearest_rank(values: list[float], percent: int) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) * percent + 99) // 100  # ceil(n * p / 100), 1-based
    return ordered[max(1, rank) - 1]


def tools(calls: list[_Call], p: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    by: dict[str, list[_Call]] = defaultdict(list)
    for c in calls:
        if c.keep:
            by[c.tool_name].append(c)
    rows: list[tuple[Any, ...]] = []
    for tool, items in by.items():
        settled = [c for c in items if c.status in SETTLED_STATUSES]
        if len(settled) < p["min_calls"]:
            continue
        failed = sum(c.status in FAILED_STATUSES for c in items)
        abandoned = sum(c.status == "abandoned" for c in items)
        durations = [c.duration_ms for c in settled if c.duration_ms is not None]
        labelled = sum(c.norm is not None for c in items)
        visible = sum(not c.hidden for c in items)
        rows.append((
            tool, len(items), len(settled), failed,
            failed / len(settled) if settled else None, abandoned,
            _nearest_rank(durations, 50), _nearest_rank(durations, 95),
            labelled, labelled / visible if visible else None,
        ))  # fmt: skip
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def over_time(calls: list[_Call], p: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    width, offset, fmt = BUCKETS[p["bucket"]]
    groups: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for c in calls:
        if c.hidden or not c.keep:
            continue
        bucket = c.start_ns - (c.start_ns - offset) % width
        g = groups[bucket]
        g[0] += 1
        if c.norm is not None:
            g[1] += 1
            g[2] += c.chars
            g[3] += information(c.norm)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    rows: list[tuple[Any, ...]] = []
    for bucket in sorted(groups):
        n, labelled, chars, info = groups[bucket]
        label = (epoch + timedelta(microseconds=bucket // 1000)).strftime(fmt)
        rows.append((label, n, labelled, labelled / n, chars / labelled if labelled else None,
                     info / labelled if labelled else None))  # fmt: skip
    return rows


def failure_rate(calls: list[_Call], p: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for c in calls:
        if not c.keep:
            continue
        key: tuple[Any, ...] = ()
        if p["bucket"] != "all":
            width, offset, _ = BUCKETS[p["bucket"]]
            key += (c.start_ns - (c.start_ns - offset) % width,)
        if p["by"] != "none":
            key += (c.agent_id if p["by"] == "agent" else c.tool_name,)
        g = groups[key]
        g[0] += 1
        g[1] += c.status in SETTLED_STATUSES
        g[2] += c.status in FAILED_STATUSES
        g[3] += c.status == "abandoned"
    rows: list[tuple[Any, ...]] = []
    for key in sorted(groups, key=lambda k: tuple((v is None, v) for v in k)):
        n, settled, failed, abandoned = groups[key]
        if n < p["min_calls"]:
            continue
        shown = list(key)
        if p["bucket"] != "all":
            fmt = BUCKETS[p["bucket"]][2]
            shown[0] = (epoch + timedelta(microseconds=key[0] // 1000)).strftime(fmt)
        rows.append((*shown, n, settled, failed, failed / settled if settled else None, abandoned))
    return rows


FLAG_COLUMNS = ("rn", "scope_rn", "step_rn", "sibling", "redundant_sibling", "repeat", "reused")
"""The per-call columns of the view ``calls_v1`` that depend on the rest of the session."""


def call_flags(
    anchors: Iterable[Mapping[str, Any]], filters: Mapping[str, Any] | None = None
) -> list[tuple[Any, ...]]:
    """``(tool_call_id, *FLAG_COLUMNS)`` of every call that passes ``filters``, by id, computed
    plainly (each from the whole session, whatever the filters)."""
    calls = _calls(anchors, Filters.of(filters))
    out: list[tuple[Any, ...]] = []
    for items in _sessions(calls).values():
        for i, c in enumerate(items):
            if not c.keep:
                continue
            scope = [x for x in items if x.agent_id == c.agent_id and x.turn == c.turn]
            step = scope.index(c)
            if c.batch_id is not None:
                step = min(j for j, x in enumerate(scope) if x.batch_id == c.batch_id)
            batch = [
                x
                for x in items
                if c.batch_id is not None
                and x.batch_id == c.batch_id
                and x.tool_name == c.tool_name
            ]
            redundant = c.args is not None and any(
                x.args == c.args for x in batch[: batch.index(c)]
            ) if batch else False  # fmt: skip
            earlier = [
                x
                for x in items[:i]
                if c.args is not None
                and x.tool_name == c.tool_name
                and x.args == c.args
                and (x.batch_id is None or x.batch_id != c.batch_id)
            ]
            repeat = bool(earlier) and earlier[-1].status not in FAILED_STATUSES
            reused = c.norm is not None and len({
                x.args for x in items
                if x.tool_name == c.tool_name and x.norm == c.norm and x.args is not None
            }) > 1  # fmt: skip
            out.append((c.tool_call_id, i + 1, scope.index(c) + 1, step + 1, len(batch) > 1,
                        redundant, repeat, reused))  # fmt: skip
    return sorted(out)


_IMPLEMENTATIONS = {
    "failure_rate": failure_rate,
    "precursors": precursors,
    "vague_intents": vague_intents,
    "redundancy": redundancy,
    "tools": tools,
    "over_time": over_time,
}


def reference(
    name: str,
    anchors: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any] | None = None,
    filters: Mapping[str, Any] | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of analysis ``name`` over ``anchors`` (every column of the ledger), computed plainly;
    ``filters`` select the calls counted (the others stay as context)."""
    analysis = get_analysis(name)
    resolved = analysis.resolve(params)
    return _IMPLEMENTATIONS[name](_calls(anchors, Filters.of(filters)), resolved)
