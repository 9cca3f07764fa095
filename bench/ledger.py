"""Ledger throughput and app-thread cost, next to the raw limit of the same database.

    .venv/bin/python bench/ledger.py --quick          # ~1 min: sizes 0 and 100k
    .venv/bin/python bench/ledger.py                  # minutes: sizes 0, 200k, 500k, 1M

For SQLite (a WAL file) and PostgreSQL (a fresh database on INTENTRACE_TEST_POSTGRES_URL's
server), at each table size:

* peer ("raw"): the same final rows written with plain batched inserts (SQLite
  ``executemany`` INSERT, PostgreSQL COPY), 5 000 rows a transaction, into the same schema
  with the same indexes — the most the database takes with no upsert, no sequence numbers;
* ours ("live"): the live pattern through ``Ledger.record`` — each call in flight, then settled
  64 calls later — until ``flush()`` returns: calls per second.

Rounds alternate raw, live, raw, live...; each round's rows are deleted after it (not timed), so
every round of either side starts from the same table of the given size (without that, each
live round would start on the table its raw round had just grown, and the live figures at
small sizes would be measured on a larger table than the raw ones).

The producer records faster than any database takes writes and waits (sleeps) only while
the writer has several batches queued, so the writer always has full batches: this measures how
many calls per second the ledger sustains. What recording costs the app is measured
separately (app thread, below).

Then the added cost per tool call on the app thread with the ledger on vs off (an I/O-bound and
a CPU-bound app loop), and a flood of writes far faster than any database, to show the memory
bound (the queue caps, drops are counted).
"""

from __future__ import annotations

import argparse
import gc
import os
import secrets
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tracing.anchor import anchor_id
from tracing.environment_variables import INTENTRACE_TEST_POSTGRES_URL
from tracing.ledger import ANCHOR_COLUMNS, Ledger, LedgerOptions, open_ledger
from tracing.status import Status

BATCH = 5_000
SESSIONS = 64
OVERLAP = 64  # a call settles this many calls after it started
T0 = 1_700_000_000_000_000_000


def line(name: str, ours: float, peer: float, unit: str, note: str = "") -> None:
    ratio = ours / peer if peer else float("nan")
    extra = f"  ({note})" if note else ""
    print(f"{name}: ours {ours:,.0f} {unit}, peer {peer:,.0f} {unit}, ratio {ratio:.2f}{extra}")
    sys.stdout.flush()


# --- rows ---------------------------------------------------------------------------------
def call_id() -> str:
    return "call_" + secrets.token_hex(12)  # provider ids are random: the index pays for it


def writes_for(n: int, tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """In-flight and settle writes of ``n`` calls (built before timing: the app builds them)."""
    starts: list[dict[str, Any]] = []
    ends: list[dict[str, Any]] = []
    for i in range(n):
        provider = call_id()
        session = f"{tag}-{i % SESSIONS}"
        turn = 1 + i // 1000
        cid = anchor_id(provider, session_id=session, turn=turn)  # as every writer makes it
        t = T0 + i * 1000
        starts.append({
            "tool_call_id": cid, "provider_call_id": provider, "tool_name": "search_code",
            "status": Status.IN_FLIGHT, "session_id": session, "turn": turn,
            "batch_id": f"b{i // 4}",
            "agent_id": "coder", "intent": f"Searching for the handler of route {i}",
            "label": f"Searching for the handler of route {i}", "start_ns": t,
            "trace_id": secrets.token_hex(16), "span_id": secrets.token_hex(8),
            "args": '{"query": "route handler", "path": "src/"}',
            "redaction": '{"args": "keep", "output": "keep"}',
        })  # fmt: skip
        ends.append({
            "tool_call_id": cid, "tool_name": "search_code",
            "status": Status.SUCCESS if i % 10 else Status.ERROR,
            "outcome": f"Found 3 handlers for route {i}" if i % 10 else None,
            "label": f"Found 3 handlers for route {i}" if i % 10 else
                     f"Searching for the handler of route {i} · failed",
            "end_ns": t + 400_000_000, "result": '{"matches": 3}',
            "error": None if i % 10 else "TimeoutError: search took too long",
        })  # fmt: skip
    return starts, ends


def final_rows(
    starts: Sequence[dict[str, Any]], ends: Sequence[dict[str, Any]]
) -> list[tuple[Any, ...]]:
    """The rows the live pattern ends with, numbered plainly (what a raw insert would write)."""
    rows: list[tuple[Any, ...]] = []
    now = time.time_ns()
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        row = dict.fromkeys(ANCHOR_COLUMNS)
        row.update(s)
        row.update(e)
        row["seq"] = 2 * i + 1
        row["settle_seq"] = 2 * i + 2
        row["duration_ms"] = 400.0
        row["updated_ns"] = now + i
        row["version"] = i + 1
        rows.append(tuple(row[c] for c in ANCHOR_COLUMNS))
    return rows


# --- raw peers ----------------------------------------------------------------------------
_INSERT = (
    f"INSERT INTO anchors ({', '.join(ANCHOR_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in ANCHOR_COLUMNS)})"
)


class SQLiteRaw:
    """Plain batched inserts into the ledger file, same pragmas as the ledger's writer."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute("PRAGMA cache_size = -65536")

    def insert(self, rows: Sequence[tuple[Any, ...]], batch: int = BATCH) -> float:
        t = time.perf_counter()
        for k in range(0, len(rows), batch):
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(_INSERT, rows[k : k + batch])
            self.conn.execute("COMMIT")
        return time.perf_counter() - t

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM anchors").fetchone()[0])

    def remove(self, tag: str) -> None:
        """Delete one round's rows (not timed): the next round starts from the same table."""
        for table in ("anchors", "sessions"):
            self.conn.execute(
                f"DELETE FROM {table} WHERE session_id >= ? AND session_id < ?",
                (f"{tag}-", f"{tag}."),
            )
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.conn.close()


_COPY: Any = f"COPY anchors ({', '.join(ANCHOR_COLUMNS)}) FROM STDIN"


class PostgresRaw:
    """COPY into the ledger's ``anchors`` table, 5 000 rows a transaction."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def insert(self, rows: Sequence[tuple[Any, ...]], batch: int = BATCH) -> float:
        t = time.perf_counter()
        for k in range(0, len(rows), batch):
            with (
                self.conn.transaction(),
                self.conn.cursor().copy(_COPY) as cp,
            ):
                for row in rows[k : k + batch]:
                    cp.write_row(row)
        return time.perf_counter() - t

    def count(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM anchors").fetchone()
        return int(row[0]) if row else 0

    def remove(self, tag: str) -> None:
        """Delete one round's rows (not timed): the next round starts from the same table."""
        for table in ("anchors", "sessions"):
            self.conn.execute(
                f"DELETE FROM {table} WHERE session_id >= %s AND session_id < %s",
                (f"{tag}-", f"{tag}."),
            )
        self.conn.execute("VACUUM ANALYZE anchors")

    def close(self) -> None:
        self.conn.close()


def fill(raw: SQLiteRaw | PostgresRaw, target: int) -> None:
    """Grow the table to ``target`` rows (not timed)."""
    have = raw.count()
    while have < target:
        n = min(50_000, target - have)
        starts, ends = writes_for(n, f"fill{have}")
        raw.insert(final_rows(starts, ends), batch=50_000)
        have += n


# --- ours ---------------------------------------------------------------------------------
def writer_cpu(ledger: Ledger) -> float:
    """CPU seconds the ledger's threads (the writer and its preparer) have used (Linux: their
    thread CPU clocks)."""
    threads = ledger._writer.threads  # pyright: ignore[reportOptionalMemberAccess]
    return sum(
        time.clock_gettime(time.pthread_getcpuclockid(t.ident))  # pyright: ignore[reportArgumentType]
        for t in threads
    )


def live(ledger: Ledger, starts: Sequence[dict[str, Any]], ends: Sequence[dict[str, Any]]) -> float:
    """Seconds to record and write the live pattern of ``len(starts)`` calls."""
    queue_depth = ledger._queue.qsize  # pyright: ignore[reportOptionalMemberAccess]
    record = ledger.record
    dropped = ledger.stats()["dropped"]
    t = time.perf_counter()
    for i, w in enumerate(starts):
        record(w)  # pyright: ignore[reportArgumentType]
        if i >= OVERLAP:
            record(ends[i - OVERLAP])  # pyright: ignore[reportArgumentType]
        if i % 1024 == 0 and queue_depth() > 50_000:
            # Faster than any database: wait for the writer while it has 5 batches queued
            # (below the queue's bound, so nothing is dropped and the writer never runs dry),
            # polling rarely: a thread waking up every millisecond steals the GIL from the
            # writer between rows, and on a busy machine every wake-up costs a reschedule.
            while queue_depth() > 25_000:
                time.sleep(0.02)
    for w in ends[len(ends) - OVERLAP :]:
        record(w)  # pyright: ignore[reportArgumentType]
    assert ledger.flush(600), "flush timed out"
    elapsed = time.perf_counter() - t
    assert ledger.stats()["dropped"] == dropped, ledger.stats()
    return elapsed


def throughput(
    store: str,
    ledger: Ledger,
    raw: SQLiteRaw | PostgresRaw,
    sizes: Sequence[int],
    calls: int,
    rounds: int,
) -> dict[int, float]:
    """At each size, ``rounds`` alternating rounds of raw and live; best of each (the machine
    is shared: the best round is the least disturbed one), and the median ratio."""
    ours_by_size: dict[int, float] = {}
    for size in sizes:
        fill(raw, size)
        at = raw.count()
        raw_rates: list[float] = []
        live_rates: list[float] = []
        raw_cpu: list[float] = []
        live_cpu: list[float] = []
        for r in range(rounds):
            tag = f"raw{size}-{r}"
            starts, ends = writes_for(calls, tag)
            rows = final_rows(starts, ends)
            gc.collect()
            cpu = time.thread_time()
            raw_rates.append(calls / raw.insert(rows))
            raw_cpu.append((time.thread_time() - cpu) / calls)
            raw.remove(tag)
            tag = f"live{size}-{r}-{uuid.uuid4().hex[:6]}"
            starts, ends = writes_for(calls, tag)
            gc.collect()
            cpu = writer_cpu(ledger)
            live_rates.append(calls / live(ledger, starts, ends))
            live_cpu.append((writer_cpu(ledger) - cpu) / calls)
            raw.remove(tag)
        ours, peer = max(live_rates), max(raw_rates)
        ours_by_size[size] = ours
        ratios = sorted(o / p for o, p in zip(live_rates, raw_rates, strict=True))
        line(f"{store} live calls vs raw inserts @ {at:,} rows", ours, peer, "calls/s",
             f"best of {rounds} rounds of {calls:,} calls; median round ratio "
             f"{statistics.median(ratios):.2f}; peer: plain batched inserts of the same rows")  # fmt: skip
        if store == "sqlite":  # the work is in this process: its CPU time is the cost
            line(f"{store} ledger threads CPU per call vs raw CPU per row @ {at:,} rows",
                 min(live_cpu) * 1e6, min(raw_cpu) * 1e6, "us",
                 "lower is better; CPU time does not depend on what else runs on the machine")  # fmt: skip
    return ours_by_size


# --- app thread -----------------------------------------------------------------------------
def _busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def app_cost(url: str, n: int, work: str) -> dict[str, float]:
    """Per call of an app loop, without and with the ledger (medians of 5 alternating runs):
    wall time and the app thread's own CPU time, and the writer thread's CPU per call."""
    wait: Callable[[], None] = (
        (lambda: time.sleep(0.0002)) if work == "io" else (lambda: _busy(200))
    )

    def loop(sink: Callable[[Any], None]) -> tuple[float, float]:
        t, c = time.perf_counter(), time.thread_time()
        for i in range(n):
            cid = f"app-{uuid.uuid4().hex}"
            sink({"tool_call_id": cid, "tool_name": "search_code", "status": Status.IN_FLIGHT,
                  "session_id": "app", "intent": "Searching for the router", "start_ns": T0 + i})  # fmt: skip
            wait()
            sink({"tool_call_id": cid, "tool_name": "search_code", "status": Status.SUCCESS,
                  "outcome": "Found it", "end_ns": T0 + i + 1})  # fmt: skip
        return (time.perf_counter() - t) / n, (time.thread_time() - c) / n

    def noop(_: Any) -> None:
        return None

    with open_ledger(url) as ledger:
        off: list[tuple[float, float]] = []
        on: list[tuple[float, float]] = []
        writer: list[float] = []
        for _ in range(5):
            off.append(loop(noop))
            cpu = writer_cpu(ledger)
            on.append(loop(ledger.record))
            ledger.flush(60)
            writer.append((writer_cpu(ledger) - cpu) / n)
        assert ledger.stats()["dropped"] == 0
    med = statistics.median
    return {
        "wall_off": med(w for w, _ in off), "wall_on": med(w for w, _ in on),
        "cpu_off": med(c for _, c in off), "cpu_on": med(c for _, c in on),
        "writer": med(writer),
    }  # fmt: skip


def record_latency(url: str, n: int) -> float:
    """Mean time inside ``record`` (the writer busy in the background)."""
    with open_ledger(url) as ledger:
        starts, _ = writes_for(n, "lat")
        t = time.perf_counter()
        for w in starts:
            ledger.record(w)  # pyright: ignore[reportArgumentType]
        spent = time.perf_counter() - t
        ledger.flush(120)
    return spent / n


def rss_mib() -> float:
    """Resident memory now (Linux)."""
    for text in Path("/proc/self/status").read_text().splitlines():
        if text.startswith("VmRSS:"):
            return int(text.split()[1]) / 1024
    return float("nan")


def flood(url: str, n: int) -> None:
    """Writes offered much faster than any database takes them: the queue caps memory."""
    opts = LedgerOptions(max_queue_size=100_000)
    gc.collect()
    rss0 = rss_mib()
    with open_ledger(url, options=opts) as ledger:
        peak = 0
        rss_peak = rss0
        t = time.perf_counter()
        for i in range(n):
            ledger.record({"tool_call_id": f"flood-{i}", "tool_name": "t", "status": Status.IN_FLIGHT,
                           "session_id": "flood", "args": "x" * 200})  # fmt: skip
            if i % 10_000 == 0:
                peak = max(peak, ledger.stats()["queue_depth"])
                rss_peak = max(rss_peak, rss_mib())
        offered = time.perf_counter() - t
        ledger.flush(600)
        stats = ledger.stats()
    assert stats["written"] + stats["dropped"] == n
    print(
        f"memory bound: {n:,} writes offered in {offered:.1f} s ({n / offered:,.0f}/s); queue "
        f"depth peak {peak:,} <= {opts.max_queue_size:,}; written {stats['written']:,}, dropped "
        f"{stats['dropped']:,} (counted); RSS {rss0:,.0f} MiB before, peak {rss_peak:,.0f} MiB "
        f"(+{rss_peak - rss0:,.0f} MiB: the queue's bound, whatever the offered rate)"
    )


# --- main ---------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer calls")
    parser.add_argument("--sizes", help="comma-separated table sizes (default by mode)")
    parser.add_argument("--calls", type=int, help="calls measured at each size")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per size (best is kept)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--only", choices=["sqlite", "postgres", "app"], default=None)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [0, 100_000] if args.quick else [0, 200_000, 500_000, 1_000_000]
    )  # fmt: skip
    calls = args.calls or (10_000 if args.quick else 30_000)
    tmp = Path(tempfile.mkdtemp(prefix="intentrace-bench-"))
    print(f"# bench/ledger.py sizes={sizes} calls={calls} cpus={os.cpu_count()}")

    if args.only in (None, "sqlite"):
        db = tmp / "ledger.db"
        with open_ledger(f"sqlite:///{db}") as ledger:
            raw = SQLiteRaw(db)
            ours = throughput("sqlite", ledger, raw, sizes, calls, args.rounds)
            raw.close()
        print(f"sqlite: min live {min(ours.values()):,.0f} calls/s over sizes {sizes}")

    if args.only in (None, "postgres") and not args.no_postgres:
        import psycopg
        from psycopg import sql

        admin = os.environ.get(
            INTENTRACE_TEST_POSTGRES_URL, "postgresql://postgres@127.0.0.1:5432/test"
        )
        name = f"intentrace_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = f"{admin.rpartition('/')[0]}/{name}"
        try:
            with open_ledger(url) as ledger:
                raw_pg = PostgresRaw(url)
                ours = throughput("postgresql", ledger, raw_pg, sizes, calls, args.rounds)
                raw_pg.close()
            goal = min(ours.values())
            print(f"postgresql: min live {goal:,.0f} calls/s (goal >= 20,000)")
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )

    if args.only in (None, "app"):
        n = 2_000 if args.quick else 5_000
        url = f"sqlite:///{tmp}/app.db"
        for work in ("io", "cpu"):
            r = app_cost(url, n, work)
            line(f"app thread CPU per call, {work}-bound loop (200 us a call), ledger on vs off",
                 r["cpu_on"] * 1e6, r["cpu_off"] * 1e6, "us",
                 f"added {(r['cpu_on'] - r['cpu_off']) * 1e6:.2f} us per call on the app thread "
                 "(goal <= 10 us)")  # fmt: skip
            line(f"app wall time per call, {work}-bound loop, ledger on vs off",
                 r["wall_on"] * 1e6, r["wall_off"] * 1e6, "us",
                 f"the ledger's threads used {r['writer'] * 1e6:.0f} us CPU per call meanwhile: on "
                 "a machine with a free core they run beside the app, on a saturated one they "
                 "compete")  # fmt: skip
        lat = record_latency(url, 50_000 if args.quick else 200_000)
        print(f"record() on the app thread: {lat * 1e6:.2f} us per write (mean, writer busy)")
        flood(f"sqlite:///{tmp}/flood.db", 300_000 if args.quick else 1_000_000)


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
