"""Shared test configuration: hypothesis profiles, the PostgreSQL test database, and the check
that no test passes while one of our components swallowed a bug (``tracing.diagnostics``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tracing import diagnostics
from tracing.environment_variables import INTENTRACE_LEDGER_URL, INTENTRACE_TEST_POSTGRES_URL

settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

pytest_plugins = ["pytester"]

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _admin_url() -> str:
    return os.environ.get(INTENTRACE_TEST_POSTGRES_URL, DEFAULT_POSTGRES_URL)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run, dropped at the end.

    Uses the server at INTENTRACE_TEST_POSTGRES_URL (default 127.0.0.1:5432/test). A server
    that is not reachable is an error, not a skip: these tests are part of the suite.
    """
    import psycopg
    from psycopg import sql

    admin = _admin_url()
    name = f"intentrace_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base, _, _ = admin.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(autouse=True)
def own_default_ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test reads or writes the user's default ledger (``$XDG_DATA_HOME/intentrace``):
    the default location is a directory of the test run's own, and no ledger URL comes from the
    environment unless a test sets one (subprocesses inherit both)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg")))
        patch.delenv(INTENTRACE_LEDGER_URL, raising=False)
        yield


@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test during which any component reported an internal error (a swallowed bug).

    Tests that inject bugs on purpose say so with ``@pytest.mark.internal_errors``; they then
    check the reports themselves.
    """
    mark = diagnostics.last_seq()
    yield
    if request.node.get_closest_marker("internal_errors") is not None:
        return
    new = diagnostics.internal_errors(since=mark)
    if new:
        lines = "\n".join(f"  {e.component} / {e.where}: {e.error}" for e in new)
        pytest.fail(f"internal errors were reported (swallowed bugs):\n{lines}", pytrace=False)
