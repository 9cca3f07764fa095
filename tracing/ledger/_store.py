"""What the writer and the readers need from a database (SQLite and PostgreSQL implement it)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any, Final

from tracing.anchor import ANCHOR_COLUMNS, COLUMN_TYPES, NOT_NULL_COLUMNS
from tracing.ledger._plan import LOADED_COLUMNS, SessionDelta, Update

LIVE_SQL: Final = "('streaming', 'in_flight', 'background')"
"""The live statuses as an SQL list (the partial index's predicate; keep them identical)."""
SETTLED_SQL: Final = "('success', 'error', 'cancelled', 'abandoned')"

_TYPES: Final = {
    "sqlite": {"text": "TEXT", "integer": "INTEGER", "real": "REAL"},
    "postgresql": {"text": "text", "integer": "bigint", "real": "double precision"},
}


_SQLITE_TYPEOF: Final = {
    "text": "'text', 'null'",
    "integer": "'integer', 'null'",
    "real": "'real', 'integer', 'null'",
}


_V1_COLUMNS: Final = ANCHOR_COLUMNS[: ANCHOR_COLUMNS.index("updated_ns") + 1]
"""The columns of the first release's ``anchors`` (migration 0001 creates these; later ones
add the rest)."""


def _column_ddl(dialect: str, column: str) -> str:
    kind = COLUMN_TYPES[column]
    sql_type = _TYPES[dialect][kind]
    if column == "tool_call_id":
        line = f"tool_call_id {sql_type} NOT NULL PRIMARY KEY"
    elif column == "session_id":
        line = f"session_id {sql_type} NOT NULL DEFAULT ''"
    elif column == "version":
        line = f"version {sql_type} NOT NULL DEFAULT 0"  # (added to tables holding rows)
    elif column in NOT_NULL_COLUMNS:
        line = f"{column} {sql_type} NOT NULL"
    else:
        line = f"{column} {sql_type}"
    if dialect == "sqlite":
        # Types enforced like PostgreSQL's (and STRICT tables', readable by any SQLite): a
        # wrong type fails the write, and the writer's careful replay coerces it.
        allowed = _SQLITE_TYPEOF[kind]
        line += f" CHECK (typeof({column}) IN ({allowed}))"
    return line


def anchors_ddl(dialect: str, columns: Sequence[str] = _V1_COLUMNS) -> str:
    """CREATE TABLE for ``anchors`` from the single column list in ``tracing.anchor``."""
    lines = [_column_ddl(dialect, column) for column in columns]
    return "CREATE TABLE anchors (\n  " + ",\n  ".join(lines) + "\n)"


_SPAN_ID_SQL: Final = "length(tool_call_id) = 49 AND substr(tool_call_id, 33, 1) = ':'"
"""The first release's ids made from a span (``<trace_id>:<span_id>``), not a provider's."""


def migrations(dialect: str) -> list[tuple[str, list[str]]]:
    """Named migrations, applied in order and recorded in ``schema_migrations``."""
    integer = "INTEGER" if dialect == "sqlite" else "bigint"
    text = "TEXT" if dialect == "sqlite" else "text"
    return [
        (
            "0001_anchors_sessions_blocks",
            [
                anchors_ddl(dialect),
                "CREATE INDEX anchors_session_seq ON anchors (session_id, seq)",
                "CREATE INDEX anchors_updated ON anchors (updated_ns)",
                "CREATE INDEX anchors_live ON anchors (status, start_ns) "
                f"WHERE status IN {LIVE_SQL}",
                f"CREATE TABLE sessions (session_id {text} NOT NULL PRIMARY KEY, "
                f"next_seq {integer} NOT NULL DEFAULT 1, last_turn {integer} NOT NULL DEFAULT 0, "
                f"first_ns {integer}, last_ns {integer})",
                "CREATE INDEX sessions_last ON sessions (last_ns)",
                f"CREATE TABLE blocks (session_id {text} NOT NULL, batch_id {text} NOT NULL, "
                f"turn {integer}, activity_label {text}, seq {integer} NOT NULL, "
                "PRIMARY KEY (session_id, batch_id))",
            ],
        ),
        (
            "0002_dropped",
            [
                f"CREATE TABLE dropped (session_id {text} NOT NULL, source {text} NOT NULL, "
                f"count {integer} NOT NULL, first_ns {integer} NOT NULL, "
                f"last_ns {integer} NOT NULL, PRIMARY KEY (session_id, source))",
            ],
        ),
        (
            # Anchor identity (docs/ledger.md): the provider's id becomes a column of its own;
            # stored rows keep their ids (links and parent_call_id references stay valid), new
            # calls get ``anchor_id`` identities. Row versions from one counter, for the
            # analytics copy's sync; existing rows numbered in rowid/write order.
            "0003_provider_call_id_and_row_versions",
            [
                f"ALTER TABLE anchors ADD COLUMN {_column_ddl(dialect, 'provider_call_id')}",
                f"ALTER TABLE anchors ADD COLUMN {_column_ddl(dialect, 'version')}",
                f"UPDATE anchors SET provider_call_id = tool_call_id WHERE NOT ({_SPAN_ID_SQL})",
                "UPDATE anchors SET version = rowid"
                if dialect == "sqlite"
                else "UPDATE anchors AS a SET version = o.n FROM (SELECT tool_call_id, "
                "row_number() OVER (ORDER BY updated_ns, tool_call_id) AS n FROM anchors) AS o "
                "WHERE a.tool_call_id = o.tool_call_id",
                "CREATE INDEX anchors_version ON anchors (version)",
                "CREATE INDEX anchors_provider ON anchors (provider_call_id) "
                "WHERE provider_call_id IS NOT NULL",
                f"CREATE TABLE ledger_clock (id {integer} NOT NULL PRIMARY KEY CHECK (id = 1), "
                f"next_version {integer} NOT NULL)",
                "INSERT INTO ledger_clock (id, next_version) "
                "SELECT 1, coalesce(max(version), 0) + 1 FROM anchors",
            ],
        ),
        (
            # Who a call ran for and the trace's tags (the Sessions filters): NULL on stored
            # rows (what their spans said is gone), derived for new calls. No index: the
            # filters scan, like the agent and tool filters.
            "0004_user_and_tags",
            [
                f"ALTER TABLE anchors ADD COLUMN {_column_ddl(dialect, 'user_id')}",
                f"ALTER TABLE anchors ADD COLUMN {_column_ddl(dialect, 'tags')}",
            ],
        ),
    ]


LOOKUP_COLUMNS: Final = ", ".join(LOADED_COLUMNS) + ", args IS NULL, result IS NULL"


class RefusedError(Exception):
    """The database is not one this release may write: another app's, a newer schema's, a
    directory. Permanent: retrying cannot fix it (the message says what to do)."""


class Store(ABC):
    """One database: connections, migrations, the batch write primitives, and reads."""

    dialect: str
    strip_nul: bool = False
    """PostgreSQL text cannot hold NUL: writes replace it."""

    @abstractmethod
    def is_transient(self, exc: BaseException) -> bool:
        """Errors worth retrying (locked, read-only, full, unreachable): not the data's fault."""

    def is_permanent(self, exc: BaseException) -> bool:
        """Failures to connect or migrate that retrying cannot fix: the configuration's
        (authentication, a missing database or role, a bad parameter, not a ledger, a newer
        schema). ``open_ledger`` raises them; the writer drops a batch that meets one at once."""
        return isinstance(exc, RefusedError)

    def stall_limit_seconds(self) -> float | None:
        """How long one batch's database work may take before the writer's connection is cut
        (None: never; the database's own timeouts bound it)."""
        return None

    def interrupt(self, conn: Any) -> None:
        """Make a call blocked on ``conn`` fail now (from another thread)."""
        del conn

    def check_file(self) -> str | None:
        """What is wrong with the database under an open writer connection (a SQLite file
        deleted or replaced); None: nothing known."""
        return None

    # --- connections -----------------------------------------------------------------------
    @abstractmethod
    def connect(self, *, role: str) -> Any:
        """A new connection; ``role`` is ``writer``, ``reader`` or ``reader_ro``."""

    def close_connection(self, conn: Any) -> None:
        with suppress(Exception):  # closing a broken connection: nothing to do
            conn.close()

    def guard(self) -> AbstractContextManager[Any]:
        """Held around every use of a shared connection (SQLite ``:memory:``); else a no-op."""
        return nullcontext()

    @property
    def shared(self) -> bool:
        """True when every role shares one connection (SQLite ``:memory:``)."""
        return False

    @abstractmethod
    def describe(self) -> str:
        """Where the data lives (for messages)."""

    # --- schema ------------------------------------------------------------------------------
    mark: str = "?"
    """The driver's parameter placeholder."""

    def migration_transaction(self, conn: Any) -> AbstractContextManager[Any]:
        """The transaction migrations run in (PostgreSQL adds a lock: one migrator at a time)."""
        return self.transaction(conn)

    def refuse_foreign(self, conn: Any) -> None:
        """Raise ``RefusedError`` when the database holds another app's data (inside the
        migration transaction). SQLite: a file with tables but no ledger's."""
        del conn

    def migrate(self, conn: Any) -> list[str]:
        """Apply pending migrations; returns the names applied."""
        types = _TYPES[self.dialect]
        applied: list[str] = []
        with self.migration_transaction(conn):
            self.refuse_foreign(conn)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                f"(name {types['text']} NOT NULL PRIMARY KEY, "
                f"applied_ns {types['integer']} NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
            known = migrations(self.dialect)
            newer = sorted(done - {name for name, _ in known})
            if newer:
                raise RefusedError(
                    f"{self.describe()} has a newer ledger schema ({', '.join(newer)}) than "
                    "this intentrace knows: upgrade intentrace to write it"
                )
            for name, statements in known:
                if name in done:
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (name, applied_ns) "
                    f"VALUES ({self.mark}, {self.mark})",
                    (name, time.time_ns()),
                )
                applied.append(name)
        return applied

    @abstractmethod
    def has_schema(self, conn: Any) -> bool:
        """Whether the ledger tables exist."""

    # --- batch writes (inside ``transaction``) ---------------------------------------------
    @abstractmethod
    @contextmanager
    def transaction(self, conn: Any) -> Generator[None]:
        """A write transaction holding the write lock (SQLite ``BEGIN IMMEDIATE``)."""
        yield

    @abstractmethod
    def lookup(self, conn: Any, ids: Sequence[str]) -> dict[str, tuple[Any, dict[str, Any]]]:
        """Stored state of the given ids: ``{id: (rid, loaded columns)}``; locks them."""

    @abstractmethod
    def stamps(self, conn: Any, ids: Sequence[str]) -> dict[str, tuple[Any, int]]:
        """``{id: (rid, updated_ns)}`` of the given stored calls (inside ``transaction``; locks
        them like ``lookup``): enough to tell whether rows are still as this writer left them
        or planned them."""

    @abstractmethod
    def allocate(self, conn: Any, deltas: Mapping[str, SessionDelta]) -> dict[str, int]:
        """Reserve ``slots`` numbers per session and fold in the turn and times; returns the
        first number of each session's range."""

    @abstractmethod
    def versions(self, conn: Any, n: int) -> int:
        """Reserve ``n`` row versions from the ledger's one counter (inside ``transaction``;
        held until commit, so versions follow commit order); returns the first."""

    @abstractmethod
    def insert(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert new anchors (full rows in ``ANCHOR_COLUMNS`` order)."""

    @abstractmethod
    def update(self, conn: Any, updates: Sequence[Update]) -> None:
        """Update the given columns of stored anchors."""

    @abstractmethod
    def upsert_blocks(
        self, conn: Any, blocks: Sequence[tuple[str, str, int | None, str, int]]
    ) -> None:
        """Set activity labels: (session_id, batch_id, turn, label, seq)."""

    @abstractmethod
    def add_dropped(self, conn: Any, rows: Sequence[tuple[str, str, int, int, int]]) -> None:
        """Add to the ``dropped`` counts: (session_id, source, count, first_ns, last_ns)."""

    @abstractmethod
    def has_table(self, conn: Any, name: str) -> bool:
        """Whether the table exists (a ledger made by an older release may lack newer ones)."""

    def live_before(self, conn: Any, cutoff_ns: int, limit: int) -> list[dict[str, Any]]:
        """Live anchors last written before ``cutoff_ns`` (for reaping)."""
        keys = ("tool_call_id", "tool_name", "intent", "outcome")
        rows = self.query(
            conn,
            f"SELECT {', '.join(keys)} FROM anchors "
            f"WHERE status IN {LIVE_SQL} AND updated_ns < ? LIMIT ?",
            (cutoff_ns, limit),
        )
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def read_turn(self, conn: Any, session_id: str) -> int:
        """The session's ``last_turn`` as committed (0: none); never waits for a writer."""
        rows = self.query(conn, "SELECT last_turn FROM sessions WHERE session_id = ?", [session_id])
        return int(rows[0][0] or 0) if rows else 0

    def is_full(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the disk (or the database's quota) is full."""
        return False

    reclaims_space: bool = False
    """Whether ``reclaim`` can give space back (tried after a write failed for lack of it)."""

    def reclaim(self, conn: Any) -> None:  # noqa: B027 (a hook: most stores need nothing)
        """Give back the space the database's own files hold beyond its data (after a write
        failed for lack of it); nothing by default."""

    def is_locked(self, exc: BaseException) -> bool:
        """Whether ``exc`` says another writer holds the lock a statement waited for."""
        return False

    @abstractmethod
    def bump_turn(self, conn: Any, session_id: str, floor: int, *, wait_millis: int) -> int:
        """Atomically hand out the session's next turn (at least ``floor``), waiting at most
        ``wait_millis`` for a lock (then raising an error ``is_locked`` recognises)."""

    # --- reads -------------------------------------------------------------------------------
    @abstractmethod
    def query(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query written with ``?`` placeholders."""

    def like(self, column: str) -> str:
        """A case-insensitive substring match of ``column`` against one parameter."""
        return f"{column} LIKE ? ESCAPE '\\'"

    def contains(self, column: str) -> str:
        """An exact (case-sensitive) substring match of ``column`` against one parameter."""
        return f"instr({column}, ?) > 0"

    def columns(self, conn: Any, table: str) -> frozenset[str]:
        """The names of ``table``'s columns."""
        cursor = conn.execute(f"SELECT * FROM {table} LIMIT 0")
        return frozenset(str(d[0]) for d in cursor.description)
