"""Analytics over a large ledger: ours (columnar copy) vs SQLite SQL and pandas, same data.

    .venv/bin/python -m bench.analytics                 # 1 000 000 anchors (generated once)
    .venv/bin/python -m bench.analytics --anchors 100000 --ledger artifacts/a100k.db

Generates a realistic ledger (bench/_synthetic.py) unless the file already holds that many
anchors, then for each analysis (default parameters) prints

* ``cold``: ours in a fresh process (imports, snapshot load, sync, the analysis); the peers'
  first run in a fresh connection (SQLite) or including the load from the ledger (pandas);
* ``warm``: the same again in the same process (ours syncs with the ledger first, as always);

as ``name: ours X, peer Y, ratio Z`` lines, plus each default dashboard against the goal
(< 5 s cold, < 1 s warm): never analysed (a fresh process and no snapshot: it builds the copy
from the whole ledger, then answers), cold (a fresh process starting from the snapshot) and
warm, each also with an agent filter and with a time-and-tool filter, then each panel's warm
query with and without them; and the first build of the copy on its own, with its stages
(``read``: the ledger read and the per-anchor columns; ``fold``: the session columns). The peers compute
the same definitions (the per-anchor ones through the same Python functions, as SQLite UDFs
and pandas maps); the script checks that every peer returns our rows. SQLite SQL peers are
written for ``precursors`` (default scope), ``redundancy``, ``tools`` and ``over_time``, pandas
peers for ``tools`` and ``over_time``; ``vague_intents`` has none since its definition changed
(information across scripts).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._synthetic import fill
from tracing.analytics import ANALYSES, Analytics, AnalyticsOptions, Filters, load_dashboards
from tracing.analytics._analyses import BUCKETS
from tracing.analytics._analyses import FAILED as FAILED_STATUSES
from tracing.analytics._analyses import SETTLED as SETTLED_STATUSES
from tracing.analytics._definitions import (
    PHRASE_WORDS,
    args_redacted,
    canonical_args,
    information,
    intent_hidden,
    leading_phrase,
    names_tool,
    normalize_intent,
)
from tracing.ledger import open_ledger

SETTLED = tuple(sorted(SETTLED_STATUSES))
FAILED = tuple(sorted(FAILED_STATUSES))


def _sql_in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


# --- SQLite SQL: the per-anchor definitions once into a temp table (UDFs), then plain SQL ------
def sqlite_prepare(path: Path) -> sqlite3.Connection:
    """A connection with ``d``: every anchor with the per-anchor definitions applied (the same
    Python functions, as UDFs, called once per anchor)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.create_function("norm", 1, normalize_intent, deterministic=True)
    conn.create_function("phrase", 1, lambda n: leading_phrase(n, PHRASE_WORDS), deterministic=True)
    conn.create_function("info", 1, information, deterministic=True)
    conn.create_function("hidden", 1, intent_hidden, deterministic=True)
    conn.create_function(
        "args_key",
        2,
        lambda a, r: None if args_redacted(r) else canonical_args(a),
        deterministic=True,
    )
    conn.create_function("names_tool", 2, names_tool, deterministic=True)
    conn.execute("CREATE TEMP TABLE n AS SELECT rowid AS id, norm(intent) AS n FROM anchors")
    conn.execute(
        "CREATE TEMP TABLE d AS SELECT a.tool_call_id, a.session_id, a.seq, a.batch_id, "
        "a.agent_id, a.turn, "
        "a.tool_name, a.status, a.start_ns, a.duration_ms, n.n, phrase(n.n) AS ph, "
        "info(n.n) AS i, coalesce(length(a.intent), 0) AS chars, hidden(a.redaction) AS h, "
        "names_tool(n.n, a.tool_name) AS nt, args_key(a.args, a.redaction) AS a "
        "FROM anchors a JOIN n ON n.id = a.rowid"
    )
    conn.execute("DROP TABLE n")
    return conn


def sqlite_precursors(conn: sqlite3.Connection, p: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The default scope: the k calls of the same session, agent and turn before the owner's
    model step began (positions by window functions, the windows by an indexed join)."""
    item = "ph" if p["by"] == "phrase" else "n"
    conn.execute("DROP TABLE IF EXISTS e")
    conn.execute(f"""
    CREATE TEMP TABLE e AS
    WITH c AS (SELECT session_id, agent_id, turn, batch_id, {item} AS item,
                      status IN {_sql_in(SETTLED)} AS owner, status IN {_sql_in(FAILED)} AS failed,
                      row_number() OVER (PARTITION BY session_id, agent_id, turn
                                         ORDER BY seq, tool_call_id) AS sp
               FROM d)
    SELECT *, CASE WHEN batch_id IS NULL THEN sp ELSE min(sp) OVER
                (PARTITION BY session_id, agent_id, turn, batch_id) END AS se FROM c""")
    conn.execute("CREATE INDEX e_pos ON e (session_id, agent_id, turn, sp)")
    distances = " UNION ALL ".join(f"SELECT {d} AS d" for d in range(1, p["k"] + 1))
    sql = f"""
    WITH w AS (SELECT DISTINCT o.rowid AS owner_row, o.failed, x.item
               FROM e o CROSS JOIN ({distances}) dd
               JOIN e x ON x.session_id = o.session_id AND x.agent_id IS o.agent_id
                       AND x.turn IS o.turn AND x.sp = o.se - dd.d
               WHERE o.owner AND x.item IS NOT NULL),
    t AS (SELECT sum(owner) AS n, sum(failed) AS fl FROM e),
    occ AS (SELECT item, count(*) AS occurrences FROM e WHERE item IS NOT NULL GROUP BY item),
    g AS (SELECT item, sum(failed) AS cnt, count(*) AS windows FROM w GROUP BY item)
    SELECT g.item, cnt, cnt * 1.0 / fl, (cnt * n) * 1.0 / (fl * windows), windows, occurrences
    FROM g JOIN occ USING (item), t
    WHERE cnt > 0 AND cnt * 1.0 / fl >= ?
    ORDER BY 4 DESC, 2 DESC, 1 LIMIT ?"""
    return conn.execute(sql, (p["min_support"], p["limit"])).fetchall()


def sqlite_redundancy(conn: sqlite3.Connection, p: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Redundant siblings per batch and tool on equivalent args; repeats of an earlier batch's
    call (the latest such call by an indexed lookup) that did not fail."""
    key = "tool_name" if p["by"] == "tool" else "session_id"
    conn.execute("CREATE INDEX IF NOT EXISTS d_args ON d (session_id, tool_name, a, seq)")
    sql = f"""
    WITH f AS (
      SELECT {key} AS key, batch_id, tool_name,
        batch_id IS NOT NULL AND row_number() OVER bt = 1
          AND count(*) OVER (PARTITION BY session_id, batch_id, tool_name) > 1 AS head,
        CASE WHEN batch_id IS NOT NULL AND a IS NOT NULL THEN row_number() OVER
          (PARTITION BY session_id, batch_id, tool_name, a ORDER BY seq, tool_call_id) > 1
          ELSE 0 END AS red,
        CASE WHEN a IS NULL THEN 0 ELSE coalesce((
          SELECT y.status NOT IN {_sql_in(FAILED)} FROM d y
          WHERE y.session_id = x.session_id AND y.tool_name = x.tool_name AND y.a = x.a
            AND (y.seq < x.seq OR (y.seq = x.seq AND y.tool_call_id < x.tool_call_id))
            AND (y.batch_id IS NULL OR y.batch_id IS NOT x.batch_id)
          ORDER BY y.seq DESC, y.tool_call_id DESC LIMIT 1), 0) END AS rep,
        session_id
      FROM d x
      WINDOW bt AS (PARTITION BY session_id, batch_id, tool_name ORDER BY seq, tool_call_id)),
    r AS (SELECT session_id, batch_id, tool_name, max(red) AS any_red FROM f
          WHERE batch_id IS NOT NULL GROUP BY 1, 2, 3),
    g AS (SELECT f.key, f.head AND coalesce(r.any_red, 0) AS head_red, f.head, f.red, f.rep
          FROM f LEFT JOIN r ON r.session_id = f.session_id AND r.batch_id IS f.batch_id
                             AND r.tool_name = f.tool_name)
    SELECT key, count(*), sum(head), sum(head_red),
           CASE WHEN sum(head) > 0 THEN sum(head_red) * 1.0 / sum(head) END, sum(red), sum(rep),
           sum(rep) * 1.0 / count(*)
    FROM g GROUP BY key HAVING count(*) >= ? ORDER BY sum(red) + sum(rep) DESC, 2 DESC, 1
    LIMIT ?"""
    return conn.execute(sql, (p["min_calls"], p["limit"])).fetchall()


def sqlite_tools(conn: sqlite3.Connection, p: dict[str, Any]) -> list[tuple[Any, ...]]:
    settled, failed = _sql_in(SETTLED), _sql_in(FAILED)
    sql = f"""
    WITH q0 AS (SELECT tool_name, duration_ms,
                       row_number() OVER (PARTITION BY tool_name ORDER BY duration_ms) AS r,
                       count(*) OVER (PARTITION BY tool_name) AS c
                FROM d WHERE status IN {settled} AND duration_ms IS NOT NULL),
    q AS (SELECT tool_name, max(CASE WHEN r = (c * 50 + 99) / 100 THEN duration_ms END) AS p50,
                 max(CASE WHEN r = (c * 95 + 99) / 100 THEN duration_ms END) AS p95
          FROM q0 GROUP BY tool_name),
    g AS (SELECT tool_name, count(*) AS calls, sum(status IN {settled}) AS settled,
                 sum(status IN {failed}) AS errors, sum(status = 'abandoned') AS abandoned,
                 sum(n IS NOT NULL) AS labelled, sum(NOT h) AS visible FROM d GROUP BY tool_name)
    SELECT g.tool_name, calls, settled, errors,
           CASE WHEN settled > 0 THEN errors * 1.0 / settled END, abandoned, p50, p95, labelled,
           CASE WHEN visible > 0 THEN labelled * 1.0 / visible END
    FROM g LEFT JOIN q USING (tool_name) WHERE settled >= ? ORDER BY calls DESC, 1"""
    return conn.execute(sql, (p["min_calls"],)).fetchall()


def sqlite_over_time(conn: sqlite3.Connection, p: dict[str, Any]) -> list[tuple[Any, ...]]:
    width, offset, fmt = BUCKETS[p["bucket"]]
    sql = f"""
    WITH c AS (SELECT start_ns - ((start_ns - {offset}) % {width} + {width}) % {width} AS b,
                      n IS NOT NULL AS labelled, chars, i FROM d WHERE NOT h),
    g AS (SELECT b, count(*) AS calls, sum(labelled) AS labelled,
                 sum(CASE WHEN labelled THEN chars END) AS chars,
                 sum(CASE WHEN labelled THEN i END) AS info FROM c GROUP BY b)
    SELECT strftime('{fmt}', b / 1000000000, 'unixepoch'), calls, labelled,
           labelled * 1.0 / calls, CASE WHEN labelled > 0 THEN chars * 1.0 / labelled END,
           CASE WHEN labelled > 0 THEN info * 1.0 / labelled END
    FROM g ORDER BY b"""
    return conn.execute(sql).fetchall()


SQLITE: dict[str, Callable[[sqlite3.Connection, dict[str, Any]], list[tuple[Any, ...]]]] = {
    "precursors": sqlite_precursors,
    "redundancy": sqlite_redundancy,
    "tools": sqlite_tools,
    "over_time": sqlite_over_time,
}


# --- pandas: load the columns, derive per distinct value, then group ---------------------------
def pandas_load(path: Path) -> Any:
    import pandas as pd

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    df = pd.read_sql(
        "SELECT tool_call_id, session_id, seq, batch_id, tool_name, intent, status, start_ns, "
        "duration_ms, args, redaction FROM anchors",
        conn,
    )
    conn.close()
    for column in ("intent", "batch_id", "args", "redaction"):  # pandas 3: NaN for missing text
        df[column] = df[column].astype(object).where(df[column].notna(), None)
    intents = pd.Series(df["intent"].dropna().unique())
    norm = dict(zip(intents, intents.map(normalize_intent), strict=True))
    df["norm"] = [norm.get(i) if i is not None else None for i in df["intent"]]
    df["norm"] = df["norm"].astype(object).where(df["norm"].notna(), None)
    df["phrase"] = [leading_phrase(n, PHRASE_WORDS) for n in df["norm"]]
    info = {n: information(n) for n in norm.values()}
    df["info"] = [info[n] if n is not None else 0 for n in df["norm"]]
    df["chars"] = df["intent"].fillna("").str.len()
    red = df["redaction"].drop_duplicates()
    hidden = {r: intent_hidden(r) for r in red}
    redacted = [args_redacted(r) for r in df["redaction"]]
    df["hidden"] = [hidden[r] for r in df["redaction"]]
    df["akey"] = [
        None if r else canonical_args(a) for a, r in zip(df["args"], redacted, strict=True)
    ]
    pairs = df[["norm", "tool_name"]].drop_duplicates()
    named = {
        (n, t): names_tool(n, t) for n, t in zip(pairs["norm"], pairs["tool_name"], strict=True)
    }
    df["named"] = [named[(n, t)] for n, t in zip(df["norm"], df["tool_name"], strict=True)]
    df["owner"] = df["status"].isin(SETTLED)
    df["failed"] = df["status"].isin(FAILED)
    df = df.sort_values(["session_id", "seq", "tool_call_id"], kind="stable").reset_index(drop=True)
    return df.drop(columns=["args", "redaction"])


def pandas_tools(df: Any, p: dict[str, Any]) -> list[tuple[Any, ...]]:
    rows = []
    for tool, g in df.groupby("tool_name"):
        settled = g[g["owner"]]
        if len(settled) < p["min_calls"]:
            continue
        d = settled["duration_ms"].dropna().sort_values().to_numpy()

        def rank(pct: int, d: Any = d) -> float | None:
            return float(d[max(1, math.ceil(len(d) * pct / 100)) - 1]) if len(d) else None

        errors = int(g["status"].isin(FAILED).sum())
        abandoned = int((g["status"] == "abandoned").sum())
        labelled, visible = int(g["norm"].notna().sum()), int((~g["hidden"]).sum())
        rows.append((
            tool, len(g), len(settled), errors, errors / len(settled) if len(settled) else None,
            abandoned, rank(50), rank(95), labelled, labelled / visible if visible else None,
        ))  # fmt: skip
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def pandas_over_time(df: Any, p: dict[str, Any]) -> list[tuple[Any, ...]]:
    import pandas as pd

    width, offset, fmt = BUCKETS[p["bucket"]]
    v = df[~df["hidden"]]
    b = v["start_ns"] - (v["start_ns"] - offset) % width
    lab = v["norm"].notna()
    g = pd.DataFrame(
        {"b": b, "lab": lab, "chars": v["chars"].where(lab, 0), "info": v["info"].where(lab, 0)}
    ).groupby("b")
    agg = g.agg(calls=("lab", "size"), labelled=("lab", "sum"), chars=("chars", "sum"),
                info=("info", "sum"))  # fmt: skip
    rows = []
    records = [{str(k): v for k, v in r.items()} for r in agg.reset_index().to_dict("records")]
    for r in records:
        n, labelled, chars, info = (int(r[c]) for c in ("calls", "labelled", "chars", "info"))
        label = pd.Timestamp(int(r["b"]), unit="ns").strftime(fmt)
        rows.append((label, n, labelled, labelled / n,
                     chars / labelled if labelled else None,
                     info / labelled if labelled else None))  # fmt: skip
    return rows


PANDAS: dict[str, Callable[[Any, dict[str, Any]], list[tuple[Any, ...]]]] = {
    "tools": pandas_tools,
    "over_time": pandas_over_time,
}


# --- ours -------------------------------------------------------------------------------------
_COLD = """
import json, sys, time
t = time.perf_counter()
c = time.process_time()
from tracing.analytics import Analytics, load_dashboards
engine = Analytics(sys.argv[1])
kind, name = sys.argv[2], sys.argv[3]
filters = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
if kind == "analysis":
    engine.run(name, filters=filters)
else:
    engine.dashboard(load_dashboards([])[name], filters=filters)
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""

FILTERED: dict[str, dict[str, Any]] = {
    "an agent filter": {"agent": ["coder", "researcher"]},
    "a time and tool filter": {"since": "2026-01-10", "until": "2026-01-24",
                               "tool": ["read_file", "shell", "edit_file", "run_tests"]},
}  # fmt: skip
"""Filters the dashboards are also timed with (the synthetic ledger spans January 2026)."""

CPU: dict[str, float] = {}
"""CPU seconds of our cold/warm runs (the machine may be shared: wall time includes waiting)."""


def _cold(url: str, kind: str, name: str, filters: dict[str, Any] | None = None) -> float:
    extra = [json.dumps(filters)] if filters else []
    out = subprocess.run(
        [sys.executable, "-c", _COLD, url, kind, name, *extra],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    wall, cpu = json.loads(str(out.stdout).strip().splitlines()[-1])
    CPU[f"{kind} {name} cold"] = float(cpu)
    return float(wall)


def _panel_warm(
    engine: Analytics, dashboard: Any, panel: Any, filters: dict[str, Any] | None, repeat: int
) -> float:
    """One panel's warm query (no sync: the dashboard synced), median of ``repeat``."""
    chosen = Filters.of(filters).over(panel.filters.over(dashboard.filters))
    if panel.sql is not None:
        run = lambda: engine.run_sql(panel.sql, filters=chosen, sync=False)  # noqa: E731
    else:
        run = lambda: engine.run(panel.analysis, panel.params, filters=chosen, sync=False)  # noqa: E731
    run()
    return statistics.median(_timed(run)[0] for _ in range(repeat))


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    value = fn()
    return time.perf_counter() - t, value


def _line(name: str, ours: float, peer: float) -> str:
    return f"{name}: ours {ours:.3f} s, peer {peer:.3f} s, ratio {peer / ours:.1f}"


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    def close(x: Any, y: Any) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12)
        return x == y

    return len(a) == len(b) and all(
        len(r) == len(s) and all(close(x, y) for x, y in zip(r, s, strict=True))
        for r, s in zip(a, b, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--anchors", type=int, default=1_000_000)
    parser.add_argument("--ledger", default="artifacts/analytics-1m.db")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs (the median is shown)")
    parser.add_argument("--skip-peers", action="store_true", help="time ours only")
    parser.add_argument(
        "--keep-snapshot",
        action="store_true",
        help="start from an existing snapshot (no first build)",
    )
    args = parser.parse_args()
    path = Path(args.ledger).resolve()
    url = f"sqlite:///{path}"
    have = 0
    if path.exists():
        with sqlite3.connect(path) as conn:
            have = conn.execute("SELECT count(*) FROM anchors").fetchone()[0]
    if have != args.anchors:
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            p.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        open_ledger(url).close()
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        seconds, _ = _timed(lambda: fill(conn, args.anchors))
        conn.close()
        print(f"generated {args.anchors} anchors in {seconds:.1f} s: {path}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")

    snapshot = Path(f"{path}.analytics.parquet")
    if not args.keep_snapshot:
        snapshot.unlink(missing_ok=True)
    engine = Analytics(url, options=AnalyticsOptions())
    cpu0 = time.process_time()
    build, report = _timed(engine.sync)
    what = "sync from the snapshot" if args.keep_snapshot else "first build (no snapshot)"
    print(
        f"{what} of the copy ({report.rows} anchors): ours {build:.2f} s, "
        f"cpu {time.process_time() - cpu0:.2f} s ("
        + ", ".join(f"{stage} {seconds:.2f} s" for stage, seconds in report.stages.items())
        + ")"
    )

    engine.wait_for_snapshot()  # written behind the first answers; the cold runs start from it
    defaults = {name: a.resolve(None) for name, a in ANALYSES.items()}
    ours_cold = {name: _cold(url, "analysis", name) for name in ANALYSES}
    ours_warm: dict[str, float] = {}
    ours_rows: dict[str, list[tuple[Any, ...]]] = {}
    for name in ANALYSES:
        engine.run(name)
        times = []
        cpu0 = time.process_time()
        for _ in range(args.repeat):
            t, result = _timed(lambda name=name: engine.run(name))
            times.append(t)
            ours_rows[name] = result.rows
        ours_warm[name] = statistics.median(times)
        CPU[f"analysis {name} warm"] = (time.process_time() - cpu0) / args.repeat

    for name, dashboard in load_dashboards([]).items():
        # never analysed: a new process, no snapshot (it builds the copy, then answers)
        snapshot.rename(kept := snapshot.with_name(snapshot.name + ".kept"))
        first = _cold(url, "dashboard", name)
        first_cpu = CPU[f"dashboard {name} cold"]
        kept.replace(snapshot)
        cold = _cold(url, "dashboard", name)
        engine.dashboard(dashboard)
        cpu0 = time.process_time()
        warm = statistics.median(_timed(lambda d=dashboard: engine.dashboard(d))[0]
                                 for _ in range(args.repeat))  # fmt: skip
        warm_cpu = (time.process_time() - cpu0) / args.repeat
        print(
            f"dashboard {name}: never analysed {first:.2f} s (cpu {first_cpu:.2f} s; "
            f"goal < 5 s), cold {cold:.2f} s (cpu {CPU[f'dashboard {name} cold']:.2f} s; "
            f"goal < 5 s), warm {warm:.3f} s (cpu {warm_cpu:.3f} s; goal < 1 s)"
        )
        for label, chosen in FILTERED.items():
            cold = _cold(url, "dashboard", name, chosen)
            cold_cpu = CPU[f"dashboard {name} cold"]
            engine.dashboard(dashboard, filters=chosen)
            cpu0 = time.process_time()
            warm = statistics.median(
                _timed(lambda d=dashboard, f=chosen: engine.dashboard(d, filters=f))[0]
                for _ in range(args.repeat)
            )
            warm_cpu = (time.process_time() - cpu0) / args.repeat
            print(
                f"dashboard {name} with {label}: cold {cold:.2f} s (cpu {cold_cpu:.2f} s; "
                f"goal < 5 s), warm {warm:.3f} s (cpu {warm_cpu:.3f} s; goal < 1 s)"
            )
        for i, panel in enumerate(dashboard.panels):
            figures = [
                f"{label} {_panel_warm(engine, dashboard, panel, chosen, args.repeat):.3f} s"
                for label, chosen in {"no filter": None, **FILTERED}.items()
            ]
            print(f"  panel {i} ({panel.analysis or 'sql'}) warm: " + ", ".join(figures))
    engine.close()
    if args.skip_peers:
        for name in ANALYSES:
            print(
                f"{name}: ours cold {ours_cold[name]:.3f} s "
                f"(cpu {CPU[f'analysis {name} cold']:.2f} s), warm {ours_warm[name]:.3f} s "
                f"(cpu {CPU[f'analysis {name} warm']:.3f} s)"
            )
        return

    prepare, conn = _timed(lambda: sqlite_prepare(path))
    print(f"SQLite: derive into a temp table {prepare:.2f} s (in every cold SQLite figure below)")
    for name, fn in SQLITE.items():
        t, rows = _timed(lambda fn=fn, name=name: fn(conn, defaults[name]))
        cold = prepare + t
        warm = min(_timed(lambda fn=fn, name=name: fn(conn, defaults[name]))[0]
                   for _ in range(max(1, args.repeat - 1)))  # fmt: skip
        same = "same rows" if _same(rows, ours_rows[name]) else "DIFFERENT ROWS"
        print(_line(f"{name} cold vs SQLite SQL", ours_cold[name], cold) + f" ({same})")
        print(_line(f"{name} warm vs SQLite SQL", ours_warm[name], warm))
    conn.close()

    load, df = _timed(lambda: pandas_load(path))
    print(f"pandas: load and derive {load:.2f} s (in every cold pandas figure below)")
    for name, fn in PANDAS.items():
        t, rows = _timed(lambda fn=fn, name=name: fn(df, defaults[name]))
        warm = min(_timed(lambda fn=fn, name=name: fn(df, defaults[name]))[0]
                   for _ in range(max(1, args.repeat - 1)))  # fmt: skip
        same = "same rows" if _same(rows, ours_rows[name]) else "DIFFERENT ROWS"
        print(_line(f"{name} cold vs pandas", ours_cold[name], load + t) + f" ({same})")
        print(_line(f"{name} warm vs pandas", ours_warm[name], warm))


if __name__ == "__main__":
    main()
