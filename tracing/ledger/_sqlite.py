"""The embedded store: SQLite in WAL mode (``synchronous=NORMAL``), or ``:memory:`` for tests."""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Generator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tracing.ledger._config import LedgerOptions
from tracing.ledger._model import ANCHOR_COLUMNS
from tracing.ledger._plan import SessionDelta, Update
from tracing.ledger._store import LIVE_SQL, LOOKUP_COLUMNS, Store

_CHUNK = 900
_ROW_MARKS = f"({', '.join('?' for _ in ANCHOR_COLUMNS)})"
_INSERT_SQL = f"INSERT INTO anchors ({', '.join(ANCHOR_COLUMNS)}) VALUES {_ROW_MARKS}"
_ROWS_PER_INSERT = 32
"""Rows per INSERT statement (32 x 23 parameters stays under SQLite's oldest 999 limit).
Python's sqlite3 releases the GIL around every statement step: one step per 32 rows spares
the app's threads a GIL hand-off per row (measured in bench/ledger.py: the writer's CPU per
call at 200k rows 44 -> 40 us)."""
_INSERT_MANY_SQL = f"INSERT INTO anchors ({', '.join(ANCHOR_COLUMNS)}) VALUES " + ", ".join(
    [_ROW_MARKS] * _ROWS_PER_INSERT
)
_ALLOCATE_SQL = (
    "INSERT INTO sessions (session_id, next_seq, last_turn, first_ns, last_ns) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
    "next_seq = next_seq + excluded.next_seq - 1, "
    "last_turn = max(last_turn, excluded.last_turn), "
    "first_ns = coalesce(min(first_ns, excluded.first_ns), first_ns, excluded.first_ns), "
    "last_ns = coalesce(max(last_ns, excluded.last_ns), last_ns, excluded.last_ns) "
    "RETURNING next_seq"
)


class SQLiteStore(Store):
    """SQLite at ``path`` (None: one private in-memory database shared by every role)."""

    dialect = "sqlite"

    def __init__(self, path: Path | None, options: LedgerOptions) -> None:
        self.path = path
        self.options = options
        self._memory: sqlite3.Connection | None = None
        self.memory_lock = threading.RLock()

    @property
    def shared(self) -> bool:
        return self.path is None

    def guard(self) -> AbstractContextManager[Any]:
        return self.memory_lock if self.path is None else nullcontext()

    def describe(self) -> str:
        return str(self.path) if self.path is not None else ":memory:"

    def is_transient(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError)

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
        if role == "writer":
            self.path.parent.mkdir(parents=True, exist_ok=True)
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
        from tracing.ledger._plan import loaded_row

        found: dict[str, tuple[Any, dict[str, Any]]] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ", ".join("?" for _ in chunk)
            rows = conn.execute(
                f"SELECT rowid, {LOOKUP_COLUMNS} FROM anchors WHERE tool_call_id IN ({marks})",
                chunk,
            ).fetchall()
            for row in rows:
                loaded = loaded_row(row[1:])
                found[loaded["tool_call_id"]] = (row[0], loaded)
        return found

    def allocate(self, conn: Any, deltas: Mapping[str, SessionDelta]) -> dict[str, int]:
        bases: dict[str, int] = {}
        for session_id in sorted(deltas):
            d = deltas[session_id]
            (after,) = conn.execute(
                _ALLOCATE_SQL, (session_id, d.slots + 1, d.last_turn, d.first_ns, d.last_ns)
            ).fetchone()
            bases[session_id] = after - d.slots
        return bases

    def insert(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
        per = _ROWS_PER_INSERT
        whole = len(rows) - len(rows) % per
        if whole:
            chain = itertools.chain.from_iterable
            conn.executemany(
                _INSERT_MANY_SQL, [tuple(chain(rows[k : k + per])) for k in range(0, whole, per)]
            )
        if whole < len(rows):
            conn.executemany(_INSERT_SQL, rows[whole:])

    def update(self, conn: Any, updates: Sequence[Update]) -> None:
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for u in updates:
            groups.setdefault(tuple(u.values), []).append((*u.values.values(), u.rid))
        for columns, params in groups.items():
            sets = ", ".join(f"{c} = ?" for c in columns)
            conn.executemany(f"UPDATE anchors SET {sets} WHERE rowid = ?", params)

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

    def live_before(self, conn: Any, cutoff_ns: int, limit: int) -> list[dict[str, Any]]:
        rows = conn.execute(
            "SELECT tool_call_id, tool_name, intent, outcome FROM anchors "
            f"WHERE status IN {LIVE_SQL} AND updated_ns < ? LIMIT ?",
            (cutoff_ns, limit),
        ).fetchall()
        keys = ("tool_call_id", "tool_name", "intent", "outcome")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def bump_turn(self, conn: Any, session_id: str, floor: int) -> int:
        (turn,) = conn.execute(
            "INSERT INTO sessions (session_id, next_seq, last_turn) VALUES (?, 1, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET "
            "last_turn = max(last_turn + 1, excluded.last_turn) RETURNING last_turn",
            (session_id, max(1, floor)),
        ).fetchall()[0]
        return int(turn)

    def query(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return conn.execute(sql, params).fetchall()
