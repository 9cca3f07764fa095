"""One way to report internal errors: counted, logged once per kind, kept, and seen by tests."""

from __future__ import annotations

import logging
import textwrap

import pytest

from tracing import diagnostics
from tracing.diagnostics import ErrorLog, internal_errors, last_seq


@pytest.mark.internal_errors
def test_report_counts_keeps_and_logs_once_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    log = ErrorLog("unit", logging.getLogger("tests.unit"))
    mark = last_seq()
    with caplog.at_level(logging.WARNING, logger="tests.unit"):
        for _ in range(3):
            log.report("hook", ValueError("bad\nsecond line"))
        log.report("hook", KeyError("k"))
    assert log.count == 4
    new = internal_errors(since=mark)
    assert [(e.component, e.where, e.error) for e in new] == [
        ("unit", "hook", "ValueError: bad"),
        ("unit", "hook", "ValueError: bad"),
        ("unit", "hook", "ValueError: bad"),
        ("unit", "hook", "KeyError: 'k'"),
    ]
    assert [e.seq for e in new] == sorted(e.seq for e in new)
    assert log.recent() == new
    # one log line per kind (component, place, exception type), with its traceback
    assert len(caplog.records) == 2
    assert all(r.exc_info for r in caplog.records)


@pytest.mark.internal_errors
def test_the_latest_are_kept_not_all() -> None:
    log = ErrorLog("flood", logging.getLogger("tests.flood"))
    for i in range(diagnostics.KEEP + 5):
        log.report("loop", RuntimeError(str(i)))
    assert log.count == diagnostics.KEEP + 5
    kept = log.recent()
    assert len(kept) == diagnostics.KEEP
    assert kept[-1].error == f"RuntimeError: {diagnostics.KEEP + 4}"


def test_a_swallowed_bug_fails_the_test(pytester: pytest.Pytester) -> None:
    """The suite's autouse fixture fails a test during which a component reported a bug,
    unless the test is marked ``internal_errors``."""
    pytester.makeconftest(
        textwrap.dedent(
            """
            from tests.conftest import no_internal_errors  # noqa: F401 (the autouse fixture)

            def pytest_configure(config):
                config.addinivalue_line("markers", "internal_errors: expected")
            """
        )
    )
    pytester.makepyfile(
        textwrap.dedent(
            """
            import logging
            import pytest
            from tracing.diagnostics import ErrorLog

            LOG = ErrorLog("component", logging.getLogger("x"))

            def test_swallows():
                LOG.report("hook", RuntimeError("a bug"))

            @pytest.mark.internal_errors
            def test_expects():
                LOG.report("hook", RuntimeError("a bug"))

            def test_clean():
                pass
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*component / hook: RuntimeError: a bug*"])


@pytest.mark.internal_errors
def test_reports_and_logs_carry_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    secret = "ghp_" + "a1B2" * 9
    log = ErrorLog("unit", logging.getLogger("tests.unit.secret"))
    mark = last_seq()
    with caplog.at_level(logging.WARNING, logger="tests.unit.secret"):
        try:
            raise KeyError(f"token {secret}")
        except KeyError as exc:
            log.report("somewhere", exc)
    (error,) = internal_errors(since=mark)
    assert secret not in error.error and "[redacted:github_token]" in error.error
    (record,) = caplog.records
    assert secret not in caplog.text and record.exc_info is None
    assert "[redacted:github_token]" in record.getMessage()
