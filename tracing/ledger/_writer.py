"""The ledger's one writer thread, and the thread that plans its next batch meanwhile.

The app's threads only ever ``put`` onto the queue (``Ledger.record``). The preparing thread
takes everything queued so far (up to ``max_batch_size``) and plans it (see ``_plan``); the
writer thread, the only one that touches the database, applies each batch as one transaction,
and on failure retries with backoff. A batch that still fails after ``retry_attempts`` is
dropped and counted; the next batch tries again, so writes resume by themselves when the
database comes back. Errors that are the data's fault (not the database's) are isolated by
bisection so that one bad write never takes its batch with it.

Why two threads: Python's sqlite3 and psycopg release the GIL while the database works, so
batch N+1 is planned and numbered (pure Python) while batch N is written. The preparer plans
N+1 once the writer has numbered N, before N's rows are written: on the rows N leaves (for the
calls N+1 writes again), from the session counters N leaves, with write times (``updated_ns``)
above N's. Inside N+1's transaction the writer checks each assumption: the rows'
``(rowid, updated_ns)``, the counters, the write times above the last it wrote. What does not
hold (another writer came in between, batch N was retried), or a batch that writes again a
call older than batch N, the writer plans or numbers itself from the database, as it would
without the preparer: planning ahead only saves time, it never decides a result. When the
writer has nothing else to do, the preparer hands a batch over unplanned rather than make it
wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue
from typing import Any, cast

from tracing.diagnostics import ErrorLog
from tracing.ledger._config import LedgerOptions
from tracing.ledger._plan import (
    RID,
    ROW,
    Activity,
    BatchPlan,
    Dropped,
    TurnFloor,
    as_stored,
    assign,
    clean_item,
    clean_text,
    monotonic_ns,
    plan_batch,
    span_identity,
)
from tracing.ledger._store import Store
from tracing.status import Status, frame_label

logger = logging.getLogger("tracing.ledger")

_YIELD_EVERY = 256
_RECENT_IDS = 50_000
"""How many recently written call ids the writer remembers (about 5 MB at most)."""

Item = Mapping[str, Any] | Activity | TurnFloor | Dropped


class _FileLostError(Exception):
    """The SQLite file was deleted or replaced while a batch was written to it."""


@dataclass(frozen=True, slots=True)
class Flush:
    """Queue marker: set ``done`` once everything queued before it is written or dropped."""

    done: threading.Event


@dataclass(frozen=True, slots=True)
class Stop:
    """Queue marker: write what came before, then end the thread."""


@dataclass(slots=True)
class Prepared:
    """One batch as the preparing thread hands it to the writer."""

    items: Sequence[Item]
    number: int
    """Batches are numbered 1, 2, ... in queue order."""
    ids: list[str] = field(default_factory=lambda: [])
    """Call ids of the batch this writer wrote lately: looked up (the others are taken as new)."""
    plan: BatchPlan | None = None
    """The batch planned ahead (None: the writer plans it)."""
    expect: dict[str, int] = field(default_factory=lambda: {})
    """What ``plan`` assumed stored: ``updated_ns`` of each call written again (checked)."""
    bases: dict[str, int] = field(default_factory=lambda: {})
    """The first number of each session's range ``plan`` was numbered with (checked)."""
    first_stamp: int = 0
    """The first ``updated_ns`` ``plan`` handed out (above every stamp written before)."""
    first_version: int = 0
    """The first row version ``plan`` was numbered with (checked)."""


def _yielding(items: Sequence[Item]) -> Iterator[Item]:
    """``items``, letting other threads have the GIL every ``_YIELD_EVERY`` of them.

    The writer gets the GIL back after each database step only when this thread lets go (or
    after the interpreter's 5 ms switch interval): planning lets go every few hundred writes,
    so the writer, which is what the throughput waits for, never waits long.
    """
    sleep = time.sleep
    for start in range(0, len(items), _YIELD_EVERY):
        yield from items[start : start + _YIELD_EVERY]
        sleep(0)


class Writer:
    """Owns the write connection; every database write of a ``Ledger`` happens here."""

    def __init__(
        self,
        store: Store,
        options: LedgerOptions,
        *,
        reap: bool,
        take_dropped: Callable[[], list[Dropped]] | None = None,
        record_dropped: Callable[[str, int, str], None] | None = None,
    ) -> None:
        self.store = store
        self.options = options
        self._take_dropped = take_dropped
        """The counts of lost calls gathered since the last batch (``Ledger.record_dropped``):
        written with the next batch."""
        self._record_dropped = record_dropped
        """``Ledger.record_dropped``: writes of a batch dropped after the database kept failing
        are counted per session there, and written once it is back (readers say so)."""
        self._uncounted = 0
        """Items of the batch just written that are counts, not writes (not in ``written``)."""
        self.queue: SimpleQueue[Item | Flush | Stop] = SimpleQueue()
        self.init_error: BaseException | None = None
        """Why the first try at connecting failed (None: it worked)."""
        self.first_attempt = threading.Event()
        """Set after the first try at connecting (whatever its result): ``open_ledger`` waits
        for it, not for a database that may stay away."""
        self.abort = threading.Event()
        """Set by ``close`` when waiting is over: drop what is left instead of retrying."""
        self.wake = threading.Event()
        """Set when the writer should not wait for its interval (a full batch, flush, close)."""
        self.taken = 0
        self.written = 0
        self.dropped = 0
        self.retries = 0
        self.errors = 0
        self.invalid = 0
        self.reclaimed = 0
        self._reclaim_pending = False
        """Times the disk was full and the WAL was checkpointed and truncated (SQLite)."""
        self.reaped = 0
        self.stalls = 0
        """Database calls cut by the watchdog (a connection that went silent: half-open)."""
        self._busy_since: float | None = None
        """``time.monotonic()`` when the current batch's database work began (the watchdog's)."""
        self.files_lost = 0
        self.disk_full = 0
        """Times the SQLite file was found deleted or replaced under the writer."""
        self.permanent: str | None = None
        """While set: the last try at connecting failed for a reason retrying cannot fix."""
        self._failing_since: float | None = None
        """``time.monotonic()`` of the first failure since the last batch written."""
        self.ahead = 0
        """Batches written as the preparer planned and numbered them."""
        self.replanned = 0
        """Batches planned ahead on stored rows that had changed (planned again by the writer)."""
        self.renumbered = 0
        """Batches planned ahead whose numbers did not hold (another writer took some)."""
        self.recent_errors: deque[str] = deque(maxlen=20)
        """The latest failures, one line each: the database's and our own bugs."""
        self.internal = ErrorLog("ledger", logger)
        """Our bugs (``tracing.diagnostics``), also counted in ``stats()['internal_errors']``."""
        self._reap_cutoff_ns: int | None = None
        reap_after = options.reap_after_seconds
        if reap and reap_after is not None and reap_after is not False:
            self._reap_cutoff_ns = time.time_ns() - int(float(reap_after) * 1e9)
        self._conn: Any = None
        self._stamp_lock = threading.Lock()
        self._stamp = 0
        """The last ``updated_ns`` handed out (by either thread; see ``_stamps``)."""
        self._written_stamp = 0
        """The last ``updated_ns`` the writer wrote with (a batch numbered ahead starts above)."""
        self._counters: dict[str, int] = {}
        """Each session's ``next_seq`` after the last batch the writer numbered (the preparer
        numbers the next batch from it; the writer checks it against the database)."""
        self._next_version = 0
        """``ledger_clock.next_version`` after the last batch the writer numbered (0: not
        known), likewise."""
        self._respanned: dict[str, None] = {}
        """Ids lately taken by another call's span (``_plan``): their writes also look up the
        span identity they move to (insertion-ordered, bounded)."""
        self._failing = False
        self._warned: set[str] = set()
        self._bisect_budget = 0
        self._recent: dict[str, None] = {}
        """Ids handed to the writer lately (insertion-ordered, bounded; the preparer's): looked
        up when seen again."""
        self._last: dict[str, dict[str, Any]] = {}
        """The rows of the last batch written, as written (see ``_stored``)."""
        self._handoff: SimpleQueue[Prepared | Flush | Stop] = SimpleQueue()
        """Preparer → writer, in queue order: batches and the markers between them."""
        self._numbered = threading.Condition()
        self._numbered_last = 0
        """The last batch the writer numbered (or gave up on)."""
        self._numbered_plan: BatchPlan | None = None
        """Its plan, once numbered (None when it failed first: nothing to predict from)."""
        self._number = 0
        """The last batch number the preparer handed out."""
        self._applied = 0
        """The last batch number the writer is done with."""
        self._dead = False
        """Set when the writer thread ended by a bug: the preparer drops and counts."""
        self._drop_lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run, name="intentrace-ledger-writer", daemon=True
        )
        self.preparer = threading.Thread(
            target=self._prepare_run, name="intentrace-ledger-preparer", daemon=True
        )

    @property
    def threads(self) -> tuple[threading.Thread, threading.Thread]:
        """The writer thread and the preparing thread."""
        return self.thread, self.preparer

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.preparer.start()
        self.thread.start()
        if self.store.stall_limit_seconds() is not None:
            threading.Thread(
                target=self._watch, name="intentrace-ledger-watchdog", daemon=True
            ).start()

    def _watch(self) -> None:
        """Cut the writer's connection when one batch's database work outlasts the store's
        stall limit: a peer that keeps the socket open and answers nothing (half-open, a
        black hole that acknowledges) would hold the writer forever; cut, it errors and the
        batch is retried like any transient failure."""
        limit = self.store.stall_limit_seconds()
        assert limit is not None
        while self.thread.is_alive():
            if self.abort.wait(min(0.25, limit / 4)):
                return
            since, conn = self._busy_since, self._conn
            if since is not None and conn is not None and time.monotonic() - since > limit:
                self._busy_since = None
                self.stalls += 1
                logger.warning(
                    "intentrace ledger: no answer from %s for %.1f s: connection cut, retrying",
                    self.store.describe(),
                    limit,
                )
                self.store.interrupt(conn)

    def _run(self) -> None:
        current: Prepared | None = None
        try:
            self._first_attempt()
            handoff = self._handoff
            while True:
                item = handoff.get()
                cls = item.__class__
                if cls is Prepared:
                    current = cast(Prepared, item)
                    self._apply_safely(current)
                    current = None
                elif cls is Flush:
                    cast(Flush, item).done.set()
                else:
                    break
        except BaseException as exc:  # a bug: keep the app alive, make it visible
            self._bug("writer thread", exc)
            if current is not None:
                self._drop(len(current.items), "the ledger's writer failed")
            self._dead = True
            with self._numbered:
                self._numbered.notify_all()
            self._drain_dropping()
        finally:
            self.first_attempt.set()
            self._drop_conn(force=True)

    def _first_attempt(self) -> None:
        """Connect, migrate and reap once at open; when that fails, each batch tries again."""
        try:
            self._ensure_conn()
        except Exception as exc:
            self.init_error = exc
            self.errors += 1
            self._error("open", exc)
            self._failing_since = time.monotonic()
            if self.store.is_permanent(exc):
                self.permanent = self.recent_errors[-1]
            self._drop_conn()
        finally:
            self.first_attempt.set()

    def _drain_dropping(self) -> None:
        """The writer thread ended without a database: count what is queued as dropped."""
        with self._drop_lock:
            queues: tuple[SimpleQueue[Any], ...] = (self._handoff, self.queue)
            for queue in queues:
                while True:
                    try:
                        item = queue.get_nowait()
                    except Empty:
                        break
                    if isinstance(item, Flush):
                        item.done.set()
                    elif isinstance(item, Prepared):  # (taken already)
                        self.dropped += len(item.items)
                    elif not isinstance(item, Stop):
                        self.taken += 1
                        self.dropped += 1

    # --- preparing ---------------------------------------------------------------------------
    def _prepare_run(self) -> None:
        while True:
            try:
                if not self._prepare_step():
                    return
            except Exception as exc:  # a bug: report it, go on (the writer plans what it gets)
                self._bug("preparing thread", exc)

    def _prepare_step(self) -> bool:
        """Take one batch off the queue, plan it, hand it over; False once a Stop was seen.

        Nobody is woken by every write (that would cost the app a thread switch per call):
        this thread sleeps ``flush_interval_millis``, or until the queue holds a full batch, or
        until ``flush``/``close`` wake it.
        """
        queue = self.queue
        if queue.empty():
            self.wake.wait(self.options.flush_interval_millis / 1000)
            self.wake.clear()
        limit = self.options.max_batch_size
        get = queue.get_nowait
        segment: list[Item] = []
        append = segment.append
        count = 0
        while count < limit:
            try:
                item = get()
            except Empty:
                break
            cls = item.__class__  # (one class test per write: markers are rare)
            if cls is Flush or cls is Stop:
                self._hand(segment)
                segment = []
                append = segment.append
                self._handoff.put(item)  # pyright: ignore[reportArgumentType]
                if cls is Stop:
                    return False
            else:
                append(item)  # pyright: ignore[reportArgumentType]
                count += 1
        self._hand(segment)
        if self._dead:
            self._drain_dropping()
        return True

    def _hand(self, items: list[Item]) -> None:
        self.taken += len(items)
        if self._take_dropped is not None:
            items.extend(self._take_dropped())  # (counts of lost calls ride with each batch)
        if not items:
            return
        self._number += 1
        prepared = Prepared(items, self._number)
        try:
            self._plan_ahead(prepared)
        except Exception as exc:  # a bug: the writer plans the batch itself
            prepared.plan = None
            self._bug("planning ahead", exc)
        self._handoff.put(prepared)

    def _plan_ahead(self, prepared: Prepared) -> None:
        """Find the ids to look up and, where the stored state is known, plan the batch."""
        items = prepared.items
        recent = self._recent
        plain: Sequence[Any] = items
        known = [
            cid
            for it in plain
            if it.__class__ is dict and (cid := it.get("tool_call_id")).__class__ is str
        ]
        ids = prepared.ids = list(dict.fromkeys([cid for cid in known if cid in recent]))
        recent.update(dict.fromkeys(known))
        respanned = self._respanned
        if respanned and any(cid in respanned for cid in ids):
            return  # (rare: a provider id reused in one session and turn) the writer plans it
        if len(recent) > 2 * _RECENT_IDS:
            self._recent = dict.fromkeys(list(recent)[-_RECENT_IDS:])
        if not self.options.plan_ahead or self._applied >= prepared.number - 1:
            return  # the writer has nothing else to do: it plans this batch at once, itself
        # Planned against the batch before, once the writer numbered it: its rows are then
        # what it writes, its sessions' counters what it leaves. A call written further back
        # is left to the writer.
        before = self._wait_numbered(prepared.number - 1)
        if before is None:
            return
        stored: dict[str, Any] = {}
        calls = before.calls
        expect = prepared.expect
        for cid in ids:
            call = calls.get(cid)
            if call is None:
                return
            row = call[ROW]
            stored[cid] = (None, as_stored(row))
            expect[cid] = row["updated_ns"]
        plan = plan_batch(
            _yielding(items),
            stored,
            now_ns=time.time_ns(),
            strip_nul=self.store.strip_nul,
            careful=False,
        )
        counters = self._counters
        bases = prepared.bases = {s: counters.get(s, 1) for s in plan.sessions}
        prepared.first_stamp = self._stamps(len(plan.calls) + 1)
        prepared.first_version = self._next_version
        assign(plan, bases, updated_ns=prepared.first_stamp, version=prepared.first_version)
        prepared.plan = plan

    def _wait_numbered(self, number: int) -> BatchPlan | None:
        """The plan of batch ``number`` once the writer numbered it (None: not known)."""
        with self._numbered:
            while self._numbered_last < number:
                if self._dead or self.abort.is_set():
                    return None
                self._numbered.wait(0.1)
            return self._numbered_plan if self._numbered_last == number else None

    def _numbered_now(
        self,
        number: int,
        plan: BatchPlan | None,
        bases: Mapping[str, int] | None = None,
        next_version: int = 0,
    ) -> None:
        with self._numbered:
            if number > self._numbered_last:
                self._numbered_last = number
                self._numbered_plan = plan
                counters = self._counters
                self._next_version = next_version
                if plan is None or bases is None:
                    counters.clear()  # (what happened is not known: number from the database)
                else:
                    if len(counters) > _RECENT_IDS:
                        counters.clear()
                    for session, delta in plan.sessions.items():
                        counters[session] = bases[session] + delta.slots
                self._numbered.notify_all()

    def _stamps(self, n: int) -> int:
        """The first of ``n`` fresh ``updated_ns`` values, above every value handed out before
        (by either thread)."""
        with self._stamp_lock:
            start = monotonic_ns(self._stamp)
            self._stamp = start + n - 1
            return start

    # --- applying ----------------------------------------------------------------------------
    def _apply_safely(self, prepared: Prepared) -> None:
        self._bisect_budget = 64
        try:
            self._apply_with_retry(prepared.items, prepared=prepared)
        finally:
            self._numbered_now(prepared.number, None)  # (no-op when numbered already)
            self._applied = prepared.number

    def _apply_with_retry(
        self, items: Sequence[Item], *, careful: bool = False, prepared: Prepared | None = None
    ) -> None:
        """Apply ``items``; a transient failure is retried with backoff, a batch dropped only
        once it failed ``retry_attempts`` times and the ledger has been failing for
        ``retry_window_seconds``. A permanent one (``Store.is_permanent``) drops it at once."""
        delay = self.options.retry_backoff_millis / 1000
        attempt = 0
        while True:
            invalid = 0
            failure: Exception | None = None
            transient = True
            permanent = False
            try:
                self._check_file()
                self._ensure_conn()
                if self._reclaim_pending:
                    self._reclaim()  # before the write: freed space would go to the WAL
            except Exception as exc:  # cannot connect: the database's fault (or the config's)
                failure = exc
                permanent = self.store.is_permanent(exc)
            else:
                try:
                    self._busy_since = time.monotonic()
                    try:
                        invalid = self._apply(items, careful=careful, prepared=prepared)
                    finally:
                        self._busy_since = None
                    lost = self.store.check_file()
                    if lost is not None:
                        raise _FileLostError(lost)  # (the batch went to an unlinked file)
                except Exception as exc:
                    failure = exc
                    transient = isinstance(exc, _FileLostError) or self.store.is_transient(exc)
            if failure is not None:
                exc = failure
                if not transient and not careful:
                    careful = True  # the hot path skipped text coercion: replay with it
                    continue
                self.errors += 1
                if not transient:
                    self._error("data", exc)
                    self._bisect(items)
                    return
                if isinstance(exc, _FileLostError):
                    self._file_lost(str(exc))
                    careful = True
                else:
                    self._error("write", exc)
                    if self.store.is_full(exc):
                        self.disk_full += 1
                        if self.store.reclaims_space:
                            self._reclaim_pending = True
                            self._reclaim()
                self._drop_conn()
                if self._failing_since is None:
                    self._failing_since = time.monotonic()
                if permanent:
                    self.permanent = self.recent_errors[-1]
                    self._drop(len(items), "the database refused the connection (permanent)")
                    self._on_record(items)
                    return
                failing_s = time.monotonic() - self._failing_since
                if (
                    attempt >= self.options.retry_attempts
                    and failing_s >= self.options.retry_window_seconds
                ) or self.abort.is_set():
                    self._drop(len(items), "the database kept failing")
                    self._on_record(items)
                    return
                attempt += 1
                self.retries += 1
                if self.abort.wait(delay):
                    self._drop(len(items), "the ledger was closed")
                    return
                delay = min(delay * 2, self.options.max_retry_backoff_millis / 1000)
                continue
            self.written += len(items) - invalid - self._uncounted
            self.permanent = None
            self._failing_since = None
            if invalid:
                self.invalid += invalid
                self._drop(invalid, "invalid writes (need tool_call_id, tool_name, a status)")
            if self._failing:
                self._failing = False
                logger.info("intentrace ledger: writes to %s resumed", self.store.describe())
            return

    @property
    def failing(self) -> bool:
        """Whether the last try at writing (or connecting) failed."""
        return self._failing_since is not None or self.permanent is not None

    def _reclaim(self) -> None:
        """A write failed for lack of space: checkpoint SQLite's WAL into the database and
        truncate it (what a full volume needs to recover once space is freed). Tried before
        every batch until it succeeds: a write that went first would append to the WAL and
        fill the freed space again, leaving the checkpoint none to grow the database into."""
        if self._conn is None:
            return
        try:
            with self.store.guard():
                self.store.reclaim(self._conn)
        except Exception as exc:  # (still full: tried again before the next batch)
            logger.debug("intentrace ledger: reclaiming space failed: %s", exc)
            return
        self._reclaim_pending = False
        self.reclaimed += 1
        logger.info("intentrace ledger: the disk was full: WAL checkpointed and truncated")

    def _check_file(self) -> None:
        """Before a batch: a SQLite file deleted or replaced since the writer opened it is
        logged, counted (``stats()['files_lost']``) and opened anew (created again)."""
        if self._conn is None:
            return
        lost = self.store.check_file()
        if lost is not None:
            self._file_lost(lost)

    def _file_lost(self, why: str) -> None:
        self.files_lost += 1
        self.recent_errors.append(f"file: {why}")
        logger.error(
            "intentrace ledger: %s: what it held is gone; writing to a new file at the same "
            "path (counted in stats()['files_lost'])",
            why,
        )
        self._drop_conn(force=True)
        self._last = {}
        with self._numbered:
            self._counters.clear()
            self._next_version = 0

    def _bisect(self, items: Sequence[Item]) -> None:
        if len(items) == 1 or self._bisect_budget <= 0:
            self._drop(len(items), "a write the database refused")
            return
        self._bisect_budget -= 1
        mid = len(items) // 2
        self._apply_with_retry(items[:mid], careful=True)
        self._apply_with_retry(items[mid:], careful=True)

    def _apply(
        self,
        items: Sequence[Item],
        *,
        careful: bool = True,
        prepared: Prepared | None = None,
        reaping: bool = False,
    ) -> int:
        """One transaction for the batch; returns the number of invalid writes skipped.

        The hot path (``careful=False``, a batch from the preparer): writes are plain dicts,
        and only ids written lately are looked up; any other id is taken as new. If it was not
        (a replay after a restart, another process), its INSERT fails and the batch is replayed
        carefully, with every id looked up.
        """
        store, conn = self.store, self._conn
        if careful or prepared is None:
            careful = True
            strip_nul = store.strip_nul
            items = cast("list[Item]", [clean_item(it, strip_nul=strip_nul) for it in items])
            found: set[Any] = set()
            for it in items:
                if isinstance(it, Mapping):
                    found.add(it.get("tool_call_id"))
                    found.add(span_identity(it))  # where a reused provider id moves to
            ids: list[str] = [cid for cid in found if cid.__class__ is str]
        else:
            ids = prepared.ids
            respanned = self._respanned
            if respanned:
                moved = [
                    span_identity(it)
                    for it in items
                    if isinstance(it, Mapping) and it.get("tool_call_id") in respanned
                ]
                ids = [*ids, *(cid for cid in moved if cid is not None)]
        lock = store.guard()
        with lock, store.transaction(conn):
            ahead = self._planned_ahead(conn, prepared) if not careful else None
            if ahead is None:
                stored = self._stored(conn, ids, careful=careful) if ids else {}
                plan = plan_batch(
                    items,
                    stored,
                    now_ns=time.time_ns(),
                    strip_nul=store.strip_nul,
                    careful=careful,
                    reaping=reaping,
                )
            else:
                plan = ahead
            bases = store.allocate(conn, plan.sessions)
            reserved = len(plan.calls)
            first_version = store.versions(conn, reserved) if reserved else self._next_version
            if (
                prepared is not None
                and ahead is not None
                and bases == prepared.bases
                and first_version == prepared.first_version
                and prepared.first_stamp > self._written_stamp
            ):
                self._written_stamp = prepared.first_stamp + len(plan.calls)
                self.ahead += 1
            else:
                if ahead is not None:
                    self.renumbered += 1
                # Numbered here (or ahead, from counters or stamps that did not hold).
                plan.inserts.clear()
                plan.updates.clear()
                plan.blocks.clear()
                first = self._stamps(len(plan.calls) + 1)
                self._written_stamp = (
                    assign(plan, bases, updated_ns=first, version=first_version) - 1
                )
            if prepared is not None and not careful:
                # The rows are final: the preparer may plan the next batch against them while
                # this one is written (the GIL is free while the database works).
                self._numbered_now(prepared.number, plan, bases, first_version + reserved)
            store.insert(conn, plan.inserts)
            store.update(conn, plan.updates)
            if plan.blocks:
                blocks = [
                    (s, b, t, clean_text(label, column="label", strip_nul=store.strip_nul) or "", q)
                    for s, b, t, label, q in plan.blocks
                ]
                store.upsert_blocks(conn, blocks)
            if plan.dropped:
                store.add_dropped(
                    conn,
                    [
                        (d.session_id, d.source, d.count, d.first_ns, d.last_ns)
                        for d in plan.dropped
                    ],
                )
        self._last = {cid: call[ROW] for cid, call in plan.calls.items()}
        self._uncounted = len(plan.dropped)
        if plan.respanned:
            respanned = self._respanned
            respanned.update(dict.fromkeys(plan.respanned))
            if len(respanned) > _RECENT_IDS:
                self._respanned = dict.fromkeys(list(respanned)[-_RECENT_IDS // 2 :])
        return plan.invalid

    def _planned_ahead(self, conn: Any, prepared: Prepared | None) -> BatchPlan | None:
        """The preparer's plan when every row it assumed stored is stored as it assumed
        (inside the write transaction); None: plan the batch here. Used once: a retry plans
        again."""
        if prepared is None or prepared.plan is None:
            return None
        plan, prepared.plan = prepared.plan, None
        expect = prepared.expect
        if expect:
            stamps = self.store.stamps(conn, list(expect))
            calls = plan.calls
            for cid, stamp in expect.items():
                found = stamps.get(cid)
                if found is None or found[1] != stamp:
                    self.replanned += 1
                    return None
                calls[cid][RID] = found[0]
            for update in plan.updates:  # (only the calls it assumed stored are updated)
                update.rid = stamps[update.tool_call_id][0]
        return plan

    def _stored(self, conn: Any, ids: list[str], *, careful: bool) -> dict[str, Any]:
        """Stored state of ``ids`` (inside the write transaction).

        A call this writer wrote in its last batch is usually written again in the next one
        (settled, a moment after it started). Its row is still in memory, so only its stamp is
        read back (one statement step, where loading rows takes one per row, and each step
        hands the GIL to the app's threads and waits to get it back); a row whose stamp
        changed (another writer came in between) is loaded like any other.
        """
        store, last = self.store, self._last
        stored: dict[str, Any] = {}
        if last and not careful:
            mine = [cid for cid in ids if cid in last]
            if mine:
                stamps = store.stamps(conn, mine)
                for cid in mine:
                    row = last[cid]
                    found = stamps.get(cid)
                    if found is not None and found[1] == row["updated_ns"]:
                        stored[cid] = (found[0], as_stored(row))
        rest = [cid for cid in ids if cid not in stored] if stored else ids
        if rest:
            stored.update(store.lookup(conn, rest))
        return stored

    def _reap_live(self, cutoff_ns: int) -> None:
        """Settle live anchors not written since ``cutoff_ns`` as ``abandoned``."""
        lock = self.store.guard()
        while True:
            with lock:
                rows = self.store.live_before(self._conn, cutoff_ns, 1000)
            if not rows:
                return
            writes = [
                {
                    "tool_call_id": r["tool_call_id"],
                    "tool_name": r["tool_name"],
                    "status": Status.ABANDONED,
                    "label": frame_label(
                        tool_name=r["tool_name"],
                        status=Status.ABANDONED,
                        intent=r["intent"],
                        outcome=r["outcome"],
                    ),
                }
                for r in rows
            ]
            self._apply(writes, reaping=True)
            self.reaped += len(writes)
            logger.info("intentrace ledger: settled %d stale live calls as abandoned", len(writes))

    # --- connection --------------------------------------------------------------------------
    def _ensure_conn(self) -> None:
        """Connect and migrate if needed; reap once, on the first connection that works."""
        if self._conn is None:
            conn = self.store.connect(role="writer")
            try:
                with self.store.guard():
                    self.store.migrate(conn)
            except BaseException:
                self.store.close_connection(conn)
                raise
            self._conn = conn
        if self._reap_cutoff_ns is not None:
            self._reap_live(self._reap_cutoff_ns)
            self._reap_cutoff_ns = None

    def _drop_conn(self, *, force: bool = False) -> None:
        if self._conn is None:
            return
        if self.store.shared and not force:
            return  # an in-memory database lives in its one connection
        self.store.close_connection(self._conn)
        self._conn = None

    # --- accounting --------------------------------------------------------------------------
    def _drop(self, n: int, why: str) -> None:
        self.dropped += n
        key = f"drop:{why}"
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(
                "intentrace ledger: dropped %d write(s): %s (counted in stats())", n, why
            )

    def _on_record(self, items: Sequence[Item]) -> None:
        """Put the writes of a dropped batch on record, per session (source ``ledger``), and
        carry the counts it held over to a later batch: the loss stays visible to readers."""
        record = self._record_dropped
        if record is None:
            return
        sessions: dict[str, int] = {}
        for item in items:
            if isinstance(item, Dropped):
                record(item.session_id, item.count, item.source)
            elif isinstance(item, Mapping):
                session = item.get("session_id")
                key = session if isinstance(session, str) else ""
                sessions[key] = sessions.get(key, 0) + 1
        for session, n in sessions.items():
            record(session, n, "ledger")

    def _bug(self, where: str, exc: BaseException) -> None:
        """A bug of ours in one of the ledger's threads: reported, and shown in
        ``recent_errors()`` beside the database's failures."""
        self.internal.report(where, exc, level=logging.ERROR)
        self.recent_errors.append(f"{where}: {type(exc).__name__}: {exc}")

    def _error(self, kind: str, exc: BaseException, *, level: int = logging.WARNING) -> None:
        text = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        )
        self.recent_errors.append(f"{kind}: {text}")
        if kind in ("write", "open"):
            self._failing = True
        key = f"{kind}:{type(exc).__name__}"
        if key in self._warned:
            logger.debug("intentrace ledger %s error: %s", kind, text)
            return
        self._warned.add(key)
        retried = kind != "data" and not self.store.is_permanent(exc)
        logger.log(
            level,
            "intentrace ledger %s error on %s: %s (%s)",
            kind,
            self.store.describe(),
            text,
            "retrying with backoff" if retried else "not retried",
        )
