"""The embedded store: SQLite in WAL mode (``synchronous=NORMAL``), or ``:memory:`` for tests."""

from __future__ import annotations

import functools
import itertools
import json
import os
import sqlite3
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tracing.anchor import ANCHOR_COLUMNS
from tracing.ledger._config import LedgerOptions
from tracing.ledger._files import create_private
from tracing.ledger._plan import SessionDelta, Update, loaded_row
from tracing.ledger._store import LOOKUP_COLUMNS, RefusedError, Store

_CHUNK = 900
_ROW_MARKS = f"({', '.join('?' for _ in ANCHOR_COLUMNS)})"
_MAX_ROWS_PER_INSERT = 1024
"""Most rows per INSERT statement (fewer when the build's parameter limit is lower: 999 in
SQLite before 3.32). Python's sqlite3 releases the GIL around every statement step, and a
thread that wants it back waits until the thread holding it lets go (up to the interpreter's
5 ms switch interval): few, large steps spare the writer that wait while other threads run
Python (measured in bench/ledger.py)."""
_MAX_ROWS_PER_UPDATE = 64
_UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)
"""UPDATE ... FROM: SQLite 3.33 and later."""
_ALLOCATE_SQL = (
    "INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) VALUES {values} "
    "ON CONFLICT (session_id) DO UPDATE SET "
    "next_seq = next_seq + excluded.next_seq - 1, "
    "last_turn = max(last_turn, excluded.last_turn), "
    "first_ns = coalesce(min(first_ns, excluded.first_ns), first_ns, excluded.first_ns), "
    "last_ns = coalesce(max(last_ns, excluded.last_ns), last_ns, excluded.last_ns)"
)
_SESSION_MARKS = "(?, ?, ?, ?, ?)"


def _limit(conn: sqlite3.Connection) -> int:
    """Most parameters one statement may have."""
    try:
        return conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    except (AttributeError, sqlite3.Error):  # (a connection that does not tell)
        return 999


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _json_per_chunk(conn: Any, sql: str, keys: Sequence[str]) -> Iterator[Any]:
    """``sql`` (its IN list written ``{marks}``; one JSON aggregate out) once per ``_CHUNK``
    keys, each result decoded: one statement step per chunk, whatever the number of rows."""
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        (text,) = conn.execute(sql.format(marks=_marks(len(chunk))), chunk).fetchone()
        yield json.loads(text)


@functools.lru_cache(maxsize=16)
def _insert_sql(rows: int) -> str:
    return f"INSERT INTO anchors ({', '.join(ANCHOR_COLUMNS)}) VALUES " + ", ".join(
        [_ROW_MARKS] * rows
    )


@functools.lru_cache(maxsize=64)
def _update_sql(columns: tuple[str, ...], rows: int) -> str:
    """UPDATE of ``columns`` by rowid; ``rows`` > 1: that many rows (rowid, values...) at once."""
    if rows == 1:
        return f"UPDATE anchors SET {', '.join(f'{c} = ?' for c in columns)} WHERE rowid = ?"
    sets = ", ".join(f"{c} = v.column{i + 2}" for i, c in enumerate(columns))
    marks = ", ".join([f"({_marks(len(columns) + 1)})"] * rows)
    return f"UPDATE anchors SET {sets} FROM (VALUES {marks}) AS v WHERE anchors.rowid = v.column1"


class SQLiteStore(Store):
    """SQLite at ``path`` (None: one private in-memory database shared by every role)."""

    dialect = "sqlite"

    def __init__(self, path: Path | None, options: LedgerOptions) -> None:
        self.path = path
        self.options = options
        self._memory: sqlite3.Connection | None = None
        self.memory_lock = threading.RLock()
        self._identity: tuple[int, int] | None = None
        """(st_dev, st_ino) of the file the writer connection opened (``check_file``)."""

    @property
    def shared(self) -> bool:
        return self.path is None

    def guard(self) -> AbstractContextManager[Any]:
        return self.memory_lock if self.path is None else nullcontext()

    def describe(self) -> str:
        return str(self.path) if self.path is not None else ":memory:"

    def is_transient(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError)

    def is_permanent(self, exc: BaseException) -> bool:
        # (a file that is not a database: "file is not a database" is a DatabaseError)
        return isinstance(exc, RefusedError) or (
            isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)
        )

    def check_file(self) -> str | None:
        if self.path is None or self._identity is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return f"the ledger file {self.path} was deleted under the writer"
        except OSError:
            return None  # (cannot tell: the write itself will say)
        if (st.st_dev, st.st_ino) != self._identity:
            return f"the ledger file {self.path} was replaced under the writer"
        return None

    def refuse_foreign(self, conn: Any) -> None:
        names = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        if names and not names & {"anchors", "schema_migrations"}:
            shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
            raise RefusedError(
                f"{self.path} is another application's SQLite database (tables {shown}), not "
                "an intentrace ledger: give the ledger a file of its own"
            )

    def connect(self, *, role: str) -> sqlite3.Connection:
        timeout = self.options.busy_timeout_millis / 1000
        if self.path is None:
            if self._memory is None:
                self._memory = sqlite3.connect(
                    ":memory:", isolation_level=None, check_same_thread=False
                )
            return self._memory
        if role == "reader_ro":
            uri = "file:" + quote(str(self.path.resolve())) + "?mode=ro"
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
            )
            conn.execute("PRAGMA query_only = 1")
            return conn
        if self.path.is_dir():
            raise RefusedError(
                f"{self.path} is a directory: give the ledger a file path "
                f"(sqlite:///{self.path / 'ledger.db'})"
            )
        if role == "writer":
            create_private(self.path)  # (0600: the ledger holds model- and tool-written text)
        conn = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=timeout
        )
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
            if role == "writer":
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA cache_size = -{max(1, self.options.sqlite_cache_mib) * 1024}")
                conn.execute("PRAGMA temp_store = MEMORY")
                st = os.stat(self.path)
                self._identity = (st.st_dev, st.st_ino)
        except BaseException:
            conn.close()
            raise
        return conn

    def close_connection(self, conn: Any) -> None:
        if conn is self._memory:
            return
        super().close_connection(conn)

    def close_all(self) -> None:
        """Close the in-memory database (its data is gone)."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def has_schema(self, conn: Any) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'anchors'"
        ).fetchone()
        return row is not None

    @contextmanager
    def transaction(self, conn: Any) -> Generator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def lookup(self, conn: Any, ids: Sequence[str]) -> dict[str, tuple[Any, dict[str, Any]]]:
        found: dict[str, tuple[Any, dict[str, Any]]] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            rows = conn.execute(
                f"SELECT rowid, {LOOKUP_COLUMNS} FROM anchors "
                f"WHERE tool_call_id IN ({_marks(len(chunk))})",
                chunk,
            ).fetchall()
            for row in rows:
                loaded = loaded_row(row[1:])
                found[loaded["tool_call_id"]] = (row[0], loaded)
        return found

    def stamps(self, conn: Any, ids: Sequence[str]) -> dict[str, tuple[Any, int]]:
        # One statement step for all the rows (each step hands the GIL around).
        found: dict[str, tuple[Any, int]] = {}
        for rows in _json_per_chunk(
            conn,
            "SELECT json_group_array(json_array(tool_call_id, rowid, updated_ns)) "
            "FROM anchors WHERE tool_call_id IN ({marks})",
            ids,
        ):
            for cid, rid, stamp in rows:
                found[cid] = (rid, stamp)
        return found

    def allocate(self, conn: Any, deltas: Mapping[str, SessionDelta]) -> dict[str, int]:
        # The counters as they are, then one upsert for all the sessions: a few statement
        # steps whatever the number of sessions.
        names = sorted(deltas)
        bases = dict.fromkeys(names, 1)
        for counters in _json_per_chunk(
            conn,
            "SELECT json_group_object(session_id, next_seq) FROM sessions "
            "WHERE session_id IN ({marks})",
            names,
        ):
            bases.update(counters)
        per = max(1, min(_CHUNK, _limit(conn) // 5))
        for start in range(0, len(names), per):
            chunk = names[start : start + per]
            params: list[Any] = []
            for name in chunk:
                d = deltas[name]
                params += (name, d.slots + 1, d.last_turn, d.first_ns, d.last_ns)
            values = ", ".join([_SESSION_MARKS] * len(chunk))
            conn.execute(_ALLOCATE_SQL.format(values=values), params)
        return bases

    def versions(self, conn: Any, n: int) -> int:
        (after,) = conn.execute(
            "UPDATE ledger_clock SET next_version = next_version + ? WHERE id = 1 "
            "RETURNING next_version",
            (n,),
        ).fetchone()
        return int(after) - n

    def insert(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
        # Statements of a few fixed sizes (each prepared once): the most rows the parameter
        # limit allows up to _MAX_ROWS_PER_INSERT, then halves for the rest.
        per = _MAX_ROWS_PER_INSERT
        most = max(1, _limit(conn) // len(ANCHOR_COLUMNS))
        while per > most:
            per //= 2
        chain = itertools.chain.from_iterable
        start, n = 0, len(rows)
        while start < n:
            while per > n - start:
                per //= 2
            end = start + per * ((n - start) // per)
            sql = _insert_sql(per)
            if per == 1:
                conn.executemany(sql, rows[start:end])
            else:
                conn.executemany(
                    sql, [tuple(chain(rows[k : k + per])) for k in range(start, end, per)]
                )
            start = end

    def update(self, conn: Any, updates: Sequence[Update]) -> None:
        # Rows that change the same columns go together, up to _MAX_ROWS_PER_UPDATE to a
        # statement (UPDATE ... FROM VALUES: one statement step for them all, see insert).
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for u in updates:
            groups.setdefault(tuple(u.values), []).append((u.rid, *u.values.values()))
        chain = itertools.chain.from_iterable
        for columns, params in groups.items():
            per = _MAX_ROWS_PER_UPDATE if _UPDATE_FROM else 1
            most = max(1, _limit(conn) // (len(columns) + 1))
            start, n = 0, len(params)
            while start < n:
                while per > most or per > n - start:
                    per //= 2
                end = start + per * ((n - start) // per)
                sql = _update_sql(columns, per)
                if per == 1:
                    conn.executemany(sql, [(*p[1:], p[0]) for p in params[start:end]])
                else:
                    conn.executemany(
                        sql, [tuple(chain(params[k : k + per])) for k in range(start, end, per)]
                    )
                start = end

    def upsert_blocks(
        self, conn: Any, blocks: Sequence[tuple[str, str, int | None, str, int]]
    ) -> None:
        if blocks:
            conn.executemany(
                "INSERT INTO blocks (session_id, batch_id, turn, activity_label, seq) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, batch_id) DO UPDATE SET "
                "activity_label = excluded.activity_label, turn = coalesce(excluded.turn, turn)",
                blocks,
            )

    def add_dropped(self, conn: Any, rows: Sequence[tuple[str, str, int, int, int]]) -> None:
        conn.executemany(
            "INSERT INTO dropped (session_id, source, count, first_ns, last_ns) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, source) DO UPDATE SET "
            "count = count + excluded.count, first_ns = min(first_ns, excluded.first_ns), "
            "last_ns = max(last_ns, excluded.last_ns)",
            rows,
        )

    def has_table(self, conn: Any, name: str) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        return row is not None

    def bump_turn(self, conn: Any, session_id: str, floor: int, *, wait_millis: int) -> int:
        if self.path is not None:  # (the reader's own wait, only for this statement)
            conn.execute(f"PRAGMA busy_timeout = {max(0, int(wait_millis))}")
        try:
            (turn,) = conn.execute(
                "INSERT INTO sessions (session_id, next_seq, last_turn) VALUES (?, 1, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET "
                "last_turn = max(last_turn + 1, excluded.last_turn) RETURNING last_turn",
                (session_id, max(1, floor)),
            ).fetchall()[0]
        finally:
            if self.path is not None:
                conn.execute(
                    f"PRAGMA busy_timeout = {max(0, int(self.options.busy_timeout_millis))}"
                )
        return int(turn)

    reclaims_space = True

    def is_full(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and (
            "disk is full" in str(exc)
            or getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        )

    def reclaim(self, conn: Any) -> None:
        # The WAL holds every page written since the last checkpoint, and SQLite checkpoints
        # only at 1 000 pages (4 MiB): on a small volume the WAL alone fills it, and nothing
        # ever shrinks it. Copy it into the database and truncate it to zero bytes.
        if self.path is not None:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def is_locked(self, exc: BaseException) -> bool:
        text = str(exc).lower()
        return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)

    def query(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return conn.execute(sql, params).fetchall()
