"""Filters: which calls an analysis counts (time range, agent, tool, session, status).

A filter selects the calls an analysis is *about*: the calls it counts, and for ``precursors``
the settled calls whose windows are formed. What a call is compared with (the calls before it
in its session, its batch siblings, earlier calls with the same arguments) still comes from the
whole ledger, so filtering never turns a repeat into a first call. Filters run inside the
engine, as a ``WHERE`` of the scan over the copy (never on the rows afterwards).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime
from typing import Any, Final

from tracing.analytics._analyses import AnalyticsError
from tracing.status import STATUSES

FILTER_KEYS: Final = ("since", "until", "agent", "tool", "session", "status")


def to_ns(value: Any, name: str) -> int | None:
    """A time as nanoseconds since the epoch (UTC): int ns, a ``datetime`` (naive = UTC), a
    ``date`` (its midnight, UTC) or ISO 8601 text (``2026-01-01``, ``2026-01-01T12:00``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise AnalyticsError(f"filter {name!r}: not a time: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise AnalyticsError(
                f"filter {name!r}: {value!r} is not an ISO 8601 time (2026-01-31 or "
                "2026-01-31T12:00)"
            ) from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    raise AnalyticsError(f"filter {name!r}: not a time: {value!r}")


def _names(value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        return tuple(str(v) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    raise AnalyticsError(f"filter {name!r} takes a name or a list of names, not {value!r}")


@dataclass(frozen=True)
class Filters:
    """Which calls an analysis counts; an empty field does not filter.

    Times are by call start (``start_ns``), ``since`` included, ``until`` excluded.
    """

    since: int | None = None
    """Calls that started at or after this time (ns since the epoch, UTC)."""
    until: int | None = None
    """Calls that started before this time (ns since the epoch, UTC)."""
    agent: tuple[str, ...] = ()
    """Calls of these agents (``agent_id``)."""
    tool: tuple[str, ...] = ()
    """Calls of these tools (``tool_name``)."""
    session: tuple[str, ...] = ()
    """Calls of these sessions (``session_id``)."""
    status: tuple[str, ...] = ()
    """Calls with these statuses (``success``, ``error``, ``cancelled``, ``abandoned``, …)."""

    @classmethod
    def of(cls, value: Filters | Mapping[str, Any] | None) -> Filters:
        """Filters from a mapping (``{"since": "2026-01-01", "tool": ["grep"]}``), validated.

        Raises:
            AnalyticsError: an unknown key or a bad value (one line).
        """
        if value is None:
            return cls()
        if isinstance(value, Filters):
            return value
        unknown = sorted(set(value) - set(FILTER_KEYS))
        if unknown:
            raise AnalyticsError(f"unknown filter {unknown[0]!r} (known: {', '.join(FILTER_KEYS)})")
        statuses = _names(value.get("status"), "status")
        for s in statuses:
            if s not in STATUSES:
                raise AnalyticsError(
                    f"filter 'status': {s!r} is not a status (known: {', '.join(STATUSES)})"
                )
        out = cls(
            since=to_ns(value.get("since"), "since"),
            until=to_ns(value.get("until"), "until"),
            agent=_names(value.get("agent"), "agent"),
            tool=_names(value.get("tool"), "tool"),
            session=_names(value.get("session"), "session"),
            status=statuses,
        )
        return out

    def over(self, base: Filters) -> Filters:
        """These filters laid over ``base``: each field given here replaces base's."""
        changes = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}
        changes |= {
            k: v for k, v in (("since", self.since), ("until", self.until)) if v is not None
        }
        return replace(base, **changes)

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) not in (None, ()) for f in fields(self))

    def as_dict(self) -> dict[str, Any]:
        """The fields that filter (JSON-ready: times as ISO 8601 UTC text)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value in (None, ()):
                continue
            if f.name in ("since", "until"):
                out[f.name] = iso(value)
            else:
                out[f.name] = list(value)
        return out

    def sql(self, alias: str = "") -> tuple[str, dict[str, Any]]:
        """A SQL condition over the copy's ``calls`` (``TRUE`` when nothing filters) and its
        named parameters (``$f_…``)."""
        p = f"{alias}." if alias else ""
        terms: list[str] = []
        binds: dict[str, Any] = {}
        if self.since is not None:
            terms.append(f"{p}start_ns >= $f_since")
            binds["f_since"] = self.since
        if self.until is not None:
            terms.append(f"{p}start_ns < $f_until")
            binds["f_until"] = self.until
        for name, column in (
            ("agent", "agent_id"),
            ("tool", "tool_name"),
            ("session", "session_id"),
            ("status", "status"),
        ):
            values = getattr(self, name)
            if values:
                terms.append(f"list_contains($f_{name}, {p}{column})")
                binds[f"f_{name}"] = list(values)
        return (" AND ".join(terms) or "TRUE"), binds

    def matches(self, call: Mapping[str, Any]) -> bool:
        """Whether one anchor (a mapping with the ledger's columns) passes (the plain way)."""
        start = call["start_ns"]
        if self.since is not None and start < self.since:
            return False
        if self.until is not None and start >= self.until:
            return False
        return all(
            not values or call[column] in values
            for values, column in (
                (self.agent, "agent_id"),
                (self.tool, "tool_name"),
                (self.session, "session_id"),
                (self.status, "status"),
            )
        )


def iso(ns: int) -> str:
    """Nanoseconds since the epoch as ISO 8601 UTC text (``2026-01-01T00:00:00Z``)."""
    text = datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    rest = ns % 1_000_000_000
    return f"{text}.{rest:09d}Z".replace(".000000000Z", "Z") if rest else f"{text}Z"
