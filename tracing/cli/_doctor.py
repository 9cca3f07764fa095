"""``intentrace doctor``: what this environment gives intentrace, one check per line.

The secret scrubber's engine (Hyperscan, or the pure-Python fallback and why), the redaction
policy, the ledger, and which optional extras are installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform
from dataclasses import asdict, dataclass
from typing import Literal

import click

from redaction import PolicyError, RedactionPolicy
from tracing import __version__
from tracing.cli._options import ledger_option, policy_option
from tracing.ledger import LedgerError, open_ledger

Level = Literal["ok", "warn", "fail"]

# extra -> the modules it brings (pyproject.toml's optional dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("rich",),
    "viewer": ("streamlit", "pandas", "altair"),
    "analytics": ("duckdb", "adbc_driver_sqlite", "pyarrow", "orjson", "jsonschema"),
    "langfuse": ("langfuse",),
    "postgres": ("psycopg",),
    "taps": ("openai", "anthropic"),
}


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    level: Level
    detail: str


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def check_policy(path: str | None) -> tuple[list[Check], RedactionPolicy | None]:
    """The redaction policy loads (argument > ``$INTENTRACE_REDACTION_POLICY`` > default)."""
    try:
        policy = RedactionPolicy.load(path)
    except PolicyError as exc:
        return [Check("redaction policy", "fail", str(exc))], None
    where = policy.source if policy.source != "<python>" else "default (keep, scrub secrets)"
    return [Check("redaction policy", "ok", where)], policy


def check_engine(policy: RedactionPolicy | None) -> Check:
    """Which engine scrubs secrets with the policy's scrub options (chosen afresh: the shared
    default policy chose when it was first built)."""
    options = (policy or RedactionPolicy.default()).scrubbing
    try:
        stats = RedactionPolicy(scrubbing=options).scrubber.stats()
    except PolicyError as exc:
        return Check("scrubber engine", "fail", str(exc))
    if stats["engine"] == "hyperscan":
        return Check("scrubber engine", "ok", f"hyperscan ({stats['engine_detail']})")
    return Check(
        "scrubber engine",
        "warn",
        f"pure Python, slower on large payloads: {stats['engine_detail']}",
    )


def check_ledger(url: str | None) -> Check:
    """The ledger opens for reading and answers a query."""
    try:
        ledger = open_ledger(url, read_only=True)
    except LedgerError as exc:
        level: Level = "fail" if url else "warn"
        return Check("ledger", level, RedactionPolicy.default().scrub_text(str(exc)))
    try:
        sessions = ledger.count_sessions()
    except LedgerError as exc:
        return Check("ledger", "fail", str(exc))
    finally:
        ledger.close()
    shown = RedactionPolicy.default().scrub_text(ledger.url)  # no password in the report
    return Check("ledger", "ok", f"{shown} ({sessions} sessions)")


def check_extras() -> list[Check]:
    """Each optional extra: installed (all its modules importable) or not."""
    out: list[Check] = []
    for extra, modules in EXTRAS.items():
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            detail = (
                f"not installed (missing {', '.join(missing)}): pip install 'intentrace[{extra}]'"
            )
            out.append(Check(f"extra [{extra}]", "warn", detail))
        else:
            out.append(Check(f"extra [{extra}]", "ok", "installed"))
    return out


def run_checks(ledger_url: str | None, policy_path: str | None) -> list[Check]:
    runtime = (
        f"intentrace {__version__}, Python {platform.python_version()} "
        f"({platform.machine()}), opentelemetry-sdk {_version('opentelemetry-sdk')}"
    )
    checks = [Check("runtime", "ok", runtime)]
    policy_checks, policy = check_policy(policy_path)
    checks += policy_checks
    checks.append(check_engine(policy))
    checks.append(check_ledger(ledger_url))
    checks += check_extras()
    return checks


@click.command()
@ledger_option
@policy_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per check.")
def doctor(ledger_url: str | None, policy_path: str | None, as_json: bool) -> None:
    """Check this environment: scrubber engine, redaction policy, ledger, optional extras.

    Exits with status 1 when a check fails (a policy that does not load, a ledger named with
    --ledger that cannot be read); warnings (the pure-Python scrubber, a ledger not created
    yet, an extra not installed) keep status 0.
    """
    checks = run_checks(ledger_url, policy_path)
    if as_json:
        for c in checks:
            click.echo(json.dumps(asdict(c)))
    else:
        width = max(len(c.name) for c in checks)
        for c in checks:
            click.echo(f"{c.level.upper():<4}  {c.name:<{width}}  {c.detail}")
    if any(c.level == "fail" for c in checks):
        raise SystemExit(1)
