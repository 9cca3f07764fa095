"""The columnar copy of the ledger (DuckDB, in memory) and the analyses over it.

Why a copy: on a million anchors, row-store SQL (SQLite, PostgreSQL) takes seconds per analysis;
a columnar table with the per-call definitions computed once answers in tens of milliseconds
(docs/analytics.md has the measurements). The copy is kept in step with the ledger by
``updated_ns``: each sync reads only the anchors written since the last one (plus a short overlap
for late commits), derives their columns, and recomputes the session-dependent columns of the
sessions they touch. A Parquet snapshot beside the ledger lets a new process start from the last
copy instead of the whole ledger.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import io
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import duckdb
import numpy as np

from tracing.analytics._analyses import (
    FAILED_SQL,
    SETTLED_SQL,
    AnalyticsError,
    get_analysis,
)
from tracing.analytics._dashboards import Dashboard, Panel
from tracing.analytics._derive import (
    PHRASE_WORDS,
    args_redacted,
    canonical_args,
    intent_hidden,
    leading_phrase,
    normalize_intent,
    word_count,
)
from tracing.analytics._source import SOURCE_COLUMNS, Source, open_source
from tracing.analytics._structure import SessionRows, compute
from tracing.ledger import Ledger

logger = logging.getLogger("tracing.analytics")

DERIVE_VERSION: Final = "1"
"""Bumped whenever a definition changes: a snapshot of another version is rebuilt."""
_SNAPSHOT_VERSION: Final = f"{DERIVE_VERSION}/duckdb-{duckdb.__version__}"
"""What a snapshot must match: ``args_key`` is DuckDB's ``hash()``, which may change between
DuckDB releases."""

BASE_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("tool_call_id", "VARCHAR"),
    ("session_id", "VARCHAR"),
    ("seq", "BIGINT"),
    ("batch_id", "VARCHAR"),
    ("agent_id", "VARCHAR"),
    ("tool_name", "VARCHAR"),
    ("status", "VARCHAR"),
    ("start_ns", "BIGINT"),
    ("duration_ms", "DOUBLE"),
    ("updated_ns", "BIGINT"),
    ("norm_intent", "VARCHAR"),
    ("phrase", "VARCHAR"),
    ("intent_words", "INTEGER"),
    ("intent_chars", "INTEGER"),
    ("hidden", "BOOLEAN"),
    ("names_tool", "BOOLEAN"),
    ("args_key", "UBIGINT"),
)
STRUCTURE_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("rn", "BIGINT"),
    ("owner_mask", "BIGINT"),
    ("fail_mask", "BIGINT"),
    ("gap_intent", "BIGINT"),
    ("gap_phrase", "BIGINT"),
    ("sibling", "BOOLEAN"),
    ("dup_sibling", "BOOLEAN"),
    ("repeat", "BOOLEAN"),
    ("reused", "BOOLEAN"),
)
CALLS_COLUMNS: Final = BASE_COLUMNS + STRUCTURE_COLUMNS
"""Columns of the copy's ``calls`` table (documented in docs/analytics.md)."""

_ID: Final = SOURCE_COLUMNS.index("tool_call_id")
_UPDATED: Final = SOURCE_COLUMNS.index("updated_ns")
_SKIP_KNOWN: Final = (
    "ANTI JOIN calls c ON c.tool_call_id = i.tool_call_id AND c.updated_ns = i.updated_ns"
)
_BASE: Final = ", ".join(c for c, _ in BASE_COLUMNS)
_CALLS_DDL: Final = "CREATE TABLE calls (" + ", ".join(f"{c} {t}" for c, t in CALLS_COLUMNS) + ")"


def _pyarrow() -> Any:
    return importlib.import_module("pyarrow")


@dataclass(frozen=True)
class AnalyticsOptions:
    """How the columnar copy is kept (argument > default; there is no environment variable)."""

    snapshot: bool | str = True
    """Keep a Parquet snapshot of the copy so that a new process starts warm. ``True``: beside
    a SQLite ledger (``<ledger>.analytics.parquet``), else in the user cache folder; a path:
    there; ``False``: no snapshot."""
    snapshot_min_rows: int = 20_000
    """Rewrite the snapshot after a sync once this many anchors changed since it was written."""
    sync_overlap_seconds: float | None = None
    """How far behind the newest ``updated_ns`` already copied a sync re-reads, for writes that
    commit late (None: 2 s for SQLite, 30 s for PostgreSQL, where several writers commit
    concurrently and clocks differ). Re-read anchors that did not change cost almost nothing."""
    recount_seconds: float = 30.0
    """When nothing newer was written, how often a sync still counts the ledger's anchors to
    notice removed ones (a count scans an index: tens of milliseconds per million anchors)."""
    max_staleness_seconds: float = 0.0
    """``run`` syncs first unless the last sync is at most this old (0: always sync)."""
    threads: int | None = None
    """DuckDB worker threads (None: DuckDB's default, one per core)."""


@dataclass(frozen=True)
class SyncReport:
    """What one sync did."""

    read: int
    """Anchors read from the ledger."""
    changed: int
    """Anchors new or changed in the copy."""
    sessions: int
    """Sessions whose calls were recomputed."""
    rebuilt: bool
    """The copy was rebuilt from the whole ledger."""
    rows: int
    """Anchors in the copy after the sync."""
    seconds: float


@dataclass(frozen=True)
class Result:
    """The rows of one analysis (or query), with its column names."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    params: Mapping[str, Any] = field(default_factory=dict[str, Any])

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]

    def to_csv(self) -> str:
        """The rows as CSV text with a header line."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(self.rows)
        return out.getvalue()

    def to_json(self) -> str:
        """The rows as a JSON array of objects."""
        return json.dumps(self.records(), ensure_ascii=False, default=str)

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas)."""
        pandas: Any = importlib.import_module("pandas")
        return pandas.DataFrame.from_records(self.rows, columns=list(self.columns))


def _pyarrow_compute() -> Any:
    return importlib.import_module("pyarrow.compute")


def _per_distinct(values: Any, derive: Any, types: Sequence[Any]) -> list[Any]:
    """Apply ``derive`` (Python, one value -> tuple) once per distinct value of an Arrow array
    and spread the results back over the rows (Arrow ``take``): intents and redaction records
    repeat a lot, so this saves most of the per-row Python work."""
    pa, pc = _pyarrow(), _pyarrow_compute()
    encoded = values.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    derived = [derive(v) for v in distinct]
    derived_null = derive(None)
    out: list[Any] = []
    for i, kind in enumerate(types):
        column = pa.array([d[i] for d in derived], kind)
        taken = pc.take(column, encoded.indices)
        if derived_null[i] is not None:
            taken = pc.fill_null(taken, pa.scalar(derived_null[i], kind))
        out.append(taken)
    return out


def _intent_columns(intent: str | None) -> tuple[str | None, str | None, int, int]:
    norm = normalize_intent(intent)
    return norm, leading_phrase(norm, PHRASE_WORDS), word_count(norm), len(intent or "")


def _redaction_columns(redaction: str | None) -> tuple[bool, bool]:
    return intent_hidden(redaction), args_redacted(redaction)


def _tool_columns(tool: str | None) -> tuple[str | None]:
    return (normalize_intent(tool),)


def _derive(rows: Sequence[tuple[Any, ...]]) -> Any:
    """Source rows -> an Arrow table of the base columns; ``names_tool`` and ``args_key`` are
    finished in DuckDB (``tool_norm``, ``args_canon``)."""
    pa = _pyarrow()
    cols = list(zip(*rows, strict=True))
    ix = {c: i for i, c in enumerate(SOURCE_COLUMNS)}

    def column(name: str, kind: Any) -> Any:
        return pa.array(cols[ix[name]], kind)

    norm, phrase, words, chars = _per_distinct(
        column("intent", pa.string()),
        _intent_columns,
        (pa.string(), pa.string(), pa.int32(), pa.int32()),
    )
    hidden, redacted = _per_distinct(
        column("redaction", pa.string()), _redaction_columns, (pa.bool_(), pa.bool_())
    )
    tools = column("tool_name", pa.string())
    (tool_norm,) = _per_distinct(tools, _tool_columns, (pa.string(),))
    skip = redacted.to_pylist()
    canon = [
        None if drop else canonical_args(a) for a, drop in zip(cols[ix["args"]], skip, strict=True)
    ]
    return pa.table(
        {
            "tool_call_id": column("tool_call_id", pa.string()),
            "session_id": column("session_id", pa.string()),
            "seq": column("seq", pa.int64()),
            "batch_id": column("batch_id", pa.string()),
            "agent_id": column("agent_id", pa.string()),
            "tool_name": tools,
            "status": column("status", pa.string()),
            "start_ns": column("start_ns", pa.int64()),
            "duration_ms": column("duration_ms", pa.float64()),
            "updated_ns": column("updated_ns", pa.int64()),
            "norm_intent": norm,
            "phrase": phrase,
            "intent_words": words,
            "intent_chars": chars,
            "hidden": hidden,
            "tool_norm": tool_norm,
            "args_canon": pa.array(canon, pa.binary()),
        }
    )


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "intentrace"


class Analytics:
    """The analyses over one ledger, answered from a columnar copy kept in step with it.

    Thread-safe (one lock around the copy). Open it with the ledger URL (argument >
    ``$INTENTRACE_LEDGER_URL`` > default file) or an open ``Ledger``.

    Raises:
        AnalyticsError: the ledger cannot be read (one line).
    """

    def __init__(
        self, ledger: str | Ledger | None = None, *, options: AnalyticsOptions | None = None
    ) -> None:
        self.options = options or AnalyticsOptions()
        self._source: Source = open_source(ledger)
        self.url = self._source.url
        config: dict[str, str | bool | int | float | list[str]] = {}
        if self.options.threads is not None:
            config["threads"] = self.options.threads
        self._db = duckdb.connect(":memory:", config=config)
        self._lock = threading.RLock()
        self._loaded = False
        self._rows = 0
        self._watermark = 0
        self._synced_at = 0.0
        self._counted_at = 0.0
        self._since_snapshot = 0
        self._snapshot = self._snapshot_path()

    # --- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the copy and the ledger connection."""
        with self._lock:
            self._source.close()
            self._db.close()

    def __enter__(self) -> Analytics:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def snapshot_path(self) -> Path | None:
        """Where the Parquet snapshot is kept (None: not kept)."""
        return self._snapshot

    def _snapshot_path(self) -> Path | None:
        choice = self.options.snapshot
        if choice is False:
            return None
        if isinstance(choice, str):
            return Path(choice)
        if self._source.snapshot_default is not None:
            return self._source.snapshot_default
        if self._source.dialect == "postgresql":
            digest = hashlib.sha256(self.url.encode()).hexdigest()[:16]
            return _cache_dir() / f"analytics-{digest}.parquet"
        return None

    # --- the copy ----------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._db.execute("DROP TABLE IF EXISTS calls")
        self._loaded = True
        path = self._snapshot
        if path is not None and path.exists():
            try:
                meta = dict(
                    self._db.execute(
                        "SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
                        [str(path)],
                    ).fetchall()
                )
                if meta.get("version") == _SNAPSHOT_VERSION and meta.get("url") == self.url:
                    self._db.execute(
                        "CREATE TABLE calls AS SELECT * FROM read_parquet(?)", [str(path)]
                    )
                    self._watermark = int(meta.get("watermark", "0"))
                    self._rows = self._count()
                    return
            except (duckdb.Error, ValueError) as exc:
                logger.warning("intentrace analytics: ignoring snapshot %s: %s", path, exc)
                self._db.execute("DROP TABLE IF EXISTS calls")
        self._db.execute(_CALLS_DDL)
        self._rows = 0
        self._watermark = 0

    def _count(self) -> int:
        return self._scalar("SELECT count(*) FROM calls")

    def sync(self) -> SyncReport:
        """Bring the copy up to date with the ledger."""
        with self._lock:
            started = time.perf_counter()
            self._ensure_loaded()
            newest = self._source.newest()
            if (
                self._rows
                and newest is not None
                and newest == self._watermark
                and time.monotonic() - self._counted_at < self.options.recount_seconds
            ):
                # nothing written since the last sync (updated_ns only grows): no reads
                self._synced_at = time.monotonic()
                return SyncReport(0, 0, 0, False, self._rows, time.perf_counter() - started)
            rebuilt = self._rows == 0
            overlap = self.options.sync_overlap_seconds
            overlap_ns = self._source.overlap_ns if overlap is None else int(overlap * 1e9)
            after = None if rebuilt else self._watermark - overlap_ns
            known: set[tuple[str, int]] | None = None
            if after is not None:
                known = set(
                    self._db.execute(
                        "SELECT tool_call_id, updated_ns FROM calls WHERE updated_ns > ?", [after]
                    ).fetchall()
                )
            read, changed, sessions = self._apply(
                self._source.read(after), full=rebuilt, known=known
            )
            count, newest = self._source.stats()
            self._counted_at = time.monotonic()
            if count is not None and (count < self._rows or newest < self._watermark):
                # anchors were removed, or the ledger replaced: start again from the whole ledger
                # (more anchors than the copy is a write that landed after the read: next sync)
                rebuilt = True
                more, changed, sessions = self._apply(self._source.read(None), full=True)
                read += more
            self._synced_at = time.monotonic()
            self._since_snapshot += changed
            if (
                self._snapshot is not None
                and changed
                and (rebuilt or self._since_snapshot >= self.options.snapshot_min_rows)
            ):
                self._write_snapshot()
            return SyncReport(
                read=read,
                changed=changed,
                sessions=sessions,
                rebuilt=rebuilt,
                rows=self._rows,
                seconds=time.perf_counter() - started,
            )

    def _apply(
        self,
        batches: Iterable[list[tuple[Any, ...]]],
        *,
        full: bool,
        known: set[tuple[str, int]] | None = None,
    ) -> tuple[int, int, int]:
        """Fold source rows into the copy (``known``: (id, updated_ns) already in it, skipped
        before any work); returns (rows read, rows changed, sessions recomputed)."""
        pa = _pyarrow()
        read = 0
        tables: list[Any] = []
        for batch in batches:
            read += len(batch)
            fresh = [r for r in batch if (r[_ID], r[_UPDATED]) not in known] if known else batch
            if fresh:
                tables.append(_derive(fresh))
        db = self._db
        if full:
            db.execute("DROP TABLE IF EXISTS calls")
            db.execute(_CALLS_DDL)
            self._rows = 0
            self._watermark = 0
        if not tables:
            return read, 0, 0
        incoming = pa.concat_tables(tables)
        db.register("incoming", incoming)
        try:
            derived = (
                "contains(' ' || coalesce(norm_intent, '') || ' ', ' ' || tool_norm || ' ') "
                "AND norm_intent IS NOT NULL AND tool_norm IS NOT NULL AS names_tool, "
                "CASE WHEN args_canon IS NULL THEN NULL ELSE hash(args_canon) END AS args_key"
            )
            db.execute(
                "CREATE OR REPLACE TEMP TABLE delta AS "
                f"SELECT * EXCLUDE (tool_norm, args_canon), {derived} FROM incoming i "
                + ("" if full else _SKIP_KNOWN)
            )
        finally:
            db.unregister("incoming")
        changed = self._scalar("SELECT count(*) FROM delta")
        if changed == 0:
            return read, 0, 0
        db.execute(
            "CREATE OR REPLACE TEMP TABLE touched AS "
            "SELECT DISTINCT session_id FROM delta UNION "
            "SELECT c.session_id FROM calls c SEMI JOIN delta d ON c.tool_call_id = d.tool_call_id"
        )
        db.execute(
            "CREATE OR REPLACE TEMP TABLE work AS "
            f"SELECT {_BASE} FROM calls WHERE session_id IN (SELECT session_id FROM touched) "
            "AND tool_call_id NOT IN (SELECT tool_call_id FROM delta) "
            f"UNION ALL SELECT {_BASE} FROM delta"
        )
        sessions = self._scalar("SELECT count(*) FROM touched")
        ordered = db.sql(
            f"SELECT {_BASE}, hash(session_id) AS h_session, hash(batch_id) AS h_batch, "
            "hash(norm_intent) AS h_intent, hash(phrase) AS h_phrase, hash(tool_name) AS h_tool, "
            f"coalesce(args_key, 0) AS h_args, status IN {SETTLED_SQL} AS is_owner, "
            f"status IN {FAILED_SQL} AS is_failed "
            "FROM work ORDER BY session_id, seq, tool_call_id"
        ).to_arrow_table()

        def u64(name: str) -> Any:
            return ordered.column(name).to_numpy(zero_copy_only=False).astype(np.uint64)

        def present(name: str) -> Any:
            return ordered.column(name).is_valid().to_numpy(zero_copy_only=False).astype(np.bool_)

        def flag(name: str) -> Any:
            return ordered.column(name).to_numpy(zero_copy_only=False).astype(np.bool_)

        s = compute(
            SessionRows(
                session=u64("h_session"),
                batch=u64("h_batch"),
                has_batch=present("batch_id"),
                intent=u64("h_intent"),
                has_intent=present("norm_intent"),
                phrase=u64("h_phrase"),
                tool=u64("h_tool"),
                args=u64("h_args"),
                has_args=present("args_key"),
                owner=flag("is_owner"),
                failed=flag("is_failed"),
            )
        )
        out = ordered.select([c for c, _ in BASE_COLUMNS])
        for name, values in (
            ("rn", s.rn),
            ("owner_mask", s.owner_mask),
            ("fail_mask", s.fail_mask),
            ("gap_intent", s.gap_intent),
            ("gap_phrase", s.gap_phrase),
            ("sibling", s.sibling),
            ("dup_sibling", s.dup_sibling),
            ("repeat", s.repeat),
            ("reused", s.reused),
        ):
            out = out.append_column(name, pa.array(values))
        db.register("structured", out)
        try:
            db.execute("BEGIN TRANSACTION")
            db.execute("DELETE FROM calls WHERE session_id IN (SELECT session_id FROM touched)")
            db.execute("INSERT INTO calls SELECT * FROM structured")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            db.unregister("structured")
            for temp in ("delta", "touched", "work"):
                db.execute(f"DROP TABLE IF EXISTS {temp}")
        self._rows = self._count()
        self._watermark = max(
            self._watermark, self._scalar("SELECT coalesce(max(updated_ns), 0) FROM calls")
        )
        return read, changed, sessions

    def _scalar(self, sql: str) -> int:
        rows = self._db.execute(sql).fetchall()
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def _write_snapshot(self) -> None:
        path = self._snapshot
        if path is None:
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        meta = {"version": _SNAPSHOT_VERSION, "url": self.url, "watermark": str(self._watermark)}
        options = ", ".join(f"{k}: '{v.replace(chr(39), chr(39) * 2)}'" for k, v in meta.items())
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db.execute(
                f"COPY calls TO '{str(tmp).replace(chr(39), chr(39) * 2)}' "
                f"(FORMAT parquet, KV_METADATA {{{options}}})"
            )
            tmp.replace(path)
            self._since_snapshot = 0
        except (OSError, duckdb.Error) as exc:
            logger.warning("intentrace analytics: no snapshot at %s: %s", path, exc)
            self._snapshot = None
            tmp.unlink(missing_ok=True)

    # --- answers -----------------------------------------------------------------------------
    def run(
        self, name: str, params: Mapping[str, Any] | None = None, *, sync: bool = True
    ) -> Result:
        """Run analysis ``name`` with ``params`` (defaults for the rest).

        Raises:
            AnalyticsError: unknown analysis or bad parameter (one line).
        """
        analysis = get_analysis(name)
        resolved = analysis.resolve(params)
        with self._lock:
            if sync and time.monotonic() - self._synced_at >= self.options.max_staleness_seconds:
                self.sync()
            self._ensure_loaded()
            sql, binds = analysis.sql(resolved)
            rows = self._db.execute(sql, binds).fetchall()
        return Result(
            name=name,
            title=analysis.title,
            columns=analysis.columns(resolved),
            rows=rows,
            params=resolved,
        )

    def dashboard(self, dashboard: Dashboard) -> list[tuple[Panel, Result]]:
        """Every panel of a dashboard with its result (one sync; a panel that repeats another's
        analysis and parameters reuses its rows)."""
        out: list[tuple[Panel, Result]] = []
        done: dict[str, Result] = {}
        with self._lock:
            if time.monotonic() - self._synced_at >= self.options.max_staleness_seconds:
                self.sync()
            for panel in dashboard.panels:
                resolved = get_analysis(panel.analysis).resolve(panel.params)
                key = panel.analysis + json.dumps(resolved, sort_keys=True)
                result = done.get(key)
                if result is None:
                    result = done[key] = self.run(panel.analysis, resolved, sync=False)
                out.append((panel, result))
        return out

    def ledger_sql(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one SQL statement on the ledger itself, read-only, in its own dialect.

        Raises:
            AnalyticsError: the statement failed, or this ledger cannot take SQL (one line).
        """
        with self._lock:
            return self._source.query(sql)

    def query(self, sql: str) -> Result:
        """Run one SQL statement in DuckDB over the copy (table ``calls``), after a sync.

        Raises:
            AnalyticsError: the statement failed (one line).
        """
        with self._lock:
            self.sync()
            try:
                cursor = self._db.execute(sql)
                rows = cursor.fetchall()
            except duckdb.Error as exc:
                text = str(exc).strip().splitlines()
                raise AnalyticsError(f"SQL error: {text[0] if text else exc}") from None
            columns = tuple(d[0] for d in cursor.description or ())
        return Result(name="sql", title=sql, columns=columns, rows=rows)
