"""The read API on both stores, and read-only opening."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.ledger.test_write import T0, settle, start, written
from tracing.ledger import SESSION_ORDERS, Ledger, LedgerError, SessionOrder, open_ledger

S = 1_000_000_000


@pytest.fixture
def filled(ledger: Ledger) -> Ledger:
    """Three sessions; conv-b is the most recent, conv-c only has a turn."""
    ledger.record(start("a1", "conv-a", agent_id="coder", intent="Searching for OAuth", turn=1,
                        batch_id="ba1", start_ns=T0))  # fmt: skip
    ledger.record(settle("a1", outcome="Found 12 OAuth handlers", end_ns=T0 + S))
    ledger.record(start("a2", "conv-a", agent_id="coder", tool_name="read_file", turn=1,
                        intent="Reading the 50% config", batch_id="ba1", start_ns=T0 + 2 * S))  # fmt: skip
    ledger.record(settle("a2", "error", tool_name="read_file", error="denied", end_ns=T0 + 3 * S))
    ledger.record(start("a3", "conv-a", agent_id="helper", parent_call_id="a1", turn=2,
                        intent="Checking the callback", start_ns=T0 + 4 * S))  # fmt: skip
    ledger.record(start("b1", "conv-b", agent_id="reviewer", tool_name="grep", turn=1,
                        intent="Grepping for 500 errors", start_ns=T0 + 5 * S))  # fmt: skip
    ledger.record(settle("b1", tool_name="grep", end_ns=T0 + 6 * S))
    written(ledger)
    ledger.next_turn("conv-c")
    return ledger


def test_sessions_order_counts_and_pages(filled: Ledger) -> None:
    rows = filled.sessions()
    assert [r["session_id"] for r in rows] == ["conv-b", "conv-a", "conv-c"]
    b, a, c = rows
    assert (a["calls"], a["errors"], a["in_flight"]) == (3, 1, 1)
    assert a["agents"] == ["coder", "helper"] and a["tools"] == ["read_file", "search_code"]
    assert a["first_ns"] == T0 and a["last_ns"] == T0 + 4 * S and a["last_turn"] == 2
    assert (b["calls"], b["errors"], b["in_flight"], b["last_ns"]) == (1, 0, 0, T0 + 6 * S)
    assert (c["calls"], c["last_turn"], c["last_ns"]) == (0, 1, None)
    assert [r["session_id"] for r in filled.sessions(limit=1, offset=1)] == ["conv-a"]
    assert filled.count_sessions() == 3
    assert filled.session("conv-a") == a and filled.session("nope") is None


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"agent": "helper"}, ["conv-a"]),
        ({"tool": "grep"}, ["conv-b"]),
        ({"status": "error"}, ["conv-a"]),
        ({"status": "in_flight", "agent": "coder"}, ["conv-a"]),  # per session, not per call
        ({"search": "oauth"}, ["conv-a"]),  # case-insensitive
        ({"search": "50%"}, ["conv-a"]),  # LIKE wildcards are literal
        ({"search": "500"}, ["conv-b"]),
        ({"search": "conv-"}, ["conv-b", "conv-a", "conv-c"]),  # the session id matches too
        ({"agent": "nobody"}, []),
        ({"errors": True}, ["conv-a"]),
        ({"live": True}, ["conv-a"]),
        (
            {"errors": True, "agent": "reviewer"},
            [],
        ),  # both: a session with a failed call and one of the agent's
        ({"since_ns": T0 + 5 * S}, ["conv-b"]),  # conv-a's last activity is before
        ({"until_ns": T0 + 4 * S}, ["conv-a"]),  # conv-b's first call is after
        ({"since_ns": T0 + 4 * S, "until_ns": T0 + 5 * S}, ["conv-b", "conv-a"]),  # overlap
        ({"since_ns": T0 + 7 * S}, []),  # conv-c (no calls, no times) is in no range
    ],
)
def test_session_filters(filled: Ledger, filters: dict[str, Any], expected: list[str]) -> None:
    assert [r["session_id"] for r in filled.sessions(**filters)] == expected
    assert filled.count_sessions(**filters) == len(expected)


@pytest.mark.parametrize(
    ("order", "descending", "expected"),
    [
        ("last_seen", True, ["conv-b", "conv-a", "conv-c"]),
        ("last_seen", False, ["conv-a", "conv-b", "conv-c"]),  # unknown times last either way
        ("first_seen", True, ["conv-b", "conv-a", "conv-c"]),
        ("first_seen", False, ["conv-a", "conv-b", "conv-c"]),
        ("duration", True, ["conv-a", "conv-b", "conv-c"]),  # 4 s, 1 s, none
        ("duration", False, ["conv-b", "conv-a", "conv-c"]),
        ("calls", True, ["conv-a", "conv-b", "conv-c"]),  # 3, 1, 0
        ("calls", False, ["conv-c", "conv-b", "conv-a"]),
        ("errors", True, ["conv-a", "conv-b", "conv-c"]),  # ties: most recent activity first
        ("errors", False, ["conv-b", "conv-c", "conv-a"]),
        ("session", True, ["conv-c", "conv-b", "conv-a"]),
        ("session", False, ["conv-a", "conv-b", "conv-c"]),
    ],
)
def test_sessions_sort_in_the_database(
    filled: Ledger, order: SessionOrder, descending: bool, expected: list[str]
) -> None:
    rows = filled.sessions(order=order, descending=descending)
    assert [r["session_id"] for r in rows] == expected
    # sorted before the page is cut: each page continues the one order
    pages = [
        filled.sessions(order=order, descending=descending, limit=1, offset=i) for i in range(3)
    ]
    assert [r["session_id"] for page in pages for r in page] == expected
    assert rows[0] == filled.session(expected[0])  # the counts are the same whatever the order


def test_sessions_sort_rejects_an_unknown_order(filled: Ledger) -> None:
    with pytest.raises(ValueError, match="order must be one of last_seen, first_seen"):
        filled.sessions(order="nope")  # pyright: ignore[reportArgumentType]
    assert SESSION_ORDERS == ("last_seen", "first_seen", "duration", "calls", "errors", "session")


def test_calls(filled: Ledger) -> None:
    assert [a["tool_call_id"] for a in filled.session_anchors("conv-a")] == ["a1", "a2", "a3"]
    assert [a["tool_call_id"] for a in filled.checkpoints("conv-a")] == ["a1", "a2"]
    a3 = filled.anchor("a3")
    assert a3 is not None and a3["parent_call_id"] == "a1" and a3["status"] == "in_flight"
    assert filled.anchor("zzz") is None
    assert [a["tool_call_id"] for a in filled.in_flight()] == ["a3"]
    assert filled.in_flight(session_id="conv-b") == []
    assert [a["tool_call_id"] for a in filled.search("ing")] == ["b1", "a3", "a2", "a1"]
    assert [a["tool_call_id"] for a in filled.search("ING", limit=1)] == ["b1"]
    assert [a["tool_call_id"] for a in filled.search("found 12")] == ["a1"]
    assert filled.agents() == ["coder", "helper", "reviewer"]
    assert filled.tools() == ["grep", "read_file", "search_code"]


def test_changed_since_pages_through_every_write(filled: Ledger) -> None:
    seen: list[str] = []
    mark = 0
    while page := filled.changed_since(mark, limit=2):
        seen += [a["tool_call_id"] for a in page]
        mark = page[-1]["updated_ns"]
    assert sorted(seen) == ["a1", "a2", "a3", "b1"]
    filled.record(settle("a3", outcome="Checked"))
    written(filled)
    assert [a["tool_call_id"] for a in filled.changed_since(mark)] == ["a3"]
    assert filled.changed_since(0, session_id="conv-b")[0]["tool_call_id"] == "b1"


def test_summary(filled: Ledger) -> None:
    text = filled.summary("conv-a")
    assert text.splitlines() == [
        "session conv-a: 2 settled calls, 1 not successful.",
        "t1 #1 search_code ok 1.0s: Searching for OAuth → Found 12 OAuth handlers",
        "t1 #3 read_file error 1.0s: Reading the 50% config (denied)",
    ]
    assert filled.summary("conv-a", turn=2) == "session conv-a, turn 2: no settled calls."
    cut = filled.summary("conv-a", max_chars=150)
    assert len(cut) <= 150
    assert cut.splitlines()[1:] == [
        "… 1 earlier call left out",
        "t1 #3 read_file error 1.0s: Reading the 50% config (denied)",
    ]


def test_read_only_sees_everything_and_writes_nothing(
    filled: Ledger, open_fresh: Callable[..., Ledger]
) -> None:
    reader = open_fresh(read_only=True)
    assert [r["session_id"] for r in reader.sessions()] == ["conv-b", "conv-a", "conv-c"]
    before = reader.session_anchors("conv-a")
    reader.record(settle("a3", outcome="should not land"))
    reader.set_activity("conv-a", "ba1", "nope")
    assert reader.next_turn("conv-c") == 1  # local only: the database is not touched
    assert reader.flush()
    assert reader.stats()["dropped"] == 2
    written(filled)
    assert reader.session_anchors("conv-a") == before
    assert filled.session("conv-c")["last_turn"] == 1  # pyright: ignore[reportOptionalSubscript]


def test_read_only_open_errors(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no ledger database at"):
        open_ledger(f"sqlite:///{tmp_path}/missing.db", read_only=True)
    with pytest.raises(LedgerError, match="cannot be opened read-only"):
        open_ledger("sqlite:///:memory:", read_only=True)
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(LedgerError, match="is not an intentrace ledger"):
        open_ledger(str(other), read_only=True)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match=r"not an intentrace ledger|not a database"):
        open_ledger(str(junk), read_only=True)
    with pytest.raises(LedgerError, match="not a database"):
        open_ledger(str(junk))
    assert not (tmp_path / "missing.db").exists()  # a reader never creates the file


@pytest.mark.postgres
def test_read_only_postgres_errors(postgres_url: str) -> None:
    from tests.ledger.conftest import pg_schema_url

    with pytest.raises(LedgerError, match="no anchors table"):
        open_ledger(pg_schema_url(postgres_url), read_only=True)
    with pytest.raises(LedgerError, match="cannot open the ledger"):
        open_ledger("postgresql://postgres@127.0.0.1:1/none", read_only=True)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://x/y", "unsupported ledger URL"),
        ("sqlite:/x.db", "unsupported ledger URL"),
        ("sqlite://host/x.db", "write sqlite:///relative.db"),
        ("postgresql://", "bad ledger URL"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(LedgerError, match=message) as info:
        open_ledger(url)
    assert "\n" not in str(info.value)


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tracing.ledger import default_ledger_url

    monkeypatch.delenv("INTENTRACE_LEDGER_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_ledger_url() == f"sqlite:///{tmp_path}/intentrace/ledger.db"
    with open_ledger() as ledger:  # creates the directory
        ledger.record(start("x"))
    assert (tmp_path / "intentrace" / "ledger.db").exists()
    monkeypatch.setenv("INTENTRACE_LEDGER_URL", f"sqlite:///{tmp_path}/env.db")
    assert open_ledger(read_only=False).url == f"sqlite:///{tmp_path}/env.db"
    assert open_ledger("sqlite:///:memory:").url == "sqlite:///:memory:"


def test_the_session_counter_moves_with_an_activity_label(filled: Ledger) -> None:
    before = filled.session_counter("conv-a")
    version = filled.last_version("conv-a")
    assert before > 0 and filled.session_counter("nope") == 0
    filled.set_activity("conv-a", "ba1", "Explored the auth flow", turn=1)
    written(filled)
    assert filled.session_counter("conv-a") > before
    assert filled.last_version("conv-a") == version  # (what row versions alone miss)
