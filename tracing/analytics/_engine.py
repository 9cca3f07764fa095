"""The columnar copy of the ledger (DuckDB, in memory) and the analyses over it.

Why a copy: on a million anchors, row-store SQL (SQLite, PostgreSQL) takes seconds per analysis;
a columnar table with the per-call definitions computed once answers in tens of milliseconds
(docs/analytics.md has the measurements). The copy is kept in step with the ledger by the rows'
``version`` (one counter in the database, in commit order; never a writer's clock): each sync
reads only the anchors written since the last version it read, derives their columns, and
recomputes the session-dependent columns of the sessions they touch; a copy holding more anchors
than the ledger after that (some were deleted) is rebuilt. A Parquet snapshot beside the ledger
lets a new process start from the last copy instead of the whole ledger.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, cast

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracing.analytics._analyses import (
    BUCKETS,
    DEFAULT_MIN_INFO,
    FAILED_SQL,
    MASKS_EXACT,
    SCOPE_FILTER,
    SETTLED_SQL,
    AnalyticsError,
    get_analysis,
)
from tracing.analytics._dashboards import Dashboard, Panel
from tracing.analytics._definitions import (
    PHRASE_WORDS,
    args_redacted,
    canonical_args,
    information,
    intent_hidden,
    intent_tokens,
    leading_phrase,
    normalize_intent,
    word_count,
)
from tracing.analytics._filters import Filters
from tracing.analytics._source import ReadAgain, Source, open_source
from tracing.analytics._structure import PLANES, SessionRows, compute
from tracing.analytics._view import FILTER_TABLE, check_view_sql, view_ddl
from tracing.ledger import Ledger
from tracing.ledger._files import FILE_MODE, create_private

logger = logging.getLogger("tracing.analytics")

DERIVE_VERSION: Final = "8"
"""Bumped whenever a definition changes: a snapshot of another version is rebuilt."""
_SNAPSHOT_VERSION: Final = f"{DERIVE_VERSION}/duckdb-{duckdb.__version__}"
"""What a snapshot must match: ``args_key`` is DuckDB's ``hash()``, which may change between
DuckDB releases."""

BASE_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("tool_call_id", "VARCHAR"),
    ("session_id", "VARCHAR"),
    ("seq", "BIGINT"),
    ("turn", "BIGINT"),
    ("batch_id", "VARCHAR"),
    ("parent_call_id", "VARCHAR"),
    ("agent_id", "VARCHAR"),
    ("tool_name", "VARCHAR"),
    ("status", "VARCHAR"),
    ("intent", "VARCHAR"),
    ("error", "VARCHAR"),
    ("start_ns", "BIGINT"),
    ("duration_ms", "DOUBLE"),
    ("updated_ns", "BIGINT"),
    ("version", "BIGINT"),
    ("norm_intent", "VARCHAR"),
    ("phrase", "VARCHAR"),
    ("intent_words", "INTEGER"),
    ("intent_chars", "INTEGER"),
    ("intent_info", "INTEGER"),
    ("tokens", "VARCHAR"),
    ("tool_info", "INTEGER"),
    ("hidden", "BOOLEAN"),
    ("names_tool", "BOOLEAN"),
    ("args_key", "UBIGINT"),
)
STRUCTURE_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("scope_key", "UBIGINT"),
    ("rn", "BIGINT"),
    ("scope_rn", "BIGINT"),
    ("step_rn", "BIGINT"),
    ("gap_intent", "BIGINT"),
    ("gap_phrase", "BIGINT"),
    ("owner0", "BIGINT"),
    ("owner1", "BIGINT"),
    ("owner2", "BIGINT"),
    ("fail0", "BIGINT"),
    ("fail1", "BIGINT"),
    ("fail2", "BIGINT"),
    ("step_owners", "BIGINT"),
    ("sibling", "BOOLEAN"),
    ("redundant_sibling", "BOOLEAN"),
    ("batch_head", "BOOLEAN"),
    ("batch_redundant", "BOOLEAN"),
    ("repeat", "BOOLEAN"),
    ("reused", "BOOLEAN"),
)
CALLS_COLUMNS: Final = BASE_COLUMNS + STRUCTURE_COLUMNS
"""Columns of the copy's ``calls`` table (documented in docs/analytics.md)."""

_SKIP_KNOWN: Final = (
    "ANTI JOIN calls c ON c.tool_call_id = i.tool_call_id AND c.version = i.version"
)
_BASE: Final = ", ".join(c for c, _ in BASE_COLUMNS)
_CALLS_DDL: Final = "CREATE TABLE calls (" + ", ".join(f"{c} {t}" for c, t in CALLS_COLUMNS) + ")"


@dataclass(frozen=True)
class AnalyticsOptions:
    """How the columnar copy is kept (argument > default; there is no environment variable)."""

    snapshot: bool | str = True
    """Keep a Parquet snapshot of the copy so that a new process starts warm. ``True``: beside
    a SQLite ledger (``<ledger>.analytics.parquet``), else in the user cache folder; a path:
    there; ``False``: no snapshot."""
    snapshot_min_rows: int = 20_000
    """Rewrite the snapshot after a sync once this many anchors changed since it was written."""
    recount_seconds: float = 30.0
    """When nothing newer was written, how often a sync still counts the ledger's anchors to
    notice removed ones (a count scans an index: tens of milliseconds per million anchors;
    0: at every sync)."""
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
    stages: Mapping[str, float] = field(default_factory=dict[str, float])
    """Wall seconds of its stages: ``read`` (reading the ledger and deriving the per-anchor
    columns as the tables arrive), ``fold`` (the session columns and the copy's update)."""


@dataclass(frozen=True)
class Result:
    """The rows of one analysis (or query), with its column names."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    params: Mapping[str, Any] = field(default_factory=dict[str, Any])
    filters: Filters = field(default_factory=Filters)
    """The filters the rows were computed with."""

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

    def to_arrow(self) -> pa.Table:
        """The rows as a pyarrow Table (column types from the values)."""
        # (the stubs cannot type an array of values of any kind)
        columns: dict[str, Any] = {
            c: pa.array([r[i] for r in self.rows]) for i, c in enumerate(self.columns)
        }
        return pa.table(columns)

    def to_parquet(self, path: str | os.PathLike[str]) -> None:
        """Write the rows as one Parquet file."""
        # pyarrow's Parquet module loads only for a Parquet output
        import pyarrow.parquet as pq

        # (the stubs leave some of its keyword arguments untyped)
        pq.write_table(self.to_arrow(), str(path))  # pyright: ignore[reportUnknownMemberType]

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas)."""
        # pandas takes a few tenths of a second to import: only when a DataFrame is asked for
        import pandas

        return pandas.DataFrame.from_records(self.rows, columns=list(self.columns))


def _intent_columns(
    intent: str | None,
) -> tuple[str | None, str | None, int, int, int, str | None]:
    norm = normalize_intent(intent)
    return (
        norm,
        leading_phrase(norm, PHRASE_WORDS),
        word_count(norm),
        len(intent or ""),
        information(norm),
        intent_tokens(norm, intent),
    )


def _tool_columns(tool: str | None) -> tuple[str | None, int]:
    norm = normalize_intent(tool)
    return norm, information(norm)


def _redaction_columns(redaction: str | None) -> tuple[bool, bool]:
    return intent_hidden(redaction), args_redacted(redaction)


def _cached(cache: dict[Any, Any] | None, fn: Any, values: list[Any]) -> list[Any]:
    """``fn`` of every value, each computed once per ``cache`` (None: no cache)."""
    if cache is None:
        return [fn(v) for v in values]
    return [cache[v] if v in cache else cache.setdefault(v, fn(v)) for v in values]


class _Deriver:
    """The per-anchor columns of source tables (``_derive.py``), computed in Python once per
    distinct value and spread over the rows with Arrow ``take``: a million anchors hold about
    ten thousand distinct intents and a few hundred thousand distinct args, and the caches
    carry what one table learned to the next tables of the same read."""

    def __init__(self) -> None:
        self._intents: dict[str | None, tuple[Any, ...]] = {}
        self._redactions: dict[str | None, tuple[bool, bool]] = {}
        self._tools: dict[str | None, tuple[str | None, int]] = {}

    def _per_distinct(
        self, values: Any, cache: dict[Any, Any] | None, fn: Any, types: Sequence[Any]
    ) -> list[Any]:
        encoded = values.dictionary_encode()
        derived = _cached(cache, fn, encoded.dictionary.to_pylist())
        if len(types) == 1:
            derived_columns: list[list[Any]] = [derived]
            derived_null: tuple[Any, ...] = (fn(None),)
        else:
            derived_columns = [list(c) for c in zip(*derived, strict=True)] or [[] for _ in types]
            derived_null = fn(None)
        out: list[Any] = []
        for values_i, kind, none in zip(derived_columns, types, derived_null, strict=True):
            # (the stubs cannot type arrays and scalars of a kind known at run time)
            taken = pc.take(cast("Any", pa.array(values_i, kind)), encoded.indices)
            if none is not None:
                taken = pc.fill_null(taken, cast("Any", pa.scalar(none, kind)))
            out.append(taken)
        return out

    def __call__(self, raw: Any) -> Any:
        """Source anchors (an Arrow table, ``SOURCE_COLUMNS``) -> an Arrow table of the base
        columns but ``names_tool`` and ``args_key``, plus ``tool_norm`` and ``args_canon``
        from which DuckDB finishes them (``Analytics._finish``)."""

        def column(name: str) -> Any:
            chunked = raw.column(name)
            # combine_chunks copies even a single chunk
            return chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()

        norm, phrase, words, chars, info, tokens = self._per_distinct(
            column("intent"),
            self._intents,
            _intent_columns,
            (pa.string(), pa.string(), pa.int32(), pa.int32(), pa.int32(), pa.string()),
        )
        hidden, redacted = self._per_distinct(
            column("redaction"), self._redactions, _redaction_columns, (pa.bool_(), pa.bool_())
        )
        tools = column("tool_name")
        tool_norm, tool_info = self._per_distinct(
            tools, self._tools, _tool_columns, (pa.string(), pa.int32())
        )
        # the args of a call whose args the policy replaced are not compared (null)
        args = pc.if_else(redacted, pa.scalar(None, pa.string()), column("args"))
        # args are not cached across tables: a distinct args text seldom leaves its session's
        # table, and hashing hundreds of thousands of long texts into a dict costs more than
        # it saves (canonical_args returns str, not orjson's bytes: see there)
        (args_canon,) = self._per_distinct(args, None, canonical_args, (pa.string(),))
        return pa.table(
            {
                "tool_call_id": column("tool_call_id"),
                "session_id": column("session_id"),
                "seq": column("seq"),
                "turn": column("turn"),
                "batch_id": column("batch_id"),
                "parent_call_id": column("parent_call_id"),
                "agent_id": column("agent_id"),
                "tool_name": tools,
                "status": column("status"),
                "intent": column("intent"),
                "error": column("error"),
                "start_ns": column("start_ns"),
                "duration_ms": column("duration_ms"),
                "updated_ns": column("updated_ns"),
                "version": column("version"),
                "norm_intent": norm,
                "phrase": phrase,
                "intent_words": words,
                "intent_chars": chars,
                "intent_info": info,
                "tokens": tokens,
                "tool_info": tool_info,
                "hidden": hidden,
                "tool_norm": tool_norm,
                "args_canon": args_canon,
            }
        )


def _max_version(table: Any) -> int:
    newest = pc.max(table.column("version")).as_py()
    return int(newest) if newest is not None else 0


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
        self._snapshotting: threading.Thread | None = None
        self._snapshot_due = False
        self._view = False
        """Whether the view ``calls_v1`` (and its filter table) exists in the copy's connection."""
        self._arrow_calls: Any = None
        """After a whole rebuild, ``calls`` is this Arrow table registered as a view (DuckDB
        answers over it about as fast as over its own table) until the first incremental
        change needs a table: the first answers do not wait for the copy into DuckDB."""

    # --- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the copy and the ledger connection (after a snapshot being written)."""
        with self._lock:
            self.wait_for_snapshot()
            self._source.close()
            self._db.close()

    def wait_for_snapshot(self, timeout: float | None = None) -> bool:
        """Wait until the snapshot being written, if any, is on disk; False on timeout."""
        thread = self._snapshotting
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

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
        self._drop_calls()
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

    def _drop_calls(self) -> None:
        if self._arrow_calls is not None:
            self._db.unregister("calls")
            self._arrow_calls = None
        self._db.execute("DROP TABLE IF EXISTS calls")

    def _own_table(self) -> None:
        """Turn the Arrow-backed ``calls`` into a DuckDB table (before changing it)."""
        if self._arrow_calls is None:
            return
        db = self._db
        db.execute("CREATE OR REPLACE TABLE calls_copy AS SELECT * FROM calls")
        db.unregister("calls")
        self._arrow_calls = None
        db.execute("ALTER TABLE calls_copy RENAME TO calls")

    def sync(self) -> SyncReport:
        """Bring the copy up to date with the ledger (and start writing the snapshot if it is
        due)."""
        with self._lock:
            report = self._sync()
            self._snapshot_if_due()
            return report

    def _sync(self) -> SyncReport:
        """``sync`` without the snapshot: the answers come first, then the snapshot is written
        (on its own thread; on two cores it would otherwise slow the answers down)."""
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
                # nothing written since the last sync (versions only grow): no reads
                self._synced_at = time.monotonic()
                return SyncReport(0, 0, 0, False, self._rows, time.perf_counter() - started)
            rebuilt = self._rows == 0
            after = None if rebuilt else self._watermark
            fetched = self._fetch(after, full=rebuilt)
            stages = {"read": time.perf_counter() - started}
            read, changed, sessions = self._apply(*fetched, full=rebuilt)
            stages["fold"] = time.perf_counter() - started - stages["read"]
            # after a whole read there is nothing to compare the count with
            count, newest = (None, 0) if rebuilt else self._source.stats()
            self._counted_at = time.monotonic()
            # Every anchor written up to the version read is in the copy now, so a copy with
            # more anchors than the ledger holds removed ones; anchors the copy lacks with no
            # newer version were not written by this ledger's writers (or it was replaced).
            # Either way: start again from the whole ledger. (More anchors with newer versions
            # were committed after the read: the next sync reads them.)
            if count is not None and (
                count < self._rows
                or newest < self._watermark
                or (count > self._rows and newest == self._watermark)
            ):
                rebuilt = True
                more, changed, sessions = self._apply(*self._fetch(None, full=True), full=True)
                read += more
            self._synced_at = time.monotonic()
            self._since_snapshot += changed
            if (
                self._snapshot is not None
                and changed
                and (rebuilt or self._since_snapshot >= self.options.snapshot_min_rows)
            ):
                self._snapshot_due = True
            return SyncReport(
                read=read,
                changed=changed,
                sessions=sessions,
                rebuilt=rebuilt,
                rows=self._rows,
                seconds=time.perf_counter() - started,
                stages=stages,
            )

    def _fetch(self, after: int | None, *, full: bool) -> tuple[int, Any]:
        """Read the anchors with ``version > after`` and derive their columns as they
        arrive (the source reads the next table meanwhile): (anchors read, the changed ones
        with ``BASE_COLUMNS``, or None when none changed). Unless ``full``, anchors the copy
        already holds with the same ``version`` (a read that overlaps the copy) are
        skipped before any work."""
        for attempt in (1, 2):
            derive = _Deriver()
            read, parts = 0, list[Any]()
            try:
                for raw in self._source.read_tables(after):
                    read += raw.num_rows
                    fresh = raw if full or not self._rows else self._unknown(raw)
                    if fresh.num_rows:
                        parts.append(derive(fresh))
            except ReadAgain:
                if attempt == 2:
                    raise AnalyticsError(f"cannot read the ledger {self.url}") from None
                continue
            return read, self._finish(pa.concat_tables(parts)) if parts else None
        raise AssertionError("unreachable")

    def _unknown(self, raw: Any) -> Any:
        """The anchors of ``raw`` the copy does not hold with the same ``version``."""
        db = self._db
        db.register("fetched", raw)
        try:
            return db.sql(f"SELECT i.* FROM fetched i {_SKIP_KNOWN}").to_arrow_table()
        finally:
            db.unregister("fetched")

    def _apply(self, read: int, delta: Any | None, *, full: bool) -> tuple[int, int, int]:
        """Fold derived anchors (None: nothing changed) into the copy (``full``: the copy
        starts empty); returns (anchors read, anchors changed, sessions recomputed)."""
        db = self._db
        if full:
            self._drop_calls()
            db.execute(_CALLS_DDL)
            self._rows = 0
            self._watermark = 0
        if delta is None or delta.num_rows == 0:
            return read, 0, 0
        changed = delta.num_rows
        if full:  # the copy is empty: every session is new and whole in delta
            work = delta
            sessions = len(delta.column("session_id").unique())
        else:
            db.register("delta", delta)
            try:
                db.execute(
                    "CREATE OR REPLACE TEMP TABLE touched AS SELECT DISTINCT session_id FROM delta "
                    "UNION SELECT c.session_id FROM calls c "
                    "SEMI JOIN delta d ON c.tool_call_id = d.tool_call_id"
                )
                work = db.sql(
                    f"SELECT {_BASE} FROM calls "
                    "WHERE session_id IN (SELECT session_id FROM touched) "
                    "AND tool_call_id NOT IN (SELECT tool_call_id FROM delta) "
                    f"UNION ALL SELECT {_BASE} FROM delta"
                ).to_arrow_table()
            finally:
                db.unregister("delta")
            sessions = self._scalar("SELECT count(*) FROM touched")
        structured = self._structure(work)
        if full:
            db.execute("DROP TABLE calls")
            db.register("calls", structured)
            self._arrow_calls = structured
            self._rows = structured.num_rows
            self._watermark = max(self._watermark, _max_version(structured))
            return read, changed, sessions
        self._own_table()
        db.register("structured", structured)
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
            db.execute("DROP TABLE IF EXISTS touched")
        self._rows = self._count()
        self._watermark = max(
            self._watermark, self._scalar("SELECT coalesce(max(version), 0) FROM calls")
        )
        return read, changed, sessions

    def _finish(self, derived: Any) -> Any:
        """The per-anchor columns DuckDB computes (``names_tool``; ``args_key``, DuckDB's
        ``hash`` of the canonical args) added to ``_derive``'s table: ``BASE_COLUMNS``."""
        db = self._db
        db.register("incoming", derived)
        try:
            finished = db.sql(
                "SELECT contains(' ' || coalesce(norm_intent, '') || ' ', ' ' || tool_norm || ' ') "
                "AND norm_intent IS NOT NULL AND tool_norm IS NOT NULL AS names_tool, "
                "CASE WHEN args_canon IS NULL THEN NULL ELSE hash(args_canon) END AS args_key "
                "FROM incoming"
            ).to_arrow_table()
        finally:
            db.unregister("incoming")
        columns = {name: derived.column(name) for name in derived.column_names}
        columns |= {name: finished.column(name) for name in finished.column_names}
        return pa.table({name: columns[name] for name, _ in BASE_COLUMNS})

    def _structure(self, work: Any) -> Any:
        """``work`` (whole sessions, ``BASE_COLUMNS``, any order) with the session-dependent
        columns (``_structure.compute``) added. Only a permutation and numeric keys are
        sorted; the rows themselves stay where they are (the copy's order does not matter)."""
        db, n = self._db, work.num_rows
        db.register("work", work.append_column("_row", pa.array(np.arange(n, dtype=np.int64))))
        try:
            ordered = db.sql(
                "SELECT _row, hash(session_id) AS h_session, hash(batch_id) AS h_batch, "
                "hash(agent_id, turn) AS h_scope, hash(session_id, agent_id, turn) AS scope_key, "
                "hash(norm_intent) AS h_intent, hash(phrase) AS h_phrase, "
                "hash(tool_name) AS h_tool, coalesce(args_key, 0) AS h_args, "
                "batch_id IS NOT NULL AS has_batch, norm_intent IS NOT NULL AS has_intent, "
                f"args_key IS NOT NULL AS has_args, status IN {SETTLED_SQL} AS is_owner, "
                f"status IN {FAILED_SQL} AS is_failed "
                # sessions in any order (only the order inside one matters), by their hash as
                # compute() groups them: cheaper than sorting the id strings
                "FROM work ORDER BY h_session, seq, tool_call_id"
            ).to_arrow_table()
        finally:
            db.unregister("work")

        def values(name: str, kind: Any) -> Any:
            return ordered.column(name).to_numpy(zero_copy_only=False).astype(kind)

        s = compute(
            SessionRows(
                session=values("h_session", np.uint64),
                scope=values("h_scope", np.uint64),
                batch=values("h_batch", np.uint64),
                has_batch=values("has_batch", np.bool_),
                intent=values("h_intent", np.uint64),
                has_intent=values("has_intent", np.bool_),
                phrase=values("h_phrase", np.uint64),
                tool=values("h_tool", np.uint64),
                args=values("h_args", np.uint64),
                has_args=values("has_args", np.bool_),
                owner=values("is_owner", np.bool_),
                failed=values("is_failed", np.bool_),
            )
        )
        rows = values("_row", np.int64)
        out = work
        for name, computed in (
            ("scope_key", values("scope_key", np.uint64)),
            ("rn", s.rn),
            ("scope_rn", s.scope_rn),
            ("step_rn", s.step_rn),
            ("gap_intent", s.gap_intent),
            ("gap_phrase", s.gap_phrase),
            *((f"owner{b}", plane) for b, plane in enumerate(s.owner_planes)),
            *((f"fail{b}", plane) for b, plane in enumerate(s.fail_planes)),
            ("step_owners", s.step_owners),
            ("sibling", s.sibling),
            ("redundant_sibling", s.redundant_sibling),
            ("batch_head", s.batch_head),
            ("batch_redundant", s.batch_redundant),
            ("repeat", s.repeat),
            ("reused", s.reused),
        ):
            placed = np.empty(n, dtype=computed.dtype)
            placed[rows] = computed
            out = out.append_column(name, pa.array(placed))
        return out

    def _scalar(self, sql: str) -> int:
        rows = self._db.execute(sql).fetchall()
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def _snapshot_if_due(self) -> None:
        if self._snapshot_due:
            self._snapshot_due = False
            self._write_snapshot()

    def _write_snapshot(self) -> None:
        """Write the copy to the snapshot on a thread of its own (its own DuckDB connection
        to the copy, which reads one consistent state of it while syncs go on): the first
        answers do not wait for it. One at a time; the next sync writes what this one
        missed."""
        path = self._snapshot
        if path is None or not self.wait_for_snapshot(timeout=0):
            return
        meta = {"version": _SNAPSHOT_VERSION, "url": self.url, "watermark": str(self._watermark)}
        self._since_snapshot = 0
        # an Arrow-backed copy is an immutable table: written as it is, with its own connection
        # (a registered view is seen by the connection that registered it only)
        db = self._db.cursor()
        if self._arrow_calls is not None:
            db.register("calls", self._arrow_calls)
        self._snapshotting = threading.Thread(
            target=self._copy_to_snapshot,
            args=(db, path, meta),
            name="intentrace-analytics-snapshot",
        )
        self._snapshotting.start()

    def _copy_to_snapshot(self, db: Any, path: Path, meta: dict[str, str]) -> None:
        # a watermark older than the state copied only makes the next process re-read a
        # little (anchors it already holds are skipped), never miss anything
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        options = ", ".join(f"{k}: '{v.replace(chr(39), chr(39) * 2)}'" for k, v in meta.items())
        try:
            create_private(tmp)  # written into as it is: 0600 from the first byte
            db.execute(
                f"COPY calls TO '{str(tmp).replace(chr(39), chr(39) * 2)}' "
                f"(FORMAT parquet, KV_METADATA {{{options}}})"
            )
            os.chmod(tmp, FILE_MODE)
            tmp.replace(path)
        except (OSError, duckdb.Error) as exc:
            logger.warning("intentrace analytics: no snapshot at %s: %s", path, exc)
            self._snapshot = None
            tmp.unlink(missing_ok=True)
        finally:
            db.close()

    # --- answers -----------------------------------------------------------------------------
    def run(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        *,
        filters: Filters | Mapping[str, Any] | None = None,
        sync: bool = True,
    ) -> Result:
        """Run analysis ``name`` with ``params`` (defaults for the rest) over the calls that
        pass ``filters`` (a ``Filters`` or a mapping such as ``{"since": "2026-01-01",
        "tool": ["grep"]}``; docs/analytics.md says what a filter selects).

        Raises:
            AnalyticsError: unknown analysis, bad parameter or filter (one line).
        """
        analysis = get_analysis(name)
        resolved = analysis.resolve(params)
        chosen = Filters.of(filters)
        where, filter_binds = chosen.sql()
        with self._lock:
            if sync and time.monotonic() - self._synced_at >= self.options.max_staleness_seconds:
                self._sync()
            self._ensure_loaded()
            given = resolved
            if name == "precursors":
                # the masks count windows exactly while no step has 8 settled calls or more
                wide = self._scalar("SELECT coalesce(max(step_owners), 0) FROM calls")
                given = {**resolved, MASKS_EXACT: wide < 1 << PLANES}
                if chosen and _scope_only(chosen):
                    # a window's calls share its owner's session and agent: filtering the
                    # calls that hold the masks filters the owners exactly
                    given[SCOPE_FILTER] = True
            sql, binds = analysis.sql(given, where)
            rows = self._db.execute(sql, binds | filter_binds).fetchall()
            if sync:
                self._snapshot_if_due()
        return Result(
            name=name,
            title=analysis.title,
            columns=analysis.columns(resolved),
            rows=rows,
            params=resolved,
            filters=chosen,
        )

    def dashboard(
        self,
        dashboard: Dashboard,
        *,
        filters: Filters | Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> list[tuple[Panel, Result]]:
        """Every panel of a dashboard with its result (one sync; a panel that repeats another's
        analysis, parameters and filters reuses its rows).

        ``filters`` are laid over the dashboard's and each panel's own (each field given
        replaces the file's); ``params`` go to every panel whose analysis takes them (one that
        no panel takes is an error).

        Raises:
            AnalyticsError: a bad filter, or a parameter no panel takes (one line).
        """
        given = Filters.of(filters)
        extra = dict(params or {})
        taken = {
            k for p in dashboard.panels if p.sql is None for k in get_analysis(p.analysis).params
        }
        unknown = sorted(set(extra) - taken)
        if unknown:
            raise AnalyticsError(
                f"dashboard {dashboard.name}: no panel takes parameter {unknown[0]!r}"
            )
        out: list[tuple[Panel, Result]] = []
        done: dict[str, Result] = {}
        with self._lock:
            if time.monotonic() - self._synced_at >= self.options.max_staleness_seconds:
                self._sync()
            for panel in dashboard.panels:
                if panel.sql is not None:
                    chosen = given.over(panel.filters.over(dashboard.filters))
                    out.append((panel, self.run_sql(panel.sql, filters=chosen, sync=False)))
                    continue
                analysis = get_analysis(panel.analysis)
                mine = {k: v for k, v in extra.items() if k in analysis.params}
                resolved = analysis.resolve({**panel.params, **mine})
                chosen = given.over(panel.filters.over(dashboard.filters))
                key = json.dumps(
                    [panel.analysis, resolved, chosen.as_dict()], sort_keys=True, default=list
                )
                result = done.get(key)
                if result is None:
                    result = done[key] = self.run(
                        panel.analysis, resolved, filters=chosen, sync=False
                    )
                out.append((panel, result))
            self._snapshot_if_due()
        return out

    def run_sql(
        self,
        sql: str,
        *,
        filters: Filters | Mapping[str, Any] | None = None,
        sync: bool = True,
        title: str = "",
    ) -> Result:
        """Run a SQL panel's query: one read-only SELECT over the view ``calls_v1``
        (docs/analytics.md), which holds the calls that pass ``filters``.

        Raises:
            AnalyticsError: the SQL is not one read-only SELECT over ``calls_v1``, fails, or
                a filter is bad (one line).
        """
        check_view_sql(sql)
        chosen = Filters.of(filters)
        with self._lock:
            if sync and time.monotonic() - self._synced_at >= self.options.max_staleness_seconds:
                self._sync()
            self._ensure_loaded()
            self._ensure_view()
            db = self._db
            try:
                db.execute(
                    f"UPDATE {FILTER_TABLE} SET f_since = $since, f_until = $until, "
                    "f_agent = $agent, f_tool = $tool, f_session = $session, f_status = $status",
                    {
                        "since": chosen.since,
                        "until": chosen.until,
                        "agent": list(chosen.agent),
                        "tool": list(chosen.tool),
                        "session": list(chosen.session),
                        "status": list(chosen.status),
                    },
                )
                columns, rows = _read_only(db, sql)
            finally:
                db.execute(
                    f"UPDATE {FILTER_TABLE} SET f_since = NULL, f_until = NULL, f_agent = [], "
                    "f_tool = [], f_session = [], f_status = []"
                )
            if sync:
                self._snapshot_if_due()
        return Result(name="sql", title=title or sql, columns=columns, rows=rows, filters=chosen)

    def _ensure_view(self) -> None:
        if not self._view:
            for statement in view_ddl():
                self._db.execute(statement)
            self._view = True

    def examples(self, result: Result) -> list[tuple[str, str | None] | None]:
        """For each row of ``result``, the calls behind it as a viewer deep link target:
        ``(session_id, tool_call_id)`` of the latest such call (a failed one first when the
        analysis is about failures, a redundant one for ``redundancy``), ``(session_id, None)``
        for a row that is a session, None when no call matches. Within the result's filters."""
        analysis = result.name
        if analysis == "sql" and "session_id" in result.columns:
            # a SQL panel's rows open the call (tool_call_id) or the session they name
            session = result.columns.index("session_id")
            call = result.columns.index("tool_call_id") if "tool_call_id" in result.columns else -1
            return [
                (str(r[session]), None if call < 0 or r[call] is None else str(r[call]))
                if r[session] is not None
                else None
                for r in result.rows
            ]
        if analysis not in _DRILL or not result.rows:
            return [None] * len(result.rows)
        key_of, prefer = _DRILL[analysis]
        keys = key_of(result)
        if keys is None:  # rows keyed by session
            index = result.columns.index("session_id")
            return [(str(r[index]), None) for r in result.rows]
        where, binds = result.filters.sql("c")
        conditions: list[str] = []
        columns: dict[str, Any] = {"i": pa.array(range(len(result.rows)), pa.int64())}
        for n, (column, values) in enumerate(keys):
            if column == "start_ns":
                width = BUCKETS[result.params["bucket"]][0]
                columns[f"k{n}"] = pa.array(values, pa.int64())
                conditions.append(f"c.start_ns >= k.k{n} AND c.start_ns < k.k{n} + {width}")
            else:
                columns[f"k{n}"] = pa.array(values, pa.string())
                conditions.append(f"c.{column} IS NOT DISTINCT FROM k.k{n}")
        with self._lock:
            self._db.register("drill_keys", pa.table(columns))
            try:
                rows = self._db.execute(
                    "SELECT k.i, arg_max([c.session_id, c.tool_call_id], "
                    f"[({prefer})::INT, c.start_ns]) FROM drill_keys k "
                    # (no key: the row is every call, e.g. failure_rate with no dimension)
                    f"JOIN calls c ON {' AND '.join(conditions) or 'TRUE'} AND {where} "
                    "GROUP BY k.i",
                    binds,
                ).fetchall()
            finally:
                self._db.unregister("drill_keys")
        found = {int(i): (str(v[0]), str(v[1])) for i, v in rows}
        return [found.get(i) for i in range(len(result.rows))]

    def ledger_sql(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one SQL statement on the ledger itself, read-only, in its own dialect.

        Raises:
            AnalyticsError: the statement failed, or this ledger cannot take SQL (one line).
        """
        with self._lock:
            return self._source.query(sql)

    def query(self, sql: str) -> Result:
        """Run one read-only SQL statement (``SELECT``/``WITH``/``FROM``/``EXPLAIN``) in DuckDB
        over the copy (table ``calls``), after a sync. The copy is the ledger's, shared by every
        report and saved to the snapshot: nothing else may change it.

        Raises:
            AnalyticsError: the statement failed, or it is not one read-only statement (one
                line).
        """
        _check_read_only(sql)
        with self._lock:
            self._sync()
            self._ensure_view()
            try:
                columns, rows = _read_only(self._db, sql)
            finally:
                self._snapshot_if_due()
        return Result(name="sql", title=sql, columns=columns, rows=rows)


def _scope_only(filters: Filters) -> bool:
    """Whether ``filters`` select by session and agent only (every call of a scope or none)."""
    return (
        filters.since is None and filters.until is None and not filters.tool and not filters.status
    )


def _read_only(db: Any, sql: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """(columns, rows) of ``sql`` run inside a transaction rolled back (a read cannot leave
    anything behind); a DuckDB error as AnalyticsError (one line)."""
    try:
        db.execute("BEGIN TRANSACTION")
        try:
            cursor = db.execute(sql)
            rows = cursor.fetchall()
            return tuple(d[0] for d in cursor.description or ()), rows
        finally:
            db.execute("ROLLBACK")
    except duckdb.Error as exc:
        text = str(exc).strip().splitlines()
        raise AnalyticsError(f"SQL error: {text[0] if text else exc}") from None


_READ_ONLY_STATEMENTS: Final = frozenset({"SELECT", "EXPLAIN"})


def _check_read_only(sql: str) -> None:
    """Refuse anything but one read-only statement, by DuckDB's own parser."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        text = str(exc).strip().splitlines()
        raise AnalyticsError(f"SQL error: {text[0] if text else exc}") from None
    if len(statements) != 1:
        raise AnalyticsError(
            f"the analytics copy takes one SQL statement at a time ({len(statements)} given)"
        )
    kind = statements[0].type.name
    if kind not in _READ_ONLY_STATEMENTS:
        raise AnalyticsError(
            f"the analytics copy is read-only: {kind} refused (SELECT, WITH ... SELECT, FROM "
            "or EXPLAIN only; change the ledger through its writers)"
        )


def _column(result: Result, name: str) -> list[Any]:
    index = result.columns.index(name)
    return [r[index] for r in result.rows]


def _bucket_ns(labels: list[Any]) -> list[int]:

    out: list[int] = []
    for label in labels:
        moment = datetime.strptime(str(label).replace(" ", "T"), "%Y-%m-%dT%H:%M" if " " in
                                   str(label) else "%Y-%m-%d").replace(tzinfo=UTC)  # fmt: skip
        out.append(int(moment.timestamp()) * 1_000_000_000)
    return out


def _drill_keys(result: Result) -> list[tuple[str, list[Any]]] | None:
    p = result.params
    if result.name == "precursors":
        return [("phrase" if p["by"] == "phrase" else "norm_intent", _column(result, "item"))]
    if result.name == "redundancy" and p["by"] == "session":
        return None
    if result.name == "vague_intents" and p["by"] == "intent":
        return [
            ("tool_name", _column(result, "tool_name")),
            ("norm_intent", _column(result, "intent")),
        ]
    keys: list[tuple[str, list[Any]]] = []
    if "bucket" in result.columns:
        keys.append(("start_ns", _bucket_ns(_column(result, "bucket"))))
    for column in ("tool_name", "agent_id"):
        if column in result.columns:
            keys.append((column, _column(result, column)))
    return keys


_FAILED_FIRST: Final = f"c.status IN {FAILED_SQL}"
_DRILL: Final[dict[str, tuple[Any, str]]] = {
    "precursors": (_drill_keys, "TRUE"),
    "vague_intents": (_drill_keys, f"c.norm_intent IS NULL OR c.intent_info < {DEFAULT_MIN_INFO}"),
    "redundancy": (_drill_keys, "c.redundant_sibling OR c.repeat"),
    "tools": (_drill_keys, _FAILED_FIRST),
    "over_time": (_drill_keys, "c.norm_intent IS NULL"),
    "failure_rate": (_drill_keys, _FAILED_FIRST),
}
"""Per analysis: the row keys as calls columns, and which calls make the better example."""
