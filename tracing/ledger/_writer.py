"""The ledger's one writer thread: drains a bounded queue, applies coalesced batches, retries.

The app's threads only ever ``put`` onto the queue (``Ledger.record``). This thread takes
everything queued so far (up to ``max_batch_size``), applies it as one transaction (see
``_plan``), and on failure retries with backoff. A batch that still fails after
``retry_attempts`` is dropped and counted; the next batch tries again, so writes resume by
themselves when the database comes back. Errors that are the data's fault (not the
database's) are isolated by bisection so that one bad write never takes its batch with it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, cast

from tracing._status import ABANDONED, frame_label
from tracing.ledger._config import LedgerOptions
from tracing.ledger._plan import (
    Activity,
    TurnFloor,
    as_stored,
    assign,
    clean_text,
    monotonic_ns,
    plan_batch,
)
from tracing.ledger._store import Store

logger = logging.getLogger("tracing.ledger")

_RECENT_IDS = 50_000
"""How many recently written call ids the writer remembers (about 5 MB at most)."""

Item = Mapping[str, Any] | Activity | TurnFloor


@dataclass(frozen=True, slots=True)
class Flush:
    """Queue marker: set ``done`` once everything queued before it is written or dropped."""

    done: threading.Event


@dataclass(frozen=True, slots=True)
class Stop:
    """Queue marker: write what came before, then end the thread."""


class Writer:
    """Owns the write connection; every database write of a ``Ledger`` happens here."""

    def __init__(self, store: Store, options: LedgerOptions, *, reap: bool) -> None:
        self.store = store
        self.options = options
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
        self.reaped = 0
        self.recent_errors: deque[str] = deque(maxlen=20)
        self._reap_cutoff_ns: int | None = None
        reap_after = options.reap_after_seconds
        if reap and reap_after is not None and reap_after is not False:
            self._reap_cutoff_ns = time.time_ns() - int(float(reap_after) * 1e9)
        self._conn: Any = None
        self._updated_ns = 0
        self._failing = False
        self._warned: set[str] = set()
        self._bisect_budget = 0
        self._recent: dict[str, None] = {}
        """Ids this writer wrote lately (insertion-ordered, bounded): looked up when seen again."""
        self._last: dict[str, dict[str, Any]] = {}
        """The rows of the last batch written, as written (see ``_stored``)."""
        self.thread = threading.Thread(
            target=self._run, name="intentrace-ledger-writer", daemon=True
        )

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            self._first_attempt()
            while self._step():
                pass
        except BaseException as exc:  # a bug: keep the app alive, make it visible
            self._error("writer", exc, level=logging.ERROR)
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
            self._drop_conn()
        finally:
            self.first_attempt.set()

    def _drain_dropping(self) -> None:
        """The thread is ending without a database: count what is queued as dropped."""
        while True:
            try:
                item = self.queue.get_nowait()
            except Empty:
                return
            if isinstance(item, Flush):
                item.done.set()
            elif not isinstance(item, Stop):
                self.taken += 1
                self.dropped += 1

    def _step(self) -> bool:
        """Take one batch off the queue and apply it; False once a Stop marker was seen.

        The writer is not woken by every write (that would cost the app a thread switch per
        call): it sleeps ``flush_interval_millis``, or until the queue holds a full batch, or
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
        keep_going = True
        count = 0
        while count < limit:
            try:
                item = get()
            except Empty:
                break
            cls = item.__class__  # (one class test per write: markers are rare)
            if cls is Flush:
                self._apply_safely(segment)
                segment = []
                append = segment.append
                cast(Flush, item).done.set()
            elif cls is Stop:
                keep_going = False
            else:
                append(item)  # pyright: ignore[reportArgumentType]
                count += 1
        self._apply_safely(segment)
        return keep_going

    # --- applying ----------------------------------------------------------------------------
    def _apply_safely(self, items: Sequence[Item]) -> None:
        if not items:
            return
        self.taken += len(items)
        self._bisect_budget = 64
        self._apply_with_retry(items)

    def _apply_with_retry(self, items: Sequence[Item], *, careful: bool = False) -> None:
        delay = self.options.retry_backoff_millis / 1000
        attempt = 0
        while True:
            invalid = 0
            failure: Exception | None = None
            transient = True
            try:
                self._ensure_conn()
            except Exception as exc:  # cannot connect: always the database's fault
                failure = exc
            else:
                try:
                    invalid = self._apply(items, careful=careful)
                except Exception as exc:
                    failure = exc
                    transient = self.store.is_transient(exc)
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
                self._error("write", exc)
                self._drop_conn()
                if attempt >= self.options.retry_attempts or self.abort.is_set():
                    self._drop(len(items), "the database kept failing")
                    return
                attempt += 1
                self.retries += 1
                if self.abort.wait(delay):
                    self._drop(len(items), "the ledger was closed")
                    return
                delay = min(delay * 2, self.options.max_retry_backoff_millis / 1000)
                continue
            self.written += len(items) - invalid
            if invalid:
                self.invalid += invalid
                self._drop(invalid, "invalid writes (need tool_call_id, tool_name, a status)")
            if self._failing:
                self._failing = False
                logger.info("intentrace ledger: writes to %s resumed", self.store.describe())
            return

    def _bisect(self, items: Sequence[Item]) -> None:
        if len(items) == 1 or self._bisect_budget <= 0:
            self._drop(len(items), "a write the database refused")
            return
        self._bisect_budget -= 1
        mid = len(items) // 2
        self._apply_with_retry(items[:mid], careful=True)
        self._apply_with_retry(items[mid:], careful=True)

    def _apply(self, items: Sequence[Item], *, careful: bool = True) -> int:
        """One transaction for the batch; returns the number of invalid writes skipped."""
        store, conn = self.store, self._conn
        recent = self._recent
        if careful:
            found: set[Any] = {it.get("tool_call_id") for it in items if isinstance(it, Mapping)}
            ids: list[str] = [cid for cid in found if cid.__class__ is str]
        else:
            # The hot path: writes are plain dicts, and only ids this writer wrote lately are
            # looked up; any other id is taken as new. If it was not (a replay after a restart,
            # another process), its INSERT fails and the batch is replayed carefully, with
            # every id looked up.
            plain: Sequence[Any] = items
            ids = list(
                dict.fromkeys(
                    [
                        cid
                        for it in plain
                        if it.__class__ is dict and (cid := it.get("tool_call_id")) in recent
                    ]
                )
            )
        lock = store.guard()
        with lock, store.transaction(conn):
            stored = self._stored(conn, ids, careful=careful) if ids else {}
            plan = plan_batch(
                items, stored, now_ns=time.time_ns(), strip_nul=store.strip_nul, careful=careful
            )
            bases = store.allocate(conn, plan.sessions)
            self._updated_ns = assign(plan, bases, updated_ns=monotonic_ns(self._updated_ns)) - 1
            store.insert(conn, plan.inserts)
            store.update(conn, plan.updates)
            if plan.blocks:
                blocks = [
                    (s, b, t, clean_text(label, column="label", strip_nul=store.strip_nul) or "", q)
                    for s, b, t, label, q in plan.blocks
                ]
                store.upsert_blocks(conn, blocks)
        self._last = {cid: call[0] for cid, call in plan.calls.items()}
        recent.update(dict.fromkeys(plan.calls))
        if len(recent) > 2 * _RECENT_IDS:
            self._recent = dict.fromkeys(list(recent)[-_RECENT_IDS:])
        return plan.invalid

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
                    "status": ABANDONED,
                    "label": frame_label(
                        tool_name=r["tool_name"],
                        status=ABANDONED,
                        intent=r["intent"],
                        outcome=r["outcome"],
                    ),
                }
                for r in rows
            ]
            self._apply(writes)
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
        logger.log(
            level,
            "intentrace ledger %s error on %s: %s (retrying with backoff)",
            kind,
            self.store.describe(),
            text,
        )
