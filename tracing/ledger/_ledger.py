"""The ``Ledger``: non-blocking writes through one writer thread, and the read API."""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, Final, Literal, cast, get_args

from tracing.anchor import (
    ANCHOR_COLUMNS,
    Anchor,
    AnchorWrite,
    BlockInfo,
    DroppedInfo,
    SessionInfo,
    safe_id,
    tag_list,
    tag_patterns,
)
from tracing.ledger._config import LedgerError, LedgerOptions, LedgerURL, parse_ledger_url
from tracing.ledger._plan import Activity, Dropped, TurnFloor
from tracing.ledger._postgres import PostgresStore
from tracing.ledger._sqlite import SQLiteStore
from tracing.ledger._store import LIVE_SQL, SETTLED_SQL, Store
from tracing.ledger._summary import render_summary
from tracing.ledger._writer import Flush, Stop, Writer
from tracing.status import Status

logger = logging.getLogger("tracing.ledger")

_COLS = ", ".join(ANCHOR_COLUMNS)

SessionOrder = Literal["last_seen", "first_seen", "duration", "calls", "errors", "session"]
"""How ``Ledger.sessions`` sorts (in the database, over every matching session)."""
SESSION_ORDERS: Final[tuple[SessionOrder, ...]] = get_args(SessionOrder)
_ORDER_SQL: Final[dict[SessionOrder, str]] = {
    "last_seen": "s.last_ns",
    "first_seen": "s.first_ns",
    "duration": "(s.last_ns - s.first_ns)",
    # per session through the (session_id, seq) index: half the time of grouping every anchor
    "calls": "(SELECT count(*) FROM anchors a WHERE a.session_id = s.session_id)",
    "errors": "coalesce(c.errors, 0)",
    "session": "s.session_id",
}
_Window = tuple[int | None, int | None, bool, bool]
"""since_ns, until_ns, errors, live: the Sessions filters beside agent, tool, status, search."""
_Who = tuple[str | None, str | None]
"""user, tag: the Sessions filters on who a call ran for and the trace's tags."""
_LATER_COLUMNS: Final = frozenset({"user_id", "tags"})
"""Anchor columns a ledger not migrated yet may lack (a reader never migrates: it reads them as
NULL until a writer of this release has opened the ledger)."""
_OPEN: weakref.WeakSet[Ledger] = weakref.WeakSet()


def _make_store(parsed: LedgerURL, options: LedgerOptions) -> Store:
    if parsed.backend == "sqlite":
        return SQLiteStore(parsed.path, options)
    return PostgresStore(parsed.dsn, options)


def open_ledger(
    url: str | None = None, *, read_only: bool = False, options: LedgerOptions | None = None
) -> Ledger:
    """Open the anchor ledger at ``url`` (argument > ``$INTENTRACE_LEDGER_URL`` > default file).

    A writing ledger creates the database and applies migrations (in its writer thread; the
    database may be unreachable for now: writes queue and the writer keeps retrying). A
    read-only ledger (the viewer) never writes: no migrations, no writer thread.

    Args:
        url: ``sqlite:///path.db``, ``sqlite:///:memory:``, ``postgresql://...`` or a file path.
        read_only: open for reading only.
        options: tuning (queue size, retries, reaping); ``LedgerOptions()`` by default.

    Raises:
        LedgerError: a bad URL; for ``read_only``, a database that is missing, unreachable or
            not a ledger; for writing, a file that is not a SQLite database.
    """
    parsed = parse_ledger_url(url)
    opts = options or LedgerOptions()
    return Ledger(parsed, read_only=read_only, options=opts)


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Ledger:
    """The anchor ledger (open it with ``open_ledger``).

    Writing (``record``, ``set_activity``) never raises and never waits for the database: it
    puts the write on a bounded queue; one writer thread writes it (a second one plans the next
    batch meanwhile, without touching the database). Reading runs queries on a
    separate connection and raises ``LedgerError`` (one line) when the database fails.
    """

    def __init__(self, parsed: LedgerURL, *, read_only: bool, options: LedgerOptions) -> None:
        self.url: str = parsed.url
        """The ledger URL (normalised), password removed: the one to show and store."""
        self._connect_url = parsed.connect_url
        self.read_only = read_only
        self._options = options
        self._store = _make_store(parsed, options)
        self._read_lock = threading.RLock()
        self._read_conn: Any = None
        self._missing: frozenset[str] | None = None
        self._closed = False
        self._drop_lock = threading.Lock()
        self._dropped = 0
        self._warned_drop = False
        self._lost: dict[tuple[str, str], list[int]] = {}
        """(session, source) -> [count, first_ns, last_ns]: lost calls not written yet."""
        self._turns: dict[str, int] = {}
        self._turn_attempt: threading.Thread | None = None
        self._turn_lock = threading.Lock()
        self._writer: Writer | None = None
        if read_only:
            if parsed.backend == "sqlite" and parsed.path is None:
                raise LedgerError("a sqlite:///:memory: ledger cannot be opened read-only")
            if parsed.path is not None and not parsed.path.exists():
                raise LedgerError(
                    f"no ledger database at {parsed.path} "
                    "(record some calls first, or pass --ledger / INTENTRACE_LEDGER_URL)"
                )
            try:
                conn = self._store.connect(role="reader_ro")
            except Exception as exc:
                raise LedgerError(
                    f"cannot open the ledger {self._store.describe()}: {_one_line(exc)}"
                ) from None
            try:
                ok = self._store.has_schema(conn)
            except Exception as exc:
                self._store.close_connection(conn)
                raise LedgerError(
                    f"{self._store.describe()} is not an intentrace ledger: {_one_line(exc)}"
                ) from None
            if not ok:
                self._store.close_connection(conn)
                raise LedgerError(
                    f"{self._store.describe()} is not an intentrace ledger (no anchors table)"
                )
            self._read_conn = conn
            self._queue = None
            self._max_queue = 0
            self._wake = threading.Event()
            self._wake_at = 0
            return
        writer = Writer(
            self._store,
            options,
            reap=True,
            take_dropped=self._take_dropped,
            record_dropped=lambda session, n, source: self.record_dropped(
                session, n, source=source
            ),
        )
        self._writer = writer
        self._queue = writer.queue
        self._max_queue = max(1, options.max_queue_size)
        self._wake = writer.wake
        self._wake_at = max(1, min(options.max_batch_size, self._max_queue // 2))
        writer.start()
        answered = writer.first_attempt.wait(options.open_wait_seconds)
        error = writer.init_error
        if error is not None and (
            options.open_requires_database
            or self._store.is_permanent(error)
            or (not self._store.is_transient(error) and not isinstance(error, OSError))
        ):
            writer.abort.set()
            self.close(0.5)
            raise LedgerError(
                f"cannot open the ledger {self._store.describe()}: {_one_line(error)}"
            )
        if not answered and options.open_requires_database:
            writer.abort.set()
            self.close(0.5)
            raise LedgerError(
                f"cannot open the ledger {self._store.describe()}: no answer within "
                f"{options.open_wait_seconds:g} s"
            )
        _OPEN.add(self)

    @property
    def connect_url(self) -> str:
        """The URL to open this ledger again with (password included: never show it)."""
        return self._connect_url

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "read-write"
        return f"<Ledger {self.url} {mode}{' closed' if self._closed else ''}>"

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing -----------------------------------------------------------------------------
    def record(self, write: AnchorWrite) -> None:
        """Queue one anchor write (an idempotent upsert by ``tool_call_id``; rules in ``_model``).

        Never raises and never waits for the database. The write dict belongs to the ledger
        afterwards (do not mutate it). When the queue is full the write is dropped and counted
        (``stats()["dropped"]``, logged once).
        """
        queue = self._queue
        if queue is None or self._closed:
            self._drop()
            return
        depth = queue.qsize()
        if depth >= self._max_queue:
            self._drop()
            session = write.get("session_id")
            self.record_dropped(session if isinstance(session, str) else "", source="ledger")
            return
        queue.put(write)
        if depth >= self._wake_at and not self._wake.is_set():
            self._wake.set()  # a full batch is waiting: no need to wait for the interval

    def set_activity(
        self, session_id: str, batch_id: str, label: str, *, turn: int | None = None
    ) -> None:
        """Queue a block-level activity label for the block ``batch_id`` (it heads the block)."""
        queue = self._queue
        if queue is None or self._closed or queue.qsize() >= self._max_queue:
            self._drop()
            return
        queue.put(
            Activity(
                safe_id(str(session_id)),
                safe_id(str(batch_id)),
                str(label),
                turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
            )
        )

    def record_dropped(self, session_id: str, count: int = 1, *, source: str = "processor") -> None:
        """Count calls of ``session_id`` that were lost before reaching the ledger, so readers
        can say so (``dropped()``, ``sessions()``, ``intentrace sessions``, the viewer).

        ``source`` ``processor``: tool calls a span processor shed under load (their anchor is
        missing, or settled without outcome); ``ledger``: anchor writes this ledger dropped
        because its queue was full, or its database kept failing past the retry window
        (counted here automatically). Never raises, never waits:
        the counts are added up in memory and written with the next batch.
        """
        if self._writer is None or self._closed or count <= 0:
            return
        now = time.time_ns()
        key = (safe_id(str(session_id)), safe_id(str(source)))
        with self._drop_lock:
            found = self._lost.get(key)
            if found is None:
                self._lost[key] = [int(count), now, now]
            else:
                found[0] += int(count)
                found[2] = now

    def _take_dropped(self) -> list[Dropped]:
        """The counts gathered since the last call (the writer's preparing thread)."""
        if not self._lost:
            return []
        with self._drop_lock:
            lost, self._lost = self._lost, {}
        return [Dropped(s, src, n, first, last) for (s, src), (n, first, last) in lost.items()]

    def next_turn(self, session_id: str) -> int:
        """Hand out the session's next turn number (1, 2, ...; continues across restarts).

        One statement on the database, asked off the app's thread and waited for at most
        ``turn_timeout_millis`` (1 s: a server that went silent is not waited for, the number
        continues from what this process knows). It waits at most ``turn_wait_millis`` (50) for
        the write lock: while another writer holds it (another process's transaction, this
        ledger's own batch), the number is read instead (the last committed turn + 1, never
        below what this process handed out) and recorded as a floor with the next batch. Two
        processes taking a turn of one session in that same moment may then get the same
        number. Never raises: when the database cannot answer, the number continues from what
        this process knows and is recorded as a floor once the database is back.
        """
        session_id = safe_id(str(session_id))
        floor = self._turns.get(session_id, 0) + 1
        turn = floor
        if not self.read_only and not self._closed:
            got = self._bounded_turn(session_id, floor)
            if got is None:  # no answer in time: the number is ours, recorded once it is back
                queue = self._queue
                if queue is not None:
                    queue.put(TurnFloor(session_id, floor))
            else:
                turn = got
        self._raise_turn(session_id, turn)
        return turn

    def _raise_turn(self, session_id: str, turn: int) -> None:
        with self._turn_lock:  # (a late answer in its thread and the app's own, at once)
            self._turns[session_id] = max(self._turns.get(session_id, 0), turn)

    def _bounded_turn(self, session_id: str, floor: int) -> int | None:
        """The database's turn, asked for off the app's thread and waited for at most
        ``turn_timeout_millis``; None when it did not answer in time (or an earlier attempt
        still waits for it: one at a time). A late answer still raises this process's count."""
        pending = self._turn_attempt
        if pending is not None and pending.is_alive():
            return None
        box: list[int] = []

        def ask() -> None:
            turn = self._turn_from_database(session_id, floor)
            box.append(turn)
            self._raise_turn(session_id, turn)

        thread = threading.Thread(target=ask, name="intentrace-ledger-turn", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # (no new thread at interpreter shutdown: ask here)
            ask()
            return box[0]
        self._turn_attempt = thread
        thread.join(max(0, self._options.turn_timeout_millis) / 1000)
        if not box:
            logger.debug("intentrace ledger: next_turn: no answer in time, %d is ours", floor)
            if self._writer is not None:
                self._writer.recent_errors.append("next_turn: the database did not answer in time")
            return None
        return box[0]

    def _turn_from_database(self, session_id: str, floor: int) -> int:
        """One statement (its own thread: ``_bounded_turn``); never raises."""
        try:
            with self._read_lock, self._store.guard():
                conn = self._reader()
                try:
                    return self._store.bump_turn(
                        conn, session_id, floor, wait_millis=self._options.turn_wait_millis
                    )
                except Exception as exc:
                    if not self._store.is_locked(exc):
                        raise
                    # Another writer holds the lock: read what it leaves (never blocked)
                    # and let our writer record the number.
                    turn = max(floor, self._store.read_turn(conn, session_id) + 1)
                    logger.debug("intentrace ledger: next_turn read %d (locked): %s", turn, exc)
                    if self._queue is not None:
                        self._queue.put(TurnFloor(session_id, turn))
                    return turn
        except Exception as exc:
            self._reset_reader()
            if self._writer is not None:
                self._writer.errors += 1
                self._writer.recent_errors.append(f"next_turn: {_one_line(exc)}")
            logger.debug("intentrace ledger: next_turn fell back to %d: %s", floor, exc)
            queue = self._queue
            if queue is not None:
                queue.put(TurnFloor(session_id, floor))
            return floor

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything queued so far is written (or dropped); False on timeout."""
        writer = self._writer
        if writer is None or self._closed or not writer.thread.is_alive():
            return writer is None or self._queue is None or self._queue.qsize() == 0
        marker = Flush(threading.Event())
        writer.queue.put(marker)
        writer.wake.set()
        return marker.done.wait(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued (waiting up to ``timeout_s``), then close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        writer = self._writer
        if writer is not None:
            writer.queue.put(Stop())
            writer.wake.set()
            writer.thread.join(timeout_s)
            if writer.thread.is_alive():
                writer.abort.set()
                writer.thread.join(5.0)
        self._reset_reader(wait_s=1.0)  # (a turn asked of a silent server is not waited for)
        close_all = getattr(self._store, "close_all", None)
        if close_all is not None:
            close_all()

    def stats(self) -> dict[str, int]:
        """Counters: enqueued, written, dropped, retries, errors (the database's failures),
        internal_errors (our bugs, ``tracing.diagnostics``), queue_depth, reaped, invalid,
        files_lost (the SQLite file deleted or replaced under the writer, docs/ledger.md),
        disk_full (writes that failed for lack of space or over a quota: retried as transient),
        space_reclaimed (times a write failed for lack of space and the WAL was checkpointed
        and truncated), and
        two flags: failing (1 while the last try at writing failed) and failing_permanently
        (1 while it failed for a reason retrying cannot fix: ``intentrace collect`` answers
        503 then)."""
        w = self._writer
        depth = self._queue.qsize() if self._queue is not None else 0
        if w is None:
            return {
                "enqueued": 0, "written": 0, "dropped": self._dropped, "retries": 0,
                "errors": 0, "internal_errors": 0, "queue_depth": 0, "reaped": 0, "invalid": 0,
                "files_lost": 0, "disk_full": 0, "space_reclaimed": 0, "failing": 0,
                "failing_permanently": 0,
            }  # fmt: skip
        return {
            "enqueued": w.taken + depth,
            "written": w.written,
            "dropped": self._dropped + w.dropped,
            "retries": w.retries,
            "errors": w.errors,
            "internal_errors": w.internal.count,
            "queue_depth": depth,
            "reaped": w.reaped,
            "invalid": w.invalid,
            "files_lost": w.files_lost,
            "disk_full": w.disk_full,
            "space_reclaimed": w.reclaimed,
            "failing": int(w.failing),
            "failing_permanently": int(w.permanent is not None),
        }

    def recent_errors(self) -> list[str]:
        """The latest failures, one line each, newest last: the database's (open, write, data)
        and our own bugs (also in ``tracing.diagnostics``)."""
        return list(self._writer.recent_errors) if self._writer is not None else []

    def _drop(self) -> None:
        with self._drop_lock:
            self._dropped += 1
            warn = not self._warned_drop
            self._warned_drop = True
        if warn:
            why = (
                "the ledger is read-only" if self.read_only
                else "the ledger is closed" if self._closed
                else f"the write queue is full ({self._max_queue})"
            )  # fmt: skip
            logger.warning("intentrace ledger: dropping writes: %s (counted in stats())", why)

    # --- reading -----------------------------------------------------------------------------
    def _reader(self) -> Any:
        if self._read_conn is None:
            conn = self._store.connect(role="reader_ro" if self.read_only else "reader")
            self._read_conn = conn
        return self._read_conn

    def _reset_reader(self, wait_s: float = -1) -> None:
        """Close the reading connection; ``wait_s``: how long to wait for a read still using
        it (-1: as long as it takes), after which it is left to that read."""
        if not self._read_lock.acquire(timeout=wait_s):
            return  # (a read, or a turn, still waits on the database with it)
        try:
            conn, self._read_conn = self._read_conn, None
        finally:
            self._read_lock.release()
        if conn is not None:
            self._store.close_connection(conn)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._closed:
            raise LedgerError(f"the ledger {self.url} is closed")
        # (an id asked for as it was written: a lone surrogate was stored as ``?``)
        params = [safe_id(p) if p.__class__ is str else p for p in params]
        try:
            with self._read_lock, self._store.guard():
                return self._store.query(self._reader(), sql, params)
        except LedgerError:
            raise
        except Exception as exc:
            self._reset_reader()
            raise LedgerError(
                f"reading the ledger {self._store.describe()} failed: {_one_line(exc)}"
            ) from None

    def _missing_columns(self) -> frozenset[str]:
        """The later anchor columns this ledger lacks (asked again while some are missing: a
        writer may migrate it meanwhile)."""
        if self._missing is not None and not self._missing:
            return self._missing
        if self._closed:
            raise LedgerError(f"the ledger {self.url} is closed")
        try:
            with self._read_lock, self._store.guard():
                present = self._store.columns(self._reader(), "anchors")
        except Exception as exc:
            self._reset_reader()
            raise LedgerError(
                f"reading the ledger {self._store.describe()} failed: {_one_line(exc)}"
            ) from None
        self._missing = frozenset(_LATER_COLUMNS - present)
        return self._missing

    def _anchors(self, where: str, params: Sequence[Any], tail: str = "") -> list[Anchor]:
        missing = self._missing_columns()
        cols = (
            ", ".join(f"NULL AS {c}" if c in missing else c for c in ANCHOR_COLUMNS)
            if missing
            else _COLS
        )
        rows = self._query(f"SELECT {cols} FROM anchors WHERE {where} {tail}", params)
        anchors = [cast(Anchor, dict(zip(ANCHOR_COLUMNS, r, strict=True))) for r in rows]
        for anchor in anchors:
            anchor["status"] = Status(anchor["status"])
        return anchors

    def _session_filter(
        self,
        agent: str | None,
        tool: str | None,
        status: str | None,
        search: str | None,
        window: _Window = (None, None, False, False),
        *,
        who: _Who = (None, None),
    ) -> tuple[str, list[Any]]:
        since_ns, until_ns, errors, live = window
        user, tag = who
        terms: list[str] = []
        params: list[Any] = []
        sub = "s.session_id IN (SELECT session_id FROM anchors WHERE {})"
        if user is not None or tag is not None:
            missing = self._missing_columns()
            if user is not None:
                terms.append("1 = 0" if "user_id" in missing else sub.format("user_id = ?"))
                params.extend([] if "user_id" in missing else [user])
            if tag is not None and "tags" in missing:
                terms.append("1 = 0")
            elif tag is not None:
                find = self._store.contains
                terms.append(sub.format(f"({find('tags')} OR {find('tags')})"))
                params.extend(tag_patterns(tag))
        if agent is not None:
            terms.append(sub.format("agent_id = ?"))
            params.append(agent)
        if tool is not None:
            terms.append(sub.format("tool_name = ?"))
            params.append(tool)
        if status is not None:
            terms.append(sub.format("status = ?"))
            params.append(status)
        if errors:
            terms.append(sub.format("status = ?"))
            params.append(Status.ERROR.value)
        if live:
            terms.append(sub.format(f"status IN {LIVE_SQL}"))
        if since_ns is not None:  # active in the range: its calls overlap it
            terms.append("s.last_ns >= ?")
            params.append(int(since_ns))
        if until_ns is not None:
            terms.append("s.first_ns <= ?")
            params.append(int(until_ns))
        if search:
            like = self._store.like
            pattern = _like_pattern(search)
            terms.append(
                f"({like('s.session_id')} OR "
                + sub.format(f"{like('intent')} OR {like('outcome')} OR {like('label')}")
                + ")"
            )
            params.extend([pattern] * 4)
        return (" WHERE " + " AND ".join(terms) if terms else ""), params

    def sessions(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        agent: str | None = None,
        tool: str | None = None,
        status: str | None = None,
        search: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        errors: bool = False,
        live: bool = False,
        order: SessionOrder = "last_seen",
        descending: bool = True,
        user: str | None = None,
        tag: str | None = None,
    ) -> list[SessionInfo]:
        """Sessions with their counts, most recent activity first unless ``order`` says
        otherwise (sorted and paginated in the database, over every session that matches).

        Each filter keeps the sessions that have at least one call matching it (``agent``,
        ``tool``, ``status`` exactly; ``search``: a case-insensitive substring of a call's
        intent, outcome or label, or of the session id; ``errors``: a failed call; ``live``: a
        call not settled yet; ``user``: a call run for that user id; ``tag``: a call whose
        trace has that tag). ``since_ns``/``until_ns`` keep the sessions active in that range
        (their first call started before ``until_ns``, their last activity is after
        ``since_ns``). ``order`` is one of ``SESSION_ORDERS``: ``last_seen``, ``first_seen``,
        ``duration`` (first call to last activity), ``calls``, ``errors``, ``session`` (id);
        ties and unknown times come last, in the default order.
        """
        where, params = self._session_filter(
            agent, tool, status, search, (since_ns, until_ns, errors, live), who=(user, tag)
        )
        if order not in SESSION_ORDERS:
            raise ValueError(f"order must be one of {', '.join(SESSION_ORDERS)}, not {order!r}")
        join = ""
        if order == "errors":  # the failed calls of every session, counted once
            join = (
                " LEFT JOIN (SELECT session_id, count(*) AS errors FROM anchors "
                "WHERE status = 'error' GROUP BY session_id) c ON c.session_id = s.session_id"
            )
        key = _ORDER_SQL[order]
        direction = "DESC" if descending else "ASC"
        return self._session_infos(
            f"SELECT s.session_id, s.first_ns, s.last_ns, s.last_turn FROM sessions s{join}"
            f"{where} ORDER BY {key} {direction} NULLS LAST, s.last_ns DESC NULLS LAST, "
            "s.session_id LIMIT ? OFFSET ?",
            [*params, max(0, int(limit)), max(0, int(offset))],
        )

    def session(self, session_id: str) -> SessionInfo | None:
        """One session with its counts, or None when the ledger has never seen it."""
        found = self._session_infos(
            "SELECT session_id, first_ns, last_ns, last_turn FROM sessions WHERE session_id = ?",
            [session_id],
        )
        return found[0] if found else None

    def _session_infos(self, sql: str, params: Sequence[Any]) -> list[SessionInfo]:
        rows = self._query(sql, params)
        infos: dict[str, SessionInfo] = {}
        for session_id, first_ns, last_ns, last_turn in rows:
            infos[session_id] = SessionInfo(
                session_id=session_id, calls=0, errors=0, in_flight=0, agents=[], tools=[],
                users=[], tags=[], first_ns=first_ns, last_ns=last_ns,
                last_turn=last_turn or None, dropped=0,
            )  # fmt: skip
        if infos:
            marks = ", ".join("?" for _ in infos)
            stats = self._query(
                "SELECT session_id, agent_id, tool_name, count(*), "
                "sum(CASE WHEN status = 'error' THEN 1 ELSE 0 END), "
                f"sum(CASE WHEN status IN {LIVE_SQL} THEN 1 ELSE 0 END) "
                f"FROM anchors WHERE session_id IN ({marks}) "
                "GROUP BY session_id, agent_id, tool_name",
                list(infos),
            )
            for session_id, agent_id, tool_name, calls, errors, live in stats:
                info = infos[session_id]
                info["calls"] += int(calls)
                info["errors"] += int(errors or 0)
                info["in_flight"] += int(live or 0)
                if agent_id is not None and agent_id not in info["agents"]:
                    info["agents"].append(agent_id)
                if tool_name not in info["tools"]:
                    info["tools"].append(tool_name)
            missing = self._missing_columns()
            if not missing:  # (a few rows per session: its calls' distinct users and tags)
                for session_id, user_id, tags in self._query(
                    "SELECT DISTINCT session_id, user_id, tags FROM anchors "
                    f"WHERE session_id IN ({marks}) AND (user_id IS NOT NULL OR tags IS NOT NULL)",
                    list(infos),
                ):
                    info = infos[session_id]
                    if user_id is not None and user_id not in info["users"]:
                        info["users"].append(user_id)
                    info["tags"].extend(t for t in tag_list(tags) if t not in info["tags"])
            for info in infos.values():
                info["agents"].sort()
                info["tools"].sort()
                info["users"].sort()
                info["tags"].sort()
            if self._has_table("dropped"):
                for session_id, lost in self._query(
                    f"SELECT session_id, sum(count) FROM dropped WHERE session_id IN ({marks}) "
                    "AND source = 'processor' GROUP BY session_id",
                    list(infos),
                ):
                    infos[session_id]["dropped"] = int(lost or 0)
        return list(infos.values())

    def _has_table(self, name: str) -> bool:
        if self._closed:
            raise LedgerError(f"the ledger {self.url} is closed")
        try:
            with self._read_lock, self._store.guard():
                return self._store.has_table(self._reader(), name)
        except Exception as exc:
            self._reset_reader()
            raise LedgerError(
                f"reading the ledger {self._store.describe()} failed: {_one_line(exc)}"
            ) from None

    def dropped(self, session_id: str | None = None) -> list[DroppedInfo]:
        """What was lost before reaching the ledger, per session and source (``processor``:
        tool calls a span processor shed under load, their anchor missing or settled without
        outcome; ``ledger``: anchor writes dropped on a full queue), most counted first. Empty
        for a ledger made before this table existed."""
        if not self._has_table("dropped"):
            return []
        where, params = (
            ("WHERE session_id = ? ", [session_id]) if session_id is not None else ("", [])
        )
        rows = self._query(
            "SELECT session_id, source, count, first_ns, last_ns FROM dropped "
            f"{where}ORDER BY count DESC, session_id, source",
            params,
        )
        return [
            DroppedInfo(session_id=r[0], source=r[1], count=int(r[2]), first_ns=r[3], last_ns=r[4])
            for r in rows
        ]

    def count_sessions(
        self,
        *,
        agent: str | None = None,
        tool: str | None = None,
        status: str | None = None,
        search: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        errors: bool = False,
        live: bool = False,
        user: str | None = None,
        tag: str | None = None,
    ) -> int:
        """How many sessions ``sessions()`` would list with these filters (for pagination)."""
        where, params = self._session_filter(
            agent, tool, status, search, (since_ns, until_ns, errors, live), who=(user, tag)
        )
        rows = self._query(f"SELECT count(*) FROM sessions s{where}", params)
        return int(rows[0][0])

    def session_anchors(self, session_id: str) -> list[Anchor]:
        """Every call of the session, in ``seq`` order."""
        return self._anchors("session_id = ?", [session_id], "ORDER BY seq")

    def subagent_anchors(self, session_id: str) -> list[Anchor]:
        """The calls of subagents run under sessions of their own (``session(...)`` inside a
        call of this session): every call of another session whose ``parent_call_id`` chain
        leads to a call of this one, in (session, ``seq``) order. The story of this session
        nests them under the call that spawned them.

        Sessions active during this one are looked at (their ``last_ns`` from its first
        start on, their first start before its last write, or any while it has live calls):
        a subagent runs inside its call.
        """
        info = self.session(session_id)
        if info is None:
            return []
        children = self._anchors(
            "session_id IN (SELECT session_id FROM sessions WHERE last_ns >= ? AND first_ns <= ? "
            "AND session_id != ?) "
            "AND parent_call_id IN (SELECT tool_call_id FROM anchors WHERE session_id = ?)",
            [info["first_ns"] or 0, _until(info), session_id, session_id],
        )
        found: dict[str, Anchor] = {a["tool_call_id"]: a for a in children}
        for child_session in dict.fromkeys(a["session_id"] for a in children):
            rows = self.session_anchors(child_session)
            grew = True
            while grew:  # (the calls nested under the first ones, in any depth)
                grew = False
                for row in rows:
                    call_id = row["tool_call_id"]
                    if call_id not in found and row["parent_call_id"] in found:
                        found[call_id] = row
                        grew = True
        order = {s: i for i, s in enumerate(dict.fromkeys(a["session_id"] for a in children))}
        return sorted(found.values(), key=lambda a: (order[a["session_id"]], a["seq"]))

    def anchor(self, tool_call_id: str) -> Anchor | None:
        """One call by its anchor id (``tool_call_id``), or None (``by_provider_id`` finds
        calls by the provider's id)."""
        found = self._anchors("tool_call_id = ?", [tool_call_id])
        return found[0] if found else None

    def by_provider_id(
        self, provider_call_id: str, *, session_id: str | None = None
    ) -> list[Anchor]:
        """The calls the provider gave this id (several when it reuses ids: ``call_0`` in
        every response), newest first; ``session_id`` narrows them to one session."""
        where = "provider_call_id = ?"
        params: list[Any] = [provider_call_id]
        if session_id is not None:
            where += " AND session_id = ?"
            params.append(session_id)
        return self._anchors(where, params, "ORDER BY start_ns DESC, seq DESC")

    def search(self, text: str, *, limit: int = 100) -> list[Anchor]:
        """Calls whose intent, outcome or label contains ``text`` (case-insensitive), newest
        first. A scan: no text index (see the schema notes)."""
        if limit <= 0 or not text:
            return []
        like = self._store.like
        pattern = _like_pattern(text)
        return self._anchors(
            f"({like('intent')} OR {like('outcome')} OR {like('label')})",
            [pattern, pattern, pattern, limit],
            "ORDER BY updated_ns DESC LIMIT ?",
        )

    def in_flight(self, *, limit: int = 200, session_id: str | None = None) -> list[Anchor]:
        """Calls not settled yet (``streaming``, ``in_flight``, ``background``), oldest first."""
        where = f"status IN {LIVE_SQL}"
        params: list[Any] = []
        if session_id is not None:
            where += " AND session_id = ?"
            params.append(session_id)
        return self._anchors(where, [*params, max(0, limit)], "ORDER BY start_ns, seq LIMIT ?")

    def changed_since(
        self, updated_ns: int, *, session_id: str | None = None, limit: int = 1000
    ) -> list[Anchor]:
        """Calls written after ``updated_ns``, in write order (poll with the last one's
        ``updated_ns``; each write gets a distinct value)."""
        where = "updated_ns > ?"
        params: list[Any] = [int(updated_ns)]
        if session_id is not None:
            where += " AND session_id = ?"
            params.append(session_id)
        return self._anchors(where, [*params, max(0, limit)], "ORDER BY updated_ns LIMIT ?")

    def written_after(
        self, version: int, *, session_id: str | None = None, limit: int = 1000
    ) -> list[Anchor]:
        """Calls written after row version ``version``, in version order (poll with the last
        one's ``version``). Versions come from one counter in the database and follow commit
        order: unlike ``changed_since``, no write is missed whatever the writers' clocks."""
        where = "version > ?"
        params: list[Any] = [int(version)]
        if session_id is not None:
            where += " AND session_id = ?"
            params.append(session_id)
        return self._anchors(where, [*params, max(0, limit)], "ORDER BY version LIMIT ?")

    def last_version(self, session_id: str | None = None) -> int:
        """The newest row version written (0: none): of every call, or of one session's.

        Without ``session_id`` this reads one end of the ``version`` index, so a reader can poll
        it cheaply and look further only when it moved (the viewer follows a session this way).
        """
        if session_id is None:
            rows = self._query("SELECT max(version) FROM anchors")
        else:
            rows = self._query(
                "SELECT max(version) FROM anchors WHERE session_id = ?", [session_id]
            )
        return int(rows[0][0] or 0) if rows else 0

    def session_counter(self, session_id: str) -> int:
        """The session's counter (``sessions.next_seq``; 0: no such session): it moves at every
        call first written, every settle and every activity label set, so a reader that polls
        it (one primary-key row) notices a label set after the session's last call was written,
        which the row versions do not show (labels are not anchors)."""
        rows = self._query("SELECT next_seq FROM sessions WHERE session_id = ?", [session_id])
        return int(rows[0][0] or 0) if rows else 0

    def checkpoints(self, session_id: str) -> list[Anchor]:
        """The settled calls of a session, in ``seq`` order."""
        return self._anchors(
            f"session_id = ? AND status IN {SETTLED_SQL}", [session_id], "ORDER BY seq"
        )

    def blocks(self, session_id: str) -> list[BlockInfo]:
        """The blocks (sibling calls of one model step) of a session, in ``seq`` order.

        Calls without a ``batch_id`` belong to no block. A block's ``activity_label`` is the
        label set with ``set_activity`` (None until then).
        """
        found: dict[str, BlockInfo] = {}
        for batch_id, turn, seq in self._query(
            "SELECT batch_id, min(turn), min(seq) FROM anchors "
            "WHERE session_id = ? AND batch_id IS NOT NULL GROUP BY batch_id",
            [session_id],
        ):
            found[batch_id] = BlockInfo(
                session_id=session_id, batch_id=batch_id, turn=turn, activity_label=None, seq=seq
            )
        for batch_id, turn, label, seq in self._query(
            "SELECT batch_id, turn, activity_label, seq FROM blocks WHERE session_id = ?",
            [session_id],
        ):
            block = found.get(batch_id)
            if block is None:
                found[batch_id] = BlockInfo(
                    session_id=session_id, batch_id=batch_id, turn=turn, activity_label=label,
                    seq=seq,
                )  # fmt: skip
            else:
                block["activity_label"] = label
                if turn is not None:
                    block["turn"] = turn
        return sorted(found.values(), key=lambda b: (b["seq"], b["batch_id"]))

    def summary(self, session_id: str, turn: int | None = None, max_chars: int = 4000) -> str:
        """A compact plain-text timeline of the session's settled calls (for a summarizer
        prompt when an agent's history is compacted), at most ``max_chars`` long: each line
        carries the intent and the outcome when they differ, the status and the error; an
        activity label heads its block. The most recent calls are kept when it must be cut."""
        calls = self.checkpoints(session_id)
        if turn is not None:
            calls = [c for c in calls if c["turn"] == turn]
        activity = {
            b["batch_id"]: b["activity_label"]
            for b in self.blocks(session_id)
            if b["activity_label"]
        }
        return render_summary(session_id, calls, turn=turn, max_chars=max_chars, activity=activity)

    def agents(self) -> list[str]:
        """Every agent id seen, sorted."""
        rows = self._query(
            "SELECT DISTINCT agent_id FROM anchors WHERE agent_id IS NOT NULL ORDER BY agent_id"
        )
        return [r[0] for r in rows]

    def tools(self) -> list[str]:
        """Every tool name seen, sorted."""
        return [r[0] for r in self._query("SELECT DISTINCT tool_name FROM anchors ORDER BY 1")]

    def users(self) -> list[str]:
        """Every user id seen, sorted ([] for a ledger not migrated yet)."""
        if "user_id" in self._missing_columns():
            return []
        return [
            r[0]
            for r in self._query(
                "SELECT DISTINCT user_id FROM anchors WHERE user_id IS NOT NULL ORDER BY 1"
            )
        ]

    def tags(self) -> list[str]:
        """Every tag seen, sorted ([] for a ledger not migrated yet)."""
        if "tags" in self._missing_columns():
            return []
        found: set[str] = set()
        for (text,) in self._query("SELECT DISTINCT tags FROM anchors WHERE tags IS NOT NULL"):
            found.update(tag_list(text))
        return sorted(found)


def _until(info: SessionInfo) -> int:
    """The latest a subagent of this session can have started (live calls: any time)."""
    last = info["last_ns"]
    return last if last is not None and not info["in_flight"] else 2**62


@atexit.register
def _close_open_ledgers() -> None:
    for ledger in list(_OPEN):
        try:
            ledger.close(timeout_s=5.0)
        except Exception:  # never fail interpreter exit
            logger.debug("closing a ledger at exit failed", exc_info=True)
