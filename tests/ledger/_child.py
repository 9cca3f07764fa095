"""Scenarios run in a child process by the fault and crash tests (prints JSON lines).

python tests/ledger/_child.py SCENARIO URL
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

from tracing.ledger import LedgerOptions, open_ledger

FAST = LedgerOptions(
    retry_backoff_millis=5,
    max_retry_backoff_millis=40,
    retry_attempts=2,
    retry_window_seconds=0,
    busy_timeout_millis=50,
)


def say(**data: object) -> None:
    print(json.dumps(data), flush=True)


def call(i: int, status: str, session: str = "crash") -> dict[str, object]:
    return {
        "tool_call_id": f"{session}-{i}",
        "tool_name": "search_code",
        "status": status,
        "session_id": session,
        "intent": f"Searching for piece {i}",
        "args": "x" * 200,
        "start_ns": time.time_ns(),
    }


def writer(url: str) -> None:
    """Write forever: in flight, settled 5 calls later; the parent kills us with SIGKILL."""
    ledger = open_ledger(url)
    i = 0
    while True:
        ledger.record(call(i, "in_flight"))  # pyright: ignore[reportArgumentType]
        if i >= 5:
            ledger.record(call(i - 5, "success"))  # pyright: ignore[reportArgumentType]
        i += 1
        if i == 200:
            ledger.flush()
            say(ready=True)
        if i % 50 == 0:
            time.sleep(0.001)


def read_only(url: str) -> None:
    """A ledger file that turns read-only, then writable again (run without DAC override)."""
    path = Path(url.removeprefix("sqlite:///"))
    with open_ledger(url) as ledger:
        ledger.record(call(0, "success", "ro"))  # pyright: ignore[reportArgumentType]
    os.chmod(path, 0o444)
    ledger = open_ledger(url, options=FAST)  # no exception
    for i in range(1, 11):
        ledger.record(call(i, "success", "ro"))  # pyright: ignore[reportArgumentType]
    ledger.flush()
    during = ledger.stats()
    # SQLite made the -wal/-shm files with the database's mode: make all three writable again.
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.chmod(f"{path}{suffix}", 0o644)
    for i in range(11, 16):
        ledger.record(call(i, "success", "ro"))  # pyright: ignore[reportArgumentType]
    ledger.flush()
    after = ledger.stats()
    ids = [a["tool_call_id"] for a in ledger.session_anchors("ro")]
    ledger.close()
    say(during=during, after=after, ids=ids, errors=ledger.recent_errors())


def disk_full(url: str) -> None:
    """Writes under a file-size limit (the kernel refuses to grow the files), then without."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    ledger = open_ledger(url, options=FAST)
    ledger.record(call(0, "success", "full"))  # pyright: ignore[reportArgumentType]
    ledger.flush()
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
    for i in range(1, 1001):
        ledger.record({**call(i, "success", "full"), "args": "y" * 2000})  # pyright: ignore[reportArgumentType]
        if i % 10 == 0:
            ledger.flush()
    during = ledger.stats()
    errors = ledger.recent_errors()
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    ledger.record(call(5000, "success", "full"))  # pyright: ignore[reportArgumentType]
    ledger.flush()
    after = ledger.stats()
    found = ledger.anchor("full-5000") is not None
    ledger.close()
    say(during=during, after=after, errors=errors, recovered=found)


if __name__ == "__main__":
    {"writer": writer, "read_only": read_only, "disk_full": disk_full}[sys.argv[1]](sys.argv[2])
