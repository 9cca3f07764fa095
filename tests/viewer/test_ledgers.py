"""The viewer on other ledgers: empty, missing, and the real PostgreSQL server."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.viewer import fixture_ledger
from tests.viewer.conftest import run_app, texts
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import open_ledger
from tracing.status import Status


def test_empty_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    open_ledger(url).close()  # a ledger with its schema and nothing in it
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    at = run_app()
    assert at.info[0].value.startswith("The ledger has no sessions yet.")
    at = run_app(page="session")
    assert at.info[0].value.startswith("The ledger has no sessions yet.")
    at = run_app(page="live")
    assert [i.value for i in at.info] == ["Nothing in flight right now."]


def test_calls_shed_under_load_are_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'shed.db'}"
    with open_ledger(url) as ledger:
        for i, session_id in enumerate(["conv-ok", "conv-shed"]):
            ledger.record({
                "tool_call_id": f"c{i}", "tool_name": "search", "status": Status.SUCCESS,
                "session_id": session_id, "start_ns": 1_700_000_000_000_000_000 + i,
            })  # fmt: skip
        ledger.record_dropped("conv-shed", 12)
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    note = (
        "12 tool calls were shed under load by the span processor (its queue was full) in "
        "1 session: their anchors are missing or settled without outcome."
    )
    at = run_app()
    assert [w.value for w in at.warning] == [note]
    table = at.dataframe[0].value
    assert dict(zip(table["session"], table["shed"], strict=True)) == {
        "conv-shed": 12,
        "conv-ok": 0,
    }
    at = run_app({"session": "conv-shed"})
    assert [w.value for w in at.warning] == [
        "12 tool calls of this session were shed under load by the span processor (its queue "
        "was full): their anchors are missing or settled without outcome."
    ]
    at = run_app({"session": "conv-ok"})
    assert not at.warning


def test_missing_ledger_is_a_message_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "missing.db"
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, f"sqlite:///{missing}")
    for page in (None, "session", "live"):
        at = run_app(page=page)
        assert [e.value for e in at.error] == ["The ledger cannot be read."]
        assert at.code[0].value.startswith("no ledger database at ")
    assert not missing.exists()


@pytest.mark.postgres
def test_pages_on_postgresql(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg
    from psycopg import sql

    schema = f"v_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = f"{postgres_url}?options=-csearch_path%3D{schema}"
    fixture_ledger.build(url)
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    at = run_app()
    table = at.dataframe[0].value
    assert list(table["session"][:3]) == [
        fixture_ledger.XSS,
        fixture_ledger.LIVE,
        fixture_ledger.AUTH,
    ]
    at = run_app({"session": fixture_ledger.AUTH, "anchor": "c10"})
    assert "✓ Migration review done · No down-migration found" in texts(at)
    assert "Looking for down-migrations" in texts(at)
    at = run_app()  # the search runs on PostgreSQL too (case-insensitive)
    at.text_input(key="q").input("RECHERCHE").run()
    assert list(at.dataframe[0].value["session"]) == [fixture_ledger.AUTH]
