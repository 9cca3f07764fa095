"""A SQLite ledger on a small volume that fills up: a real 2 MiB tmpfs mounted for the test
(root only; skipped elsewhere). SQLite checkpoints its WAL only at 1 000 pages (4 MiB), so on
such a volume the WAL alone fills it and is never shrunk: before the fix, every write failed
from then on, whatever space was freed. The writer now checkpoints (TRUNCATE) when a write
fails for lack of space, and retries."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracing.ledger import Ledger, LedgerOptions, open_ledger
from tracing.status import Status

OPTIONS = LedgerOptions(
    retry_backoff_millis=5, max_retry_backoff_millis=20, retry_attempts=2, retry_window_seconds=0
)
ARGS = "a" * 1500


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "vol"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", f"tmpfs-{uuid.uuid4().hex[:6]}", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def rewrite(ledger: Ledger, rounds: int, *, tag: str) -> None:
    """The same 100 calls written again and again (a steady workload: the data stays the
    size it is, the WAL grows by every write until a checkpoint)."""
    for r in range(rounds):
        for i in range(100):
            ledger.record(
                {
                    "tool_call_id": f"call-{i}",
                    "tool_name": "search_code",
                    "status": Status.SUCCESS,
                    "session_id": "s",
                    "outcome": f"{tag} round {r}",
                    "args": ARGS,
                }
            )
        assert ledger.flush()


def test_a_full_volume_recovers_once_space_is_freed(volume: Path) -> None:
    ballast = volume / "ballast"
    ballast.write_bytes(b"x" * 700_000)
    ledger = open_ledger(f"sqlite:///{volume}/ledger.db", options=OPTIONS)
    try:
        # Fill the volume: the WAL grows with every round until a write finds no space.
        for _ in range(30):
            rewrite(ledger, 1, tag="filling")
            if ledger.stats()["dropped"]:
                break
        stats = ledger.stats()
        assert stats["dropped"] > 0, "the volume never filled"
        assert stats["disk_full"] >= 1
        assert any("full" in e for e in ledger.recent_errors())
        ballast.unlink()  # the operator frees space
        dropped = stats["dropped"]
        rewrite(ledger, 30, tag="after")  # more WAL than the volume holds without checkpoints
        stats = ledger.stats()
        assert stats["dropped"] == dropped, ledger.recent_errors()[-3:]
        assert stats["space_reclaimed"] >= 1
        # the writes dropped while it was full are on record where users look
        assert sum(d["count"] for d in ledger.dropped() if d["source"] == "ledger") == dropped
        found = ledger.anchor("call-99")
        assert found is not None and found["outcome"] == "after round 29"
    finally:
        ledger.close()
