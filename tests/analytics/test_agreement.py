"""On generated ledgers the columnar fast path and the plain reference agree, row for row.

Writes go through the real ledger in a random order (in-flight before or after the settle,
calls of several sessions interleaved, re-recorded calls), with incremental syncs of the copy
in between; the final answers must equal the reference computed from the ledger's anchors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.analytics.conftest import T0, call, write_all
from tests.analytics.reference import FLAG_COLUMNS, call_flags, reference
from tests.ledger.conftest import FAST
from tracing.analytics import ANALYSES, Analytics, AnalyticsOptions
from tracing.ledger import ANCHOR_COLUMNS, AnchorWrite, open_ledger

INTENTS = [
    None,
    "Reading the callback router",
    "reading the callback-router",
    "Reading the config",
    "Running read_file",
    "Doing the next step",
    "Search",
    "Editing file 12 of 40",
    "ÉCOLE Straße ﬁle",  # NFKC and case folding
    "Deleting the cache folder",
    "  ",
    "設定ファイルを読んでいます",
    "ファイルを読んでいます",
    "读取文件",
]
ARGS: list[Any] = [
    None,
    {"path": "a.py", "n": 1},
    '{"n": 1, "path": "a.py"}',  # equivalent to the previous one
    {"path": "b.py"},
    {"q": ["x", {"b": 2, "a": 1}]},
    '{"q":["x",{"a":1,"b":2}]}',  # equivalent, nested
    "not json",
]
STATUSES = ["success", "success", "success", "error", "cancelled", "abandoned", "in_flight"]
TOOLS = ["read_file", "grep", "shell"]

CASES: list[tuple[str, dict[str, Any]]] = [
    ("precursors", {"k": 1, "min_support": 0.0, "limit": 10_000}),
    ("precursors", {"k": 3, "min_support": 0.0, "limit": 10_000}),
    ("precursors", {"k": 3, "min_support": 0.2, "by": "phrase", "limit": 10_000}),
    ("precursors", {"k": 2, "min_support": 0.0, "limit": 10_000, "across_turns": True}),
    ("precursors", {"k": 2, "min_support": 0.0, "limit": 10_000, "across_agents": True}),
    ("precursors", {"k": 2, "min_support": 0.0, "limit": 10_000, "include_siblings": True}),
    (
        "precursors",
        {
            "k": 4,
            "by": "phrase",
            "min_support": 0.0,
            "limit": 10_000,
            "across_turns": True,
            "across_agents": True,
            "include_siblings": True,
        },
    ),
    ("vague_intents", {"min_calls": 1}),
    ("vague_intents", {"min_calls": 1, "min_info": 14, "common_min": 2, "common_share": 0.2}),
    ("vague_intents", {"min_calls": 1, "common_min": 1, "min_novel": 12}),
    ("vague_intents", {"by": "intent", "min_calls": 1}),
    ("redundancy", {"by": "tool"}),
    ("redundancy", {"by": "session", "limit": 10_000}),
    ("tools", {"min_calls": 0}),
    ("over_time", {"bucket": "hour"}),
    ("failure_rate", {"bucket": "hour"}),
    ("failure_rate", {"bucket": "all", "by": "agent"}),
    ("failure_rate", {"bucket": "day", "by": "tool", "min_calls": 2}),
    ("failure_rate", {"bucket": "all"}),
]
T1H = T0 + 3_600_000_000_000
FILTERS: list[dict[str, Any]] = [
    {"tool": ["grep"]},
    {"agent": "sub"},
    {"session": ["s1", "s3"], "status": ["error", "success"]},
    {"since": T0 + 1_800_000_000_000, "until": T1H * 1 + 3_600_000_000_000},
    {"since": "2026-01-01T01:00:00Z", "tool": ["read_file", "shell"], "agent": "main"},
]


@st.composite
def ledgers(draw: st.DrawFn) -> tuple[list[AnchorWrite], list[int], dict[str, Any]]:
    """Writes in a random order, the positions after which the copy syncs, and filters."""
    n = draw(st.integers(1, 40))
    writes: list[tuple[int, AnchorWrite]] = []
    for i in range(n):
        status = draw(st.sampled_from(STATUSES))
        settled = call(
            f"c{i}",
            draw(st.sampled_from(TOOLS)),
            draw(st.sampled_from(INTENTS)),
            status=status,
            session=draw(st.sampled_from(["s1", "s1", "s2", "s3"])),
            batch=draw(st.sampled_from([None, "b1", "b2", "b3"])),
            args=draw(st.sampled_from(ARGS)),
            start_ms=draw(st.integers(0, 3 * 3_600_000)),
            duration_ms=draw(st.integers(0, 5000)),
            hidden=draw(st.booleans()) and draw(st.booleans()),
            agent=draw(st.sampled_from(["main", "main", "sub", None])),
            turn=draw(st.sampled_from([None, 1, 1, 2])),
        )
        writes.append((i, settled))
        if status != "in_flight" and draw(st.booleans()):
            live = dict(settled, status="in_flight")
            live.pop("end_ns", None)
            writes.append((i, live))  # pyright: ignore[reportArgumentType]
    order = draw(st.permutations(range(len(writes))))
    # calls of one session keep their first-write order only through the ledger's seq
    shuffled = [writes[j][1] for j in order]
    syncs = draw(st.lists(st.integers(0, len(shuffled)), max_size=3))
    return shuffled, sorted(set(syncs)), draw(st.sampled_from(FILTERS))


def _check(
    url: str,
    writes: list[AnchorWrite],
    syncs: list[int],
    snapshot: str | bool,
    filters: dict[str, Any],
) -> None:
    ledger = open_ledger(url, options=FAST)
    engine = Analytics(url, options=AnalyticsOptions(snapshot=snapshot))
    try:
        done = 0
        for point in [*syncs, len(writes)]:
            write_all(ledger, writes[done:point])
            done = point
            engine.sync()
        anchors = [
            {c: a[c] for c in ANCHOR_COLUMNS} for a in ledger.changed_since(-1, limit=100_000)
        ]
        for name, params in CASES:
            fast = engine.run(name, params, sync=False).rows
            assert fast == reference(name, anchors, params), (name, params)
            fast = engine.run(name, params, filters=filters, sync=False).rows
            assert fast == reference(name, anchors, params, filters), (name, params, filters)
        # the per-call columns of the view SQL panels read, against the plain definitions
        flags = f"SELECT tool_call_id, {', '.join(FLAG_COLUMNS)} FROM calls_v1 ORDER BY 1"
        assert engine.run_sql(flags, sync=False).rows == call_flags(anchors)
        fast = engine.run_sql(flags, filters=filters, sync=False).rows
        assert fast == call_flags(anchors, filters), filters
    finally:
        engine.close()
        ledger.close()


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ledgers())
def test_fast_path_matches_reference_sqlite(data: Any, tmp_path_factory: Any) -> None:
    writes, syncs, filters = data
    folder = tmp_path_factory.mktemp("agree")
    _check(f"sqlite:///{folder}/l.db", writes, syncs, str(folder / "copy.parquet"), filters)


@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ledgers())
def test_fast_path_matches_reference_postgres(data: Any, postgres_url: str) -> None:
    from tests.ledger.conftest import pg_schema_url

    writes, syncs, filters = data
    _check(pg_schema_url(postgres_url), writes, syncs, False, filters)


def test_every_analysis_is_covered() -> None:
    assert {name for name, _ in CASES} == set(ANALYSES)


def test_every_filter_against_the_reference(
    sqlite_url: str, make_ledger: Callable[..., Any], make_analytics: Callable[..., Analytics]
) -> None:
    """Every filter case over one fixed mixed ledger (the generated ones draw one each)."""
    ledger = make_ledger(sqlite_url)
    writes = [
        call(
            f"f{i}",
            TOOLS[i % 3],
            INTENTS[(i * 7) % len(INTENTS)],
            status=STATUSES[(i * 5) % len(STATUSES)],
            session=["s1", "s2", "s3"][i % 3 if i % 4 else 0],
            batch=[None, "b1", "b2"][(i // 2) % 3],
            args=ARGS[(i * 3) % len(ARGS)],
            start_ms=i * 240_000,
            agent=["main", "sub", None][(i // 3) % 3],
            turn=[1, 1, 2, None][(i // 5) % 4],
        )
        for i in range(60)
    ]
    write_all(ledger, writes)
    engine = make_analytics(sqlite_url)
    anchors = [{c: a[c] for c in ANCHOR_COLUMNS} for a in ledger.changed_since(-1)]
    for filters in FILTERS:
        for name, params in CASES:
            fast = engine.run(name, params, filters=filters).rows
            assert fast == reference(name, anchors, params, filters), (name, params, filters)


def test_snapshot_restart_and_incremental(
    sqlite_url: str, make_ledger: Callable[..., Any], tmp_path: Any
) -> None:
    """A new process starts from the snapshot, then folds in what was written since."""
    ledger = make_ledger(sqlite_url)
    snap = str(tmp_path / "copy.parquet")
    write_all(ledger, [call(f"a{i}", "grep", f"Looking for thing {i % 3}") for i in range(30)])
    first = Analytics(sqlite_url, options=AnalyticsOptions(snapshot=snap, snapshot_min_rows=1))
    report = first.sync()
    assert (report.rebuilt, report.changed, report.rows) == (True, 30, 30)
    first.close()
    write_all(ledger, [call("late", "grep", "Looking late", status="error")])
    second = Analytics(sqlite_url, options=AnalyticsOptions(snapshot=snap, recount_seconds=0))
    report = second.sync()
    assert (report.rebuilt, report.changed, report.rows) == (False, 1, 31)
    quiet = Analytics(sqlite_url, options=AnalyticsOptions(snapshot=snap))
    quiet.sync()
    assert quiet.sync().read == 0  # nothing written since: no reads at all
    quiet.close()
    anchors = [{c: a[c] for c in ANCHOR_COLUMNS} for a in ledger.changed_since(-1)]
    for name, params in CASES:
        assert second.run(name, params).rows == reference(name, anchors, params)
    # removing anchors behind the copy's back is noticed: the copy is rebuilt
    import sqlite3

    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM anchors WHERE tool_call_id IN ('a1', 'a2')")
    report = second.sync()
    assert report.rebuilt and report.rows == 29
    second.close()


def test_in_memory_ledger_through_its_object() -> None:
    """A ``sqlite:///:memory:`` ledger is read through its public API (``changed_since``)."""
    ledger = open_ledger("sqlite:///:memory:", options=FAST)
    try:
        writes = [
            call(
                f"m{i}",
                "grep" if i % 3 else "shell",
                f"Looking for item {i % 4}",
                status="error" if i % 5 == 0 else "success",
                start_ms=i,
            )
            for i in range(40)
        ]
        write_all(ledger, writes)
        engine = Analytics(ledger, options=AnalyticsOptions(snapshot=False))
        anchors = [{c: a[c] for c in ANCHOR_COLUMNS} for a in ledger.changed_since(-1)]
        for name, params in CASES:
            assert engine.run(name, params).rows == reference(name, anchors, params)
        write_all(ledger, [call("late", "shell", "Looking late", status="error", start_ms=99)])
        assert engine.sync().changed == 1
        engine.close()
    finally:
        ledger.close()
