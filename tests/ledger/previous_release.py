"""Ledgers made by earlier releases, for the migration tests: the release before anchor
identities (commit f5db6e4, schema 0001) and the one before users and tags (commit 84178cb,
schema 0003).

The fixtures in ``tests/ledger/data/`` were written by each release's own code, run in a child
process from ``git archive <commit>`` (regenerate them with
``.venv/bin/python -m tests.ledger.previous_release``, from a clone that has the commits):

* ``ledger_<commit>.db``: a SQLite ledger file;
* ``ledger_<commit>.postgresql.sql``: the same calls written by that release into PostgreSQL,
  dumped as its schema statements and INSERTs (loaded into a fresh schema by the tests).

``CALLS`` is what the old code was asked to write; the tests check every row survives.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path
from typing import Final

COMMIT: Final = "f5db6e4"
"""The release before anchor identities (schema 0001)."""
BEFORE_USERS: Final = "84178cb"
"""The release before users and tags (schema 0003)."""
RELEASES: Final = (COMMIT, BEFORE_USERS)
DATA: Final = Path(__file__).with_name("data")


def sqlite_fixture(commit: str = COMMIT) -> Path:
    return DATA / f"ledger_{commit}.db"


def postgres_fixture(commit: str = COMMIT) -> Path:
    return DATA / f"ledger_{commit}.postgresql.sql"


SQLITE_FIXTURE: Final = sqlite_fixture()
POSTGRES_FIXTURE: Final = postgres_fixture()
T0: Final = 1_760_000_000_000_000_000
SPAN_ID: Final = f"{'0af7651916cd43dd8448eb211c80319c'}:{'b7ad6b7169203331'}"
"""An id the old release made from a span (no provider id)."""

# (id, session, turn, status, intent, outcome, parent) the old release was asked to write; in it
# the id was the provider's call id (or <trace>:<span>), so "call_0" of session A's turn 2 had
# overwritten turn 1's: the old ledger holds one row per id.
CALLS: Final[list[tuple[str, str, int, str, str, str | None, str | None]]] = [
    ("call_0", "conv-a", 1, "success", "Searching for OAuth", "Found 3 handlers", None),
    ("call_1", "conv-a", 1, "error", "Reading the router", None, None),
    ("toolu_01A", "conv-b", 1, "success", "Asking the reviewer", "Reviewer approved", None),
    ("toolu_01B", "conv-b", 1, "success", "Diffing the branch", "12 files changed", "toolu_01A"),
    (SPAN_ID, "conv-b", 2, "success", "Listing the repo", "Listed 40 files", None),
    ("call_live", "conv-c", 1, "in_flight", "Indexing the docs", None, None),
    ("call_0x", "", 1, "success", "Grepping the logs", None, None),
]

_WRITER: Final = textwrap.dedent(
    """
    import json, sys
    from tracing.ledger import open_ledger
    url, calls = sys.argv[1], json.loads(sys.argv[2])
    led = open_ledger(url)
    for n, (cid, session, turn, status, intent, outcome, parent) in enumerate(calls):
        t = T0 + n * 1_000_000_000
        led.record({"tool_call_id": cid, "tool_name": "search_code", "status": "in_flight",
                    "session_id": session, "turn": turn, "intent": intent, "start_ns": t,
                    "batch_id": f"step-{turn}", "parent_call_id": parent,
                    "args": json.dumps({"q": n}), "trace_id": "%032x" % (n + 1),
                    "span_id": "%016x" % (n + 1)})
        if status != "in_flight":
            led.record({"tool_call_id": cid, "tool_name": "search_code", "status": status,
                        "outcome": outcome, "end_ns": t + 400_000_000,
                        "error": "FileNotFoundError: router.py" if status == "error" else None})
    led.set_activity("conv-b", "step-1", "Reviewing the change", turn=1)
    assert led.flush(30), led.recent_errors()
    led.close()
    """
).replace("T0", str(T0))


def _old_code(repo: Path, into: Path, commit: str = COMMIT) -> Path:
    """A release's ``tracing`` and ``redaction`` packages, unpacked from git."""
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "tracing", "redaction"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def write_with_previous_release(url: str, repo: Path, commit: str = COMMIT) -> None:
    """Write ``CALLS`` into the ledger at ``url`` with that release's own code."""
    with tempfile.TemporaryDirectory() as tmp:
        code = _old_code(repo, Path(tmp), commit)
        subprocess.run(
            [sys.executable, "-c", _WRITER, url, json.dumps(CALLS)],
            check=True,
            cwd=code,
            env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"},
        )


def _dump_postgres(base: str, schema: str, repo: Path, commit: str = COMMIT) -> str:
    """The schema's tables as the old release made them: its statements, then INSERTs."""
    import psycopg
    from psycopg import sql

    with tempfile.TemporaryDirectory() as tmp:
        code = _old_code(repo, Path(tmp), commit)
        statements = subprocess.run(
            [
                sys.executable,
                "-c",
                "import json; from tracing.ledger._store import migrations; "
                "print(json.dumps(migrations('postgresql')))",
            ],
            check=True,
            capture_output=True,
            cwd=code,
            env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"},
        ).stdout
    lines = [
        "CREATE TABLE schema_migrations (name text NOT NULL PRIMARY KEY, "
        "applied_ns bigint NOT NULL);"
    ]
    for _, ddl in json.loads(statements):
        lines += [f"{statement};" for statement in ddl]
    with psycopg.connect(f"{base}?options=-csearch_path%3D{schema}", autocommit=True) as conn:
        tables = ["schema_migrations", "anchors", "sessions", "blocks"]
        if commit != COMMIT:
            tables += ["dropped", "ledger_clock"]
        for table in tables:
            if table == "ledger_clock":  # (its migration's INSERT counted an empty table)
                lines.append(f"DELETE FROM {table};")
            cur = conn.execute(sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(table)))
            columns = [d.name for d in cur.description or ()]
            for row in cur.fetchall():
                values = sql.SQL(", ").join(sql.Literal(v) for v in row).as_string(conn)
                lines.append(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values});")
    return "\n".join(lines) + "\n"


def load_postgres_fixture(url: str, commit: str = COMMIT) -> None:
    """Create that release's PostgreSQL ledger (``postgres_fixture(commit)``) at ``url``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for statement in postgres_fixture(commit).read_text().split(";\n"):
            if statement.strip():
                conn.execute(statement)  # pyright: ignore[reportArgumentType, reportCallIssue]


def main() -> None:  # pragma: no cover - run by hand to regenerate the fixtures
    import os
    import sqlite3

    import psycopg

    from tracing.environment_variables import INTENTRACE_TEST_POSTGRES_URL

    repo = Path(__file__).resolve().parents[2]
    DATA.mkdir(exist_ok=True)
    base = os.environ.get(INTENTRACE_TEST_POSTGRES_URL, "postgresql://postgres@127.0.0.1:5432/test")
    for commit in sys.argv[1:] or RELEASES:
        lite = sqlite_fixture(commit)
        lite.unlink(missing_ok=True)
        write_with_previous_release(f"sqlite:///{lite}", repo, commit)
        conn = sqlite3.connect(lite)
        conn.execute("VACUUM")
        conn.close()
        schema = f"prev_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")  # pyright: ignore[reportArgumentType, reportCallIssue]
        try:
            write_with_previous_release(f"{base}?options=-csearch_path%3D{schema}", repo, commit)
            postgres_fixture(commit).write_text(_dump_postgres(base, schema, repo, commit))
        finally:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")  # pyright: ignore[reportArgumentType, reportCallIssue]
        print(f"wrote {lite} and {postgres_fixture(commit)}")


if __name__ == "__main__":
    main()
