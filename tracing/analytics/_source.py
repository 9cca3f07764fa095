"""Reading the ledger for analytics: its own read-only connection, never the writer's.

A SQLite file is opened with ``mode=ro`` and ``query_only``; PostgreSQL with
``default_transaction_read_only``. An in-memory SQLite ledger can only be read through its
``Ledger`` object (``changed_since``), which the tests and embedded uses may pass instead.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import pyarrow as pa

from tracing.analytics._analyses import AnalyticsError
from tracing.anchor import ANCHOR_COLUMNS
from tracing.ledger import Ledger, LedgerError
from tracing.ledger._config import parse_ledger_url

logger = logging.getLogger("tracing.analytics")

_NOT_READ: Final[frozenset[str]] = frozenset(
    {
        "settle_seq",
        "outcome",
        "label",
        "end_ns",
        "trace_id",
        "span_id",
        "result",
        "provider_call_id",
        "user_id",
        "tags",
    }
)
"""Anchor columns no analysis reads (a new anchor column is read unless it is named here)."""
SOURCE_COLUMNS: Final[tuple[str, ...]] = tuple(c for c in ANCHOR_COLUMNS if c not in _NOT_READ)
"""The anchor columns the copy is built from (``args``/``redaction`` only feed derived ones;
``version``, the row version the database orders, is what the copy syncs on)."""

SOURCE_TYPES: Final[dict[str, str]] = {
    "seq": "int64",
    "turn": "int64",
    "start_ns": "int64",
    "duration_ms": "float64",
    "updated_ns": "int64",
    "version": "int64",
}
"""Arrow types of the source columns that are not text."""

BATCH_ROWS: Final = 50_000
_SELECT: Final = f"SELECT {', '.join(SOURCE_COLUMNS)} FROM anchors"
_SENTINEL: Final = ", ".join(
    f"{'-1' if SOURCE_TYPES.get(c) == 'int64' else '0.0' if c in SOURCE_TYPES else chr(39) * 2}"
    f" AS {c}"
    for c in SOURCE_COLUMNS
)
_TYPED: Final = ", ".join(
    # the ledger's CHECK constraints fix every column's type but duration_ms's (a REAL that
    # also admits integers); casting all of them would cost 15% of the read
    f"CAST({c} AS REAL) AS {c}" if c == "duration_ms" else c
    for c in SOURCE_COLUMNS
)
_ARROW_SELECT: Final = f"SELECT {_SENTINEL} UNION ALL SELECT {_TYPED} FROM anchors"
"""The SQLite read for the Arrow reader, after one typed row that is dropped again (the
reader infers each column's type from its first rows, and a column that starts with NULLs
would otherwise be typed wrongly; a value of another type later fails the read, and the row
reader takes over)."""


_ARROW_BATCH_ROWS: Final = 65_536
_END: Final = object()


class ReadAgain(Exception):
    """A read failed part way; the source has switched readers: read again."""


def _starts_typed(batch: Any) -> bool:
    first = batch.slice(0, 1).to_pylist()
    return bool(first) and first[0]["updated_ns"] == -1 and first[0]["tool_call_id"] == ""


def arrow_schema() -> Any:
    """The Arrow schema of ``Source.read_tables``' tables."""
    return pa.schema([(c, getattr(pa, SOURCE_TYPES.get(c, "string"))()) for c in SOURCE_COLUMNS])


def rows_to_table(rows: Sequence[tuple[Any, ...]]) -> Any:
    """Source rows (tuples in ``SOURCE_COLUMNS`` order) as an Arrow table."""
    schema = arrow_schema()
    if not rows:
        empty: list[pa.Array[Any]] = [pa.nulls(0, f.type) for f in schema]
        return pa.table(empty, schema=schema)  # no pandas
    columns = list(zip(*rows, strict=True))
    arrays: list[pa.Array[Any]] = [
        pa.array(values, field.type) for values, field in zip(columns, schema, strict=True)
    ]
    return pa.table(arrays, schema=schema)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Source(ABC):
    """Where the anchors come from."""

    url: str
    dialect: str
    snapshot_default: Path | None = None
    """Where the columnar snapshot goes by default (None: use the user cache folder)."""

    @abstractmethod
    def stats(self) -> tuple[int | None, int]:
        """(number of anchors or None when unknown, newest row ``version`` or 0)."""

    def newest(self) -> int | None:
        """The newest row ``version`` (an index lookup), or None when it cannot be had cheaply.

        Versions come from one counter in the database, taken under its write lock and held
        until commit: a row committed later always has a higher version, whatever the writers'
        clocks say, so "versions above the last one read" is exactly what was written since."""
        return None

    @abstractmethod
    def read(self, after_ns: int | None) -> Iterator[list[tuple[Any, ...]]]:
        """Batches of rows (``SOURCE_COLUMNS``) with ``version > after_ns`` (None: all)."""

    def read_tables(self, after_ns: int | None) -> Iterator[Any]:
        """The anchors with ``version > after_ns`` (None: all) as Arrow tables
        (``arrow_schema()``), one consistent read.

        Raises:
            ReadAgain: the read failed part way in a way the source has now worked around
                (it switched readers): start the read again.
        """
        for batch in self.read(after_ns):
            yield rows_to_table(batch)

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one read-only SQL statement on the ledger: (column names, rows)."""
        raise AnalyticsError(f"SQL cannot run on {self.url}: open the ledger by its URL")

    def close(self) -> None:  # noqa: B027 - optional
        """Release the connection."""


class SQLiteSource(Source):
    """A SQLite ledger file, read through its own read-only connection."""

    dialect = "sqlite"

    def __init__(self, url: str, path: Path) -> None:
        self.url = url
        self.path = path
        if not path.exists():
            raise AnalyticsError(f"no ledger database at {path}")
        self.snapshot_default = path.with_name(path.name + ".analytics.parquet")
        uri = self._uri = "file:" + quote(str(path.resolve())) + "?mode=ro"
        self._adbc: bool | None = None
        """Whether ADBC's SQLite driver reads (None: not tried yet; False: not installed or
        failed)."""
        try:
            self._conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, timeout=5, check_same_thread=False
            )
            self._conn.execute("PRAGMA query_only = 1")
            self._conn.execute("SELECT 1 FROM anchors LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise AnalyticsError(f"{path} is not an intentrace ledger: {_one_line(exc)}") from None

    def stats(self) -> tuple[int | None, int]:
        count, newest = self._conn.execute(
            "SELECT count(*), coalesce(max(version), 0) FROM anchors"
        ).fetchone()
        return int(count), int(newest)

    def newest(self) -> int | None:
        (value,) = self._conn.execute("SELECT coalesce(max(version), 0) FROM anchors").fetchone()
        return int(value)

    def read(self, after_ns: int | None) -> Iterator[list[tuple[Any, ...]]]:
        if after_ns is None:
            cursor = self._conn.execute(_SELECT)
        else:
            cursor = self._conn.execute(f"{_SELECT} WHERE version > ?", (after_ns,))
        while batch := cursor.fetchmany(BATCH_ROWS):
            yield batch

    def read_tables(self, after_ns: int | None) -> Iterator[Any]:
        """Read in C straight into Arrow (ADBC's SQLite driver) when it is installed, on a
        thread of its own that reads the next batch while the caller works on this one (the
        driver and Arrow let go of the GIL): a million anchors in about 1.5 s, against 3 s of
        fetching rows plus 2.5 s of turning Python values into Arrow arrays. Any failure
        switches this source to the row reader for good (exact, slower)."""
        if not self._adbc_available():
            yield from super().read_tables(after_ns)
            return
        sql = _ARROW_SELECT
        if after_ns is not None:
            sql = f"{sql} WHERE version > {int(after_ns)}"
        batches: queue.Queue[Any] = queue.Queue(maxsize=2)
        stop = threading.Event()
        reader = threading.Thread(
            target=self._read_adbc,
            args=(sql, batches, stop),
            name="intentrace-analytics-read",
            daemon=True,
        )
        reader.start()
        schema = arrow_schema()
        yielded = False
        try:
            while (item := batches.get()) is not _END:
                if isinstance(item, BaseException):
                    logger.warning(
                        "intentrace analytics: reading %s row by row from now on: %s",
                        self.path,
                        item,
                    )
                    self._adbc = False
                    if yielded:
                        raise ReadAgain(str(item))
                    yield from super().read_tables(after_ns)
                    return
                if not yielded and not _starts_typed(item):
                    self._adbc = False
                    yield from super().read_tables(after_ns)
                    return
                table = pa.Table.from_batches([item]).slice(0 if yielded else 1)
                yielded = True
                yield table if table.schema.equals(schema) else table.cast(schema)
        finally:
            stop.set()
            while reader.is_alive():  # unblock a reader waiting on a full queue
                with contextlib.suppress(queue.Empty):
                    batches.get(timeout=0.05)
            reader.join()

    def _adbc_available(self) -> bool:
        if self._adbc is None:
            # optional (the analytics extra brings it): the driver itself, not its DB-API
            # layer (which imports pandas: 0.3 s)
            try:
                import adbc_driver_manager  # noqa: F401  # pyright: ignore[reportUnusedImport]
                import adbc_driver_sqlite  # noqa: F401  # pyright: ignore[reportUnusedImport]

                self._adbc = True
            except ImportError:
                self._adbc = False
        return self._adbc

    def _read_adbc(
        self,
        sql: str,
        batches: queue.Queue[Any],
        stop: threading.Event,
    ) -> None:
        # optional: _adbc_available imported them already
        import adbc_driver_manager as manager
        import adbc_driver_sqlite

        try:
            with (
                adbc_driver_sqlite.connect(self._uri) as database,
                manager.AdbcConnection(database) as conn,
                manager.AdbcStatement(conn) as statement,
            ):
                statement.set_options(**{"adbc.sqlite.query.batch_rows": str(_ARROW_BATCH_ROWS)})
                statement.set_sql_query(sql)
                stream, _ = statement.execute_query()
                reader = pa.RecordBatchReader.from_stream(stream)
                while not stop.is_set():
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        break
                    if batch.num_rows:
                        batches.put(batch)
                reader.close()
        except Exception as exc:  # handed to the caller, which falls back
            batches.put(exc)
            return
        batches.put(_END)

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            cursor = self._conn.execute(sql)
            rows = cursor.fetchall()
        except (sqlite3.Error, sqlite3.Warning) as exc:
            raise AnalyticsError(f"SQL error: {_one_line(exc)}") from None
        columns = [d[0] for d in cursor.description or ()]
        return columns, rows

    def close(self) -> None:
        self._conn.close()


class PostgresSource(Source):
    """A PostgreSQL ledger, read in read-only transactions."""

    dialect = "postgresql"

    def __init__(self, url: str, dsn: str) -> None:
        # lazy: psycopg is the optional `postgres` extra
        try:
            import psycopg
        except ImportError:  # pragma: no cover - depends on the install
            raise AnalyticsError(
                "a postgresql:// ledger needs psycopg 3: pip install 'intentrace[postgres]'"
            ) from None
        from psycopg.conninfo import conninfo_to_dict  # lazy: as psycopg above

        self.url = url
        self._psycopg: Any = psycopg
        try:
            given = str(conninfo_to_dict(dsn).get("options") or "")
            self._conn: Any = psycopg.connect(
                dsn,
                autocommit=True,
                connect_timeout=5,
                application_name="intentrace-analytics",
                options=f"{given} -c default_transaction_read_only=on".strip(),
            )
            self._conn.execute("SELECT 1 FROM anchors LIMIT 1").fetchall()
        except psycopg.Error as exc:
            raise AnalyticsError(f"cannot read the ledger {url}: {_one_line(exc)}") from None

    def stats(self) -> tuple[int | None, int]:
        row = self._conn.execute(
            "SELECT count(*), coalesce(max(version), 0) FROM anchors"
        ).fetchone()
        return int(row[0]), int(row[1])

    def newest(self) -> int | None:
        row = self._conn.execute("SELECT coalesce(max(version), 0) FROM anchors").fetchone()
        return int(row[0])

    def read(self, after_ns: int | None) -> Iterator[list[tuple[Any, ...]]]:
        with self._conn.transaction(), self._conn.cursor(name="intentrace_analytics") as cur:
            if after_ns is None:
                cur.execute(_SELECT)
            else:
                cur.execute(f"{_SELECT} WHERE version > %s", (after_ns,))
            while batch := cur.fetchmany(BATCH_ROWS):
                yield batch

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            with self._conn.cursor() as cur:
                cur.execute(sql)
                if cur.description is None:
                    return [], []
                return [d.name for d in cur.description], cur.fetchall()
        except self._psycopg.Error as exc:
            raise AnalyticsError(f"SQL error: {_one_line(exc)}") from None

    def close(self) -> None:
        self._conn.close()


class LedgerSource(Source):
    """An open ``Ledger`` read through its public API (for ``sqlite:///:memory:`` ledgers)."""

    dialect = "sqlite"

    def __init__(self, ledger: Ledger) -> None:
        self.url = ledger.url
        self._ledger = ledger

    def stats(self) -> tuple[int | None, int]:
        return None, 0

    def read(self, after_ns: int | None) -> Iterator[list[tuple[Any, ...]]]:
        since = -1 if after_ns is None else after_ns
        while True:
            try:
                anchors = self._ledger.written_after(since, limit=BATCH_ROWS)
            except LedgerError as exc:
                raise AnalyticsError(str(exc)) from None
            if not anchors:
                return
            rows: list[Mapping[str, Any]] = list(anchors)
            yield [tuple(a[c] for c in SOURCE_COLUMNS) for a in rows]
            since = anchors[-1]["version"]


def open_source(ledger: str | Ledger | None) -> Source:
    """The source for a ledger URL (argument > ``$INTENTRACE_LEDGER_URL`` > default) or object."""
    if isinstance(ledger, Ledger):
        parsed = parse_ledger_url(ledger.connect_url)
        if parsed.backend == "sqlite" and parsed.path is None:
            return LedgerSource(ledger)
        url = ledger.connect_url
    else:
        url = ledger
    try:
        parsed = parse_ledger_url(url)
    except LedgerError as exc:
        raise AnalyticsError(str(exc)) from None
    if parsed.backend == "postgresql":
        return PostgresSource(parsed.url, parsed.dsn)
    if parsed.path is None:
        raise AnalyticsError("an in-memory ledger can only be analysed through its Ledger object")
    return SQLiteSource(parsed.url, parsed.path)
