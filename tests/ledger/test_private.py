"""A ledger URL is shown and stored without its password; the files we create are private."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracing.cli import main
from tracing.ledger import LedgerError, display_url, open_ledger
from tracing.ledger._config import parse_ledger_url
from tracing.status import Status

PASSWORD = "s3cr3t-Pw-9x"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql://app:{PASSWORD}@db:5432/x", "postgresql://app@db:5432/x"),
        (f"postgresql://:{PASSWORD}@db/x", "postgresql://db/x"),
        (
            f"postgresql://app@db/x?password={PASSWORD}&sslmode=require",
            "postgresql://app@db/x?sslmode=require",
        ),
        (
            "postgresql://app@db/x?options=-csearch_path%3Ds",
            "postgresql://app@db/x?options=-csearch_path%3Ds",
        ),
        ("sqlite:////tmp/a:b@c.db", "sqlite:////tmp/a:b@c.db"),
        ("./ledger.db", "./ledger.db"),
    ],
)
def test_display_url(url: str, shown: str) -> None:
    assert display_url(url) == shown
    assert PASSWORD not in display_url(url)


def test_the_password_stays_for_connecting_only(postgres_url: str) -> None:
    from tests.ledger.conftest import pg_schema_url

    url = pg_schema_url(postgres_url.replace("postgres@", f"postgres:{PASSWORD}@"))
    parsed = parse_ledger_url(url)
    assert PASSWORD not in parsed.url and PASSWORD in parsed.connect_url
    with open_ledger(url) as ledger:  # trust auth: any password connects
        assert PASSWORD not in ledger.url and PASSWORD not in repr(ledger)
        assert ledger.connect_url == url
    runner = CliRunner()
    for args in (["summary", "nope"], ["sessions"], ["sql", "SELECT 1"], ["watch", "--once"]):
        result = runner.invoke(main, [*args, "--ledger", url])
        assert PASSWORD not in result.output, args
    with pytest.raises(LedgerError) as info:
        open_ledger(f"mysql://app:{PASSWORD}@db/x")
    assert PASSWORD not in str(info.value)


def test_new_ledger_files_are_private(tmp_path: Path) -> None:
    db = tmp_path / "new" / "dir" / "ledger.db"
    with open_ledger(f"sqlite:///{db}") as ledger:
        ledger.record(
            {"tool_call_id": "a", "tool_name": "t", "status": Status.SUCCESS, "label": "x"}
        )
        assert ledger.flush(10)
        for file in (db, db.with_name("ledger.db-wal")):
            assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
