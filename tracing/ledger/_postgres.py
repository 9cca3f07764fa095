"""The shared store: PostgreSQL through psycopg 3 (same schema and behaviour as SQLite).

Each batch is one transaction: lock the batch's stored rows (``FOR UPDATE``), reserve sequence
ranges with one upsert on ``sessions``, COPY the new anchors straight into ``anchors``, COPY
the changed ones into a temporary table and apply them with one ``UPDATE ... FROM``.
"""

from __future__ import annotations

import os
import socket
import weakref
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from tracing.anchor import ANCHOR_COLUMNS, COLUMN_TYPES
from tracing.ledger._config import LedgerError, LedgerOptions
from tracing.ledger._plan import SessionDelta, Update, loaded_row
from tracing.ledger._store import LOOKUP_COLUMNS, RefusedError, Store

_PG_TYPES = {"text": "text", "integer": "bigint", "real": "double precision"}
_UPD_TABLE = "intentrace_upd"
_UPD_DDL = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_UPD_TABLE} ("
    + ", ".join(f"{c} {_PG_TYPES[COLUMN_TYPES[c]]}" for c in ANCHOR_COLUMNS)
    + ", mask bigint NOT NULL) ON COMMIT DELETE ROWS"
)
_BIT = {c: 1 << i for i, c in enumerate(ANCHOR_COLUMNS)}
_UPDATE_SQL = (
    "UPDATE anchors AS a SET "
    + ", ".join(
        f"{c} = CASE WHEN (u.mask & {_BIT[c]}) <> 0 THEN u.{c} ELSE a.{c} END"
        for c in ANCHOR_COLUMNS
        if c != "tool_call_id"
    )
    + f" FROM {_UPD_TABLE} AS u WHERE a.tool_call_id = u.tool_call_id"
)
_ALLOCATE_SQL = (
    "INSERT INTO sessions AS s (session_id, next_seq, last_turn, first_ns, last_ns) "
    "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) "
    "ON CONFLICT (session_id) DO UPDATE SET "
    "next_seq = s.next_seq + excluded.next_seq - 1, "
    "last_turn = GREATEST(s.last_turn, excluded.last_turn), "
    "first_ns = LEAST(s.first_ns, excluded.first_ns), "
    "last_ns = GREATEST(s.last_ns, excluded.last_ns) "
    "RETURNING session_id, next_seq"
)
_PERMANENT_SQLSTATES = frozenset({"28000", "28P01", "3D000", "42501"})
"""Authentication failed, bad password, no such database, no privilege to connect."""
_FULL_SQLSTATES = frozenset({"53100", "53400"})
"""Disk full, and a configured limit exceeded (``temp_file_limit``, a quota): class 53
(insufficient resources), transient like the rest of the class — retried, counted."""
_PERMANENT_MESSAGES = (
    "password authentication failed",
    "authentication failed",
    "does not exist",  # (a role or a database)
    "no pg_hba.conf entry",
    "invalid sslmode",
    "invalid connection option",
    "invalid integer value",
    "server does not support ssl",
    "ssl is not enabled on the server",
    "password is required",
    "no password supplied",
    "permission denied for database",
    "is not permitted to log in",
)
_MIGRATION_LOCK = 0x1E7E_4ACE  # pg_advisory_xact_lock key: one migrator at a time


def _psycopg() -> Any:
    # lazy: psycopg is the optional `postgres` extra
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise LedgerError(
            "a postgresql:// ledger needs psycopg 3: pip install 'intentrace[postgres]'"
        ) from exc
    return psycopg


class PostgresStore(Store):
    """PostgreSQL at ``dsn``."""

    dialect = "postgresql"
    strip_nul = True
    mark = "%s"

    def __init__(self, dsn: str, options: LedgerOptions) -> None:
        self.dsn = dsn
        self.options = options
        self.psycopg = _psycopg()
        self._prepared: weakref.WeakSet[Any] = weakref.WeakSet()

    def describe(self) -> str:
        # lazy: psycopg is the optional `postgres` extra
        from psycopg.conninfo import conninfo_to_dict

        try:
            info = conninfo_to_dict(self.dsn)
        except Exception:
            return "postgresql"
        host, port = info.get("host", ""), info.get("port", 5432)
        return f"postgresql {host}:{port}/{info.get('dbname', '')}"

    def is_transient(self, exc: BaseException) -> bool:
        pg = self.psycopg
        if not isinstance(exc, pg.Error):
            return False
        if str(getattr(exc, "sqlstate", "") or "").startswith("53"):
            return True  # insufficient resources (disk, memory, connections): passes
        return not isinstance(
            exc, pg.DataError | pg.IntegrityError | pg.ProgrammingError | pg.NotSupportedError
        ) or isinstance(exc, pg.errors.InsufficientPrivilege)

    def is_full(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) in _FULL_SQLSTATES

    def is_permanent(self, exc: BaseException) -> bool:
        if isinstance(exc, RefusedError):
            return True
        pg = self.psycopg
        if isinstance(exc, pg.ProgrammingError) and not isinstance(exc, pg.errors.UndefinedTable):
            return True  # (an invalid connection string or parameter: sslmode=bogus)
        if isinstance(exc, pg.OperationalError):
            sqlstate = getattr(exc, "sqlstate", None)
            if sqlstate in _PERMANENT_SQLSTATES:
                return True
            text = str(exc).lower()
            return any(marker in text for marker in _PERMANENT_MESSAGES)
        return False

    def stall_limit_seconds(self) -> float | None:
        statement = self.options.statement_timeout_millis / 1000
        if statement <= 0:
            return None
        # A batch is a handful of statements, each bounded by the server's statement_timeout:
        # twice that (and a connect) without an answer is a connection that went silent.
        return 2 * statement + max(1, self.options.connect_timeout_seconds)

    def interrupt(self, conn: Any) -> None:
        try:
            fd = conn.pgconn.socket
            sock = socket.socket(fileno=os.dup(fd))
        except Exception:
            return  # (closed meanwhile)
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # the blocked call sees the connection end
        sock.close()

    def connect(self, *, role: str) -> Any:
        # lazy: psycopg is the optional `postgres` extra
        from psycopg.conninfo import conninfo_to_dict

        opts = self.options
        given = str(conninfo_to_dict(self.dsn).get("options") or "")
        settings = [given]
        if opts.statement_timeout_millis > 0:
            settings.append(f"-c statement_timeout={int(opts.statement_timeout_millis)}")
        if role == "reader_ro":
            settings.append("-c default_transaction_read_only=on")
        idle = max(1, int(opts.keepalive_idle_seconds))
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, opts.connect_timeout_seconds),
            "application_name": f"intentrace-ledger-{role}",
            # A half-open or black-holed connection errors instead of stalling the writer:
            # keepalive probes on an idle socket, tcp_user_timeout on unacknowledged data.
            "keepalives": 1,
            "keepalives_idle": idle,
            "keepalives_interval": max(1, idle // 2),
            "keepalives_count": 3,
            "tcp_user_timeout": idle * 2 * 1000,
        }
        options = " ".join(p for p in settings if p).strip()
        if options:
            kwargs["options"] = options
        return self.psycopg.connect(self.dsn, **kwargs)

    def has_schema(self, conn: Any) -> bool:
        row = conn.execute("SELECT to_regclass('anchors') IS NOT NULL").fetchone()
        return bool(row[0])

    @contextmanager
    def migration_transaction(self, conn: Any) -> Generator[None]:
        with self.transaction(conn):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            yield

    @contextmanager
    def transaction(self, conn: Any) -> Generator[None]:
        with conn.transaction():
            yield

    def lookup(self, conn: Any, ids: Sequence[str]) -> dict[str, tuple[Any, dict[str, Any]]]:
        rows = conn.execute(
            f"SELECT {LOOKUP_COLUMNS} FROM anchors WHERE tool_call_id = ANY(%s) "
            "ORDER BY tool_call_id FOR UPDATE",
            (list(ids),),
        ).fetchall()
        found: dict[str, tuple[Any, dict[str, Any]]] = {}
        for row in rows:
            loaded = loaded_row(row)
            found[loaded["tool_call_id"]] = (None, loaded)
        return found

    def stamps(self, conn: Any, ids: Sequence[str]) -> dict[str, tuple[Any, int]]:
        # Locked like a lookup (in the same order), but only the stamps come back.
        rows = conn.execute(
            "SELECT tool_call_id, updated_ns FROM anchors WHERE tool_call_id = ANY(%s) "
            "ORDER BY tool_call_id FOR UPDATE",
            (list(ids),),
        ).fetchall()
        return {cid: (None, stamp) for cid, stamp in rows}

    def allocate(self, conn: Any, deltas: Mapping[str, SessionDelta]) -> dict[str, int]:
        if not deltas:
            return {}
        names = sorted(deltas)
        ds = [deltas[n] for n in names]
        rows = conn.execute(
            _ALLOCATE_SQL,
            (
                names,
                [d.slots + 1 for d in ds],
                [d.last_turn for d in ds],
                [d.first_ns for d in ds],
                [d.last_ns for d in ds],
            ),
        ).fetchall()
        return {name: after - deltas[name].slots for name, after in rows}

    def versions(self, conn: Any, n: int) -> int:
        # The counter's row stays locked until this transaction commits: the next writer's
        # versions are above these and it commits after this one (versions follow commit order).
        row = conn.execute(
            "UPDATE ledger_clock SET next_version = next_version + %s WHERE id = 1 "
            "RETURNING next_version",
            (n,),
        ).fetchone()
        return int(row[0]) - n

    def insert(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        with conn.cursor().copy(f"COPY anchors ({', '.join(ANCHOR_COLUMNS)}) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)

    def update(self, conn: Any, updates: Sequence[Update]) -> None:
        if not updates:
            return
        if conn not in self._prepared:
            conn.execute(_UPD_DDL)
            self._prepared.add(conn)
        columns = ", ".join(ANCHOR_COLUMNS)
        with conn.cursor().copy(f"COPY {_UPD_TABLE} ({columns}, mask) FROM STDIN") as cp:
            for u in updates:
                values = u.values
                mask = 0
                for c in values:
                    mask |= _BIT[c]
                row = [values.get(c) for c in ANCHOR_COLUMNS]
                row[0] = u.tool_call_id
                row.append(mask)
                cp.write_row(row)
        conn.execute(_UPDATE_SQL)

    def upsert_blocks(
        self, conn: Any, blocks: Sequence[tuple[str, str, int | None, str, int]]
    ) -> None:
        if blocks:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO blocks AS b (session_id, batch_id, turn, activity_label, seq) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id, batch_id) DO UPDATE "
                    "SET activity_label = excluded.activity_label, "
                    "turn = coalesce(excluded.turn, b.turn)",
                    blocks,
                )

    def add_dropped(self, conn: Any, rows: Sequence[tuple[str, str, int, int, int]]) -> None:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO dropped AS d (session_id, source, count, first_ns, last_ns) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id, source) DO UPDATE SET "
                "count = d.count + excluded.count, "
                "first_ns = LEAST(d.first_ns, excluded.first_ns), "
                "last_ns = GREATEST(d.last_ns, excluded.last_ns)",
                rows,
            )

    def has_table(self, conn: Any, name: str) -> bool:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        return bool(row[0])

    def bump_turn(self, conn: Any, session_id: str, floor: int, *, wait_millis: int) -> int:
        with conn.transaction():
            # (a writer's batch holds the session's row until it commits: wait only so long)
            conn.execute(
                "SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(wait_millis))}ms",)
            )
            row = conn.execute(
                "INSERT INTO sessions AS s (session_id, next_seq, last_turn) VALUES (%s, 1, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET "
                "last_turn = GREATEST(s.last_turn + 1, excluded.last_turn) RETURNING last_turn",
                (session_id, max(1, floor)),
            ).fetchone()
        return int(row[0])

    def is_locked(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) == "55P03"  # lock_not_available (lock_timeout)

    def query(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return conn.execute(sql.replace("?", "%s"), tuple(params)).fetchall()

    def like(self, column: str) -> str:
        return f"{column} ILIKE ? ESCAPE '\\'"

    def contains(self, column: str) -> str:
        return f"strpos({column}, ?) > 0"

    def columns(self, conn: Any, table: str) -> frozenset[str]:
        # (not ``SELECT *``: a prepared one fails once a migration changed its result type)
        rows = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attnum > 0 AND NOT attisdropped",
            (table,),
        ).fetchall()
        return frozenset(str(r[0]) for r in rows)
