"""How the copy reads a SQLite ledger: the Arrow reader (ADBC's SQLite driver, on its own
thread) must give exactly what the row reader gives, and every way it can fail must end in the
row reader's exact answer, never in a wrong or missing copy."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.analytics.conftest import call, write_all
from tests.analytics.reference import reference
from tests.analytics.test_agreement import CASES
from tests.ledger.conftest import FAST
from tracing.analytics import Analytics, AnalyticsOptions, _source
from tracing.analytics._source import SQLiteSource, open_source
from tracing.ledger import ANCHOR_COLUMNS, AnchorWrite, open_ledger

pytest.importorskip("adbc_driver_sqlite")


def _both_readers(path: Path) -> tuple[Any, Any]:
    """The whole ledger through the Arrow reader and through the row reader."""
    url = f"sqlite:///{path}"
    fast = open_source(url)
    rows = open_source(url)
    assert isinstance(fast, SQLiteSource) and isinstance(rows, SQLiteSource)
    rows._adbc = False
    try:
        got = [t for t in fast.read_tables(None)]
        assert fast._adbc not in (None, False), "the Arrow reader was not used"
        want = [t for t in rows.read_tables(None)]
    finally:
        fast.close()
        rows.close()
    schema = _source.arrow_schema()
    return (
        pa.concat_tables(got) if got else schema.empty_table(),
        pa.concat_tables(want) if want else schema.empty_table(),
    )


TEXT = st.one_of(st.none(), st.text(max_size=12))


@st.composite
def writes(draw: st.DrawFn) -> list[AnchorWrite]:
    n = draw(st.integers(1, 30))
    out: list[AnchorWrite] = []
    for i in range(n):
        w = call(
            f"c{i}",
            draw(st.sampled_from(["grep", "read_file", "ツール"])),
            draw(TEXT),
            status=draw(st.sampled_from(["success", "error", "in_flight"])),
            session=draw(st.sampled_from(["s1", "s2"])),
            batch=draw(st.one_of(st.none(), st.sampled_from(["b1", "b2"]))),
            args=draw(st.one_of(st.none(), st.text(max_size=20), st.just({"a": 1}))),
            duration_ms=draw(st.one_of(st.none(), st.integers(0, 10_000))),
        )
        out.append(w)
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=writes(), batch_rows=st.integers(1, 8))
def test_arrow_reader_equals_row_reader(
    data: list[AnchorWrite], batch_rows: int, tmp_path_factory: Any, monkeypatch: Any
) -> None:
    """Same rows, same types, same values, whatever the data (NULLs at the start of a column,
    non-ASCII text, odd args) and however the reads split into batches."""
    monkeypatch.setattr(_source, "_ARROW_BATCH_ROWS", batch_rows)
    path = tmp_path_factory.mktemp("reader") / "l.db"
    ledger = open_ledger(f"sqlite:///{path}", options=FAST)
    try:
        write_all(ledger, data)
    finally:
        ledger.close()
    got, want = _both_readers(path)
    assert got.schema.equals(want.schema)
    assert got.to_pylist() == want.to_pylist()


def test_columns_null_for_a_whole_first_batch(tmp_path: Path, monkeypatch: Any) -> None:
    """The driver types each column from its first rows: a column that is NULL there (live
    calls have no duration, calls outside a batch no batch id) must still read as its type."""
    monkeypatch.setattr(_source, "_ARROW_BATCH_ROWS", 16)
    path = tmp_path / "l.db"
    ledger = open_ledger(f"sqlite:///{path}", options=FAST)
    try:
        live = [call(f"l{i}", "grep", None, status="in_flight", args=None) for i in range(40)]
        settled = [
            call(f"s{i}", "grep", "Looking", batch="b", args={"q": i}, duration_ms=1.5)  # pyright: ignore[reportArgumentType]
            for i in range(40)
        ]
        write_all(ledger, [*live, *settled])
    finally:
        ledger.close()
    got, want = _both_readers(path)
    assert got.column("duration_ms").type == pa.float64()
    assert got.column("duration_ms").null_count == 40
    assert got.to_pylist() == want.to_pylist()


def _ledger_with_calls(path: Path, n: int) -> str:
    url = f"sqlite:///{path}"
    ledger = open_ledger(url, options=FAST)
    try:
        write_all(
            ledger,
            [
                call(
                    f"c{i}",
                    "grep",
                    f"Looking for thing {i % 5}",
                    session=f"s{i % 3}",
                    args={"i": i % 4},
                )
                for i in range(n)
            ],
        )
    finally:
        ledger.close()
    return url


def _answers_match(engine: Analytics, url: str) -> None:
    ledger = open_ledger(url, options=FAST)
    try:
        anchors = [{c: a[c] for c in ANCHOR_COLUMNS} for a in ledger.changed_since(-1)]
    finally:
        ledger.close()
    for name, params in CASES:
        assert engine.run(name, params, sync=False).rows == reference(name, anchors, params)


def test_a_read_failing_part_way_is_read_again_row_by_row(tmp_path: Path, monkeypatch: Any) -> None:
    """The Arrow reader hands over a real first batch, then fails: the sync starts the read
    again with the row reader and the copy holds every anchor exactly once."""
    monkeypatch.setattr(_source, "_ARROW_BATCH_ROWS", 10)
    url = _ledger_with_calls(tmp_path / "l.db", 60)
    real = SQLiteSource._read_adbc

    def first_batch_then_fail(
        self: SQLiteSource,
        sql: str,
        batches: queue.Queue[Any],
        stop: threading.Event,
    ) -> None:
        one: queue.Queue[Any] = queue.Queue()
        real(self, sql, one, threading.Event())
        batches.put(one.get())
        batches.put(OSError("disk I/O error"))

    monkeypatch.setattr(SQLiteSource, "_read_adbc", first_batch_then_fail)
    engine = Analytics(url, options=AnalyticsOptions(snapshot=False))
    try:
        report = engine.sync()
        assert (report.rebuilt, report.rows, report.changed) == (True, 60, 60)
        assert getattr(engine._source, "_adbc") is False  # noqa: B009
        _answers_match(engine, url)
    finally:
        engine.close()


def test_a_reader_failing_at_once_falls_back(tmp_path: Path, monkeypatch: Any) -> None:
    """A driver that cannot even start (here: the typed first row is missing, as if a driver
    release reordered the compound select) -> the row reader, same answers."""
    url = _ledger_with_calls(tmp_path / "l.db", 30)
    monkeypatch.setattr(_source, "_starts_typed", lambda batch: False)
    engine = Analytics(url, options=AnalyticsOptions(snapshot=False))
    try:
        assert engine.sync().rows == 30
        assert getattr(engine._source, "_adbc") is False  # noqa: B009
        _answers_match(engine, url)
    finally:
        engine.close()


def test_an_abandoned_read_stops_its_thread(tmp_path: Path, monkeypatch: Any) -> None:
    """A caller that stops after the first table does not leave the reader thread behind."""
    monkeypatch.setattr(_source, "_ARROW_BATCH_ROWS", 2)
    url = _ledger_with_calls(tmp_path / "l.db", 40)
    source = open_source(url)
    try:
        tables = source.read_tables(None)
        assert next(tables).num_rows == 1  # the typed first row is dropped from the first batch
        tables.close()  # pyright: ignore[reportAttributeAccessIssue]
        assert not [t for t in threading.enumerate() if t.name == "intentrace-analytics-read"]
    finally:
        source.close()


def test_snapshot_is_written_behind_the_answer(tmp_path: Path) -> None:
    """The first build answers without waiting for the snapshot; a new process then starts
    from it (``close`` waits for the write)."""
    url = _ledger_with_calls(tmp_path / "l.db", 50)
    snap = tmp_path / "copy.parquet"
    first = Analytics(url, options=AnalyticsOptions(snapshot=str(snap)))
    assert first.sync().rebuilt
    assert first.wait_for_snapshot(timeout=30)
    assert snap.exists()
    first.close()
    second = Analytics(url, options=AnalyticsOptions(snapshot=str(snap)))
    try:
        report = second.sync()
        assert not report.rebuilt and report.rows == 50
        _answers_match(second, url)
    finally:
        second.close()


def test_a_rebuilt_copy_answers_then_takes_changes(tmp_path: Path) -> None:
    """After a whole rebuild the copy answers from the Arrow table it was built as (no copy
    into DuckDB first); the next change turns it into a DuckDB table, answers stay exact."""
    url = _ledger_with_calls(tmp_path / "l.db", 40)
    engine = Analytics(url, options=AnalyticsOptions(snapshot=False))
    try:
        assert engine.sync().rebuilt
        assert engine._arrow_calls is not None
        _answers_match(engine, url)
        assert engine.query("SELECT count(*) FROM calls").rows == [(40,)]
        ledger = open_ledger(url, options=FAST)
        try:
            write_all(ledger, [call("late", "grep", "Looking for thing 1", status="error")])
        finally:
            ledger.close()
        report = engine.sync()
        assert (report.rebuilt, report.changed, report.rows) == (False, 1, 41)
        assert engine._arrow_calls is None
        _answers_match(engine, url)
    finally:
        engine.close()
