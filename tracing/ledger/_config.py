"""Ledger configuration: URLs, the default location, options, the error type."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tracing.environment_variables import INTENTRACE_LEDGER_URL


class LedgerError(Exception):
    """A configuration or open error (bad URL, missing database for a reader, not a ledger).

    The message is one line saying what is wrong and how to fix it. Writes never raise it.
    """


@dataclass(frozen=True)
class LedgerOptions:
    """Tuning of one ledger (the defaults suit an agent app; tests shrink the timeouts)."""

    max_queue_size: int = 100_000
    """Writes waiting for the writer thread; beyond it ``record`` drops (counted, logged once)."""
    max_batch_size: int = 10_000
    """Most queued writes applied in one transaction (coalesced per tool call id)."""
    flush_interval_millis: int = 50
    """How long the writer waits for more writes before writing a small batch (``flush``
    and ``close`` do not wait). Also how late a live view may see a call."""
    retry_attempts: int = 6
    """Attempts at a failing batch beyond the first, with backoff, before it is dropped."""
    retry_backoff_millis: int = 50
    """First retry delay; doubles on each retry up to ``max_retry_backoff_millis``."""
    max_retry_backoff_millis: int = 2_000
    busy_timeout_millis: int = 2_000
    """SQLite: how long a statement waits for another process's write lock before failing."""
    turn_wait_millis: int = 50
    """How long ``next_turn`` waits for the database's write lock (SQLite's, or the session's
    row on PostgreSQL) before it reads the number instead: the app's thread never waits
    behind another writer."""
    turn_timeout_millis: int = 1_000
    """Longest ``next_turn`` holds the app's thread. A database that does not answer within
    it (a first connect to a server that went silent: ``connect_timeout_seconds``) leaves the
    number to this process (its last + 1), recorded as a floor once the database is back; the
    attempt goes on off the app's thread, and no other is made until it ends."""
    connect_timeout_seconds: int = 5
    """PostgreSQL: connection timeout (libpq ``connect_timeout``)."""
    statement_timeout_millis: int = 30_000
    """PostgreSQL: longest one statement may run (``statement_timeout``; 0: no limit). A
    server that stops answering mid-batch fails the batch (retried) instead of stalling it."""
    keepalive_idle_seconds: int = 10
    """PostgreSQL: TCP keepalives on the writer's connection (``keepalives_idle``; probes
    every ``keepalive_idle_seconds // 2`` s, 3 of them): a half-open or black-holed connection
    errors within about twice this long. libpq's ``tcp_user_timeout`` is set likewise."""
    retry_window_seconds: float = 60.0
    """How long a batch that fails for a transient reason (the database unreachable, locked,
    full) is retried before it is dropped (counted, logged). Writes queued meanwhile wait in
    the queue (``max_queue_size``): an outage shorter than this loses nothing that fits."""
    open_requires_database: bool = False
    """``True``: ``open_ledger`` raises ``LedgerError`` when its first try at connecting fails
    for any reason, unreachable included (``intentrace import`` and ``collect``). ``False``
    (the default, for apps): only failures that retrying cannot fix raise (authentication, a
    missing database or role, a bad connection parameter, a file that is not a ledger, a
    newer schema); an unreachable database is retried in the background."""
    reap_after_seconds: float | None = 3_600.0
    """On open, live anchors not written for this long are settled as ``abandoned``.

    ``0`` reaps every live anchor written before the open; ``None`` (or ``False``) turns
    reaping off. A crashed process leaves its in-flight anchors
    behind; the next open settles them so that nothing shimmers forever.
    """
    sqlite_cache_mib: int = 64
    """SQLite page cache of the writer connection (bounded memory; keeps the id index hot)."""
    open_wait_seconds: float = 5.0
    """How long ``open_ledger`` waits for the first try at connecting and migrating. When the
    database is unreachable it returns anyway: the writer keeps retrying in the background and
    ``record`` keeps queueing."""
    plan_ahead: bool = True
    """Plan batch N+1 on the preparing thread while the writer writes batch N (docs/ledger.md).
    ``False``: the writer plans every batch itself (the same rows; for A/B measurements)."""


Backend = Literal["sqlite", "postgresql"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # ``word:`` (not a ``C:`` drive letter)


@dataclass(frozen=True)
class LedgerURL:
    """A parsed ledger URL."""

    backend: Backend
    url: str
    """The URL as given (normalised) with its password removed: the one to show and store."""
    path: Path | None = None
    """SQLite: the database file; None for ``:memory:``."""
    dsn: str = ""
    """PostgreSQL: the libpq connection string/URL (password included: never shown)."""

    @property
    def connect_url(self) -> str:
        """The URL to connect with (password included: never shown)."""
        return self.dsn or self.url


_SECRET_PARAMS: Final = frozenset({"password", "sslpassword"})


def display_url(url: str) -> str:
    """``url`` as it may be shown and stored: the password removed from ``user:password@``
    and from ``password=`` query parameters (``postgresql://app@db:5432/x``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url if "@" not in url else url.rsplit("@", 1)[-1]
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{host}" if user else host
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [(k, v) for k, v in pairs if k.lower() not in _SECRET_PARAMS]
        if len(kept) != len(pairs):
            query = urlencode(kept)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def default_ledger_path() -> Path:
    """The default SQLite file: ``$XDG_DATA_HOME/intentrace/ledger.db``.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share``; on Windows ``%LOCALAPPDATA%`` is used.
    """
    base = os.environ.get("XDG_DATA_HOME")
    if not base and sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
    root = Path(base) if base else Path.home() / ".local" / "share"
    return root / "intentrace" / "ledger.db"


def default_ledger_url() -> str:
    """The ledger URL used when none is given: ``$INTENTRACE_LEDGER_URL``, else the default file."""
    env = os.environ.get(INTENTRACE_LEDGER_URL, "").strip()
    if env:
        return env
    return "sqlite:///" + str(default_ledger_path())


def parse_ledger_url(url: str | None) -> LedgerURL:
    """Parse a ledger URL (argument > ``$INTENTRACE_LEDGER_URL`` > default file).

    Accepted: ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:``,
    a bare file path (SQLite), ``postgresql://...`` (also ``postgres://`` and
    ``postgresql+psycopg://``).

    Raises:
        LedgerError: the URL is not one of those.
    """
    text = (url if url is not None else default_ledger_url()).strip()
    if not text:
        text = default_ledger_url()
    scheme, sep, rest = text.partition("://")
    if not sep and _SCHEME.match(text):
        raise LedgerError(
            f"unsupported ledger URL {display_url(text)!r}: use sqlite:///path.db, "
            "sqlite:///:memory: or postgresql://user@host/db"
        )
    if not sep:
        # A bare path is a SQLite file (``--ledger ./agent.db``).
        if text == ":memory:":
            return LedgerURL("sqlite", "sqlite:///:memory:")
        path = Path(text).expanduser()
        return LedgerURL("sqlite", "sqlite:///" + str(path), path=path)
    scheme = scheme.lower()
    if scheme in ("sqlite", "sqlite3"):
        if rest == "/:memory:":
            return LedgerURL("sqlite", "sqlite:///:memory:")
        if rest in ("", "/"):
            raise LedgerError(
                f"bad ledger URL {text!r}: no database file after sqlite:/// "
                "(write sqlite:///path.db, or sqlite:///:memory: for a ledger in memory)"
            )
        if not rest.startswith("/"):
            raise LedgerError(
                f"bad ledger URL {text!r}: write sqlite:///relative.db or sqlite:////absolute.db"
            )
        raw = rest[1:].split("?", 1)[0]
        if not raw:
            raise LedgerError(f"bad ledger URL {text!r}: no database file after sqlite:///")
        path = Path(raw).expanduser()
        return LedgerURL("sqlite", "sqlite:///" + raw, path=path)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        dsn = "postgresql://" + rest
        if not rest or rest.startswith("?"):
            raise LedgerError(
                f"bad ledger URL {display_url(text)!r}: write postgresql://user@host:5432/db"
            )
        return LedgerURL("postgresql", display_url(dsn), dsn=dsn)
    raise LedgerError(
        f"unsupported ledger URL {display_url(text)!r}: use sqlite:///path.db, "
        "sqlite:///:memory: or postgresql://user@host/db"
    )
