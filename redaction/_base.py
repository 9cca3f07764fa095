"""What both scrubbing paths share: placeholders, trail entries and paths, compiled rules, the
last step of finding (dropping spans inside placeholders, merging overlaps), and what a walker
keeps for one call (the trail, the node budget, the bounds) and passes as it is."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, cast
from uuid import UUID

PLACEHOLDER_PREFIX: Final = "[redacted:"
HMAC_PREFIX: Final = "[hmac:"
_PATH_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

BIG_INT: Final = 10**12
"""Integers this large are checked as text (a card number can travel as a JSON number)."""
SCALARS: Final = frozenset({float, bool, type(None)})
"""Types whose values carry no secret (as do integers smaller than ``BIG_INT``)."""
PASS_TYPES: Final = (bool, int, float, type(None), datetime, date, time, timedelta, UUID, Decimal)
"""Values passed as they are (integers checked against ``BIG_INT`` first)."""
KEY_SAFE_TYPES: Final = (bool, type(None))
"""Values a sensitive key leaves as they are."""
JSON_OPENERS: Final = ("{", "[")
"""A string starting with one (after white space) is tried as JSON text."""
NOT_JSON: Final = object()
CLEAN_TEXT_MAX_CHARS: Final = 256
CLEAN_TEXT_ENTRIES: Final = 8192
"""Short strings found clean are remembered (args repeat between a call's start and settle)."""

Span = tuple[int, int, str]
"""``(start, end, rule)``: a part of a string to replace."""


def placeholder(reason: str) -> str:
    """The text that replaces a removed value: ``[redacted:<reason>]``."""
    return f"{PLACEHOLDER_PREFIX}{reason}]"


class TrailEntry:
    """One removal: where (a JSON-path-like string) and why (a rule name). Never the value.

    Compared, hashed and shown by ``(path, rule)``, like a frozen dataclass. Removals found in
    JSON text where it lies (``redaction._raw``) know a position, not yet a path: theirs is
    worked out when first read (callers that only count removals never pay for it)."""

    __slots__ = ("_path", "_resolve", "rule")

    rule: str
    """A value-rule name (``jwt``), ``key:<category>`` (``key:password``), ``policy``,
    ``depth``, ``size`` or a user pattern's name."""

    def __init__(self, path: str, rule: str) -> None:
        self._path: str | None = path
        self._resolve: Callable[[], str] | None = None
        self.rule = rule

    @classmethod
    def lazy(cls, resolve: Callable[[], str], rule: str) -> TrailEntry:
        """An entry whose path ``resolve()`` works out when it is first read."""
        entry = cls.__new__(cls)
        entry._path = None
        entry._resolve = resolve
        entry.rule = rule
        return entry

    @property
    def path(self) -> str:
        """``$.user.password``, ``args.items[2]``, ``intent``, ..."""
        path = self._path
        if path is None:
            assert self._resolve is not None
            path = self._path = self._resolve()
            self._resolve = None
        return path

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TrailEntry):
            return NotImplemented
        return self.rule == other.rule and self.path == other.path

    def __hash__(self) -> int:
        return hash((self.path, self.rule))

    def __repr__(self) -> str:
        return f"TrailEntry(path={self.path!r}, rule={self.rule!r})"


def render_path(path: Any) -> str:
    """A path under construction, ``(("$", "a"), 0)``, as text: ``$.a[0]``.

    Paths are nested tuples while walking and rendered only when a removal is recorded."""
    parts: list[str | int] = []
    while isinstance(path, tuple):
        path, part = cast("tuple[Any, str | int]", path)
        parts.append(part)
    out = [cast(str, path)]
    for part in reversed(parts):
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PATH_KEY.fullmatch(part):
            out.append(f".{part}")
        else:
            out.append(f"[{json.dumps(part, ensure_ascii=False)}]")
    return "".join(out)


@dataclass(frozen=True)
class CompiledRule:
    """A value rule as the scrubber runs it (built-in or the user's)."""

    name: str
    regex: re.Pattern[str]
    literals: tuple[str, ...] | None
    """Lower-cased text must contain one of these for the rule to run (``None``: always, or a
    digit run when ``digits``)."""
    digits: bool
    secret: str | None
    validator: Any
    requires: str = ""
    """Characters one of which must occur (cheap extra prefilter)."""
    builtin: bool = False


def run_rule(rule: CompiledRule, s: str, spans: list[Span]) -> None:
    """Every match of ``rule`` in ``s`` (no prefilter) appended to ``spans``."""
    validator = rule.validator
    if validator is None:
        for m in rule.regex.finditer(s):
            a, b = m.span(rule.secret) if rule.secret is not None else m.span()
            if a < b:
                spans.append((a, b, rule.name))
        return
    # A match the validator rejects hides nothing: the search goes on from its next character,
    # not from its end (`tokens=secret_key=abc123`: the innocent `tokens=` match must not
    # swallow the assignment inside it).
    search = rule.regex.search
    pos = 0
    n = len(s)
    while pos <= n:
        m = search(s, pos)
        if m is None:
            return
        if not validator(s, m):
            pos = m.start() + 1
            continue
        a, b = m.span(rule.secret) if rule.secret is not None else m.span()
        if a < b:
            spans.append((a, b, rule.name))
        pos = max(m.end(), m.start() + 1)


def finish(s: str, spans: list[Span], placeholders: re.Pattern[str] | None) -> list[Span]:
    """Spans outside existing placeholders, sorted, overlaps merged (labelled by the first).

    ``placeholders`` ``None``: ``s`` is known to hold no placeholder prefix."""
    if placeholders is not None and (PLACEHOLDER_PREFIX in s or HMAC_PREFIX in s):
        protected = [m.span() for m in placeholders.finditer(s)]
        if protected:
            spans = [
                sp for sp in spans if not any(sp[0] < pe and ps < sp[1] for ps, pe in protected)
            ]
    spans.sort()
    merged: list[Span] = []
    for a, b, name in spans:
        if merged and a < merged[-1][1]:
            pa, pb, pname = merged[-1]
            merged[-1] = (pa, max(pb, b), pname)
        else:
            merged.append((a, b, name))
    return merged


def replaced(s: str, spans: list[Span]) -> str:
    """``s`` with each span replaced by its placeholder."""
    parts: list[str] = []
    pos = 0
    for a, b, name in spans:
        parts.append(s[pos:a])
        parts.append(placeholder(name))
        pos = b
    parts.append(s[pos:])
    return "".join(parts)


_CLEAN_KEY_ENTRIES: Final = 16384


class Walk:
    """What a walker keeps for one scrub call: the trail, the node budget and the bounds, and
    how it finds what to remove from a string (``find``) and remembers clean mapping keys."""

    __slots__ = ("clean_keys", "find", "max_depth", "max_nodes", "max_string", "nodes", "trail")

    def __init__(
        self,
        max_depth: int,
        max_nodes: int,
        max_string: int,
        find: Callable[[str], list[Span]],
        clean_keys: set[str],
    ) -> None:
        self.trail: list[TrailEntry] = []
        self.nodes = 0
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.max_string = max_string
        self.find = find
        self.clean_keys = clean_keys

    def _key_text(self, k: str, path: Any) -> str:
        """A mapping key ``k`` under ``path``, scrubbed."""
        clean = self.clean_keys
        if k in clean or not k:
            return k
        if len(k) > self.max_string:
            return self._cut(path, "size")
        spans = self.find(k)
        if not spans:
            if len(clean) < _CLEAN_KEY_ENTRIES and len(k) <= CLEAN_TEXT_MAX_CHARS:
                clean.add(k)  # keys repeat: remember the ones with nothing to remove
            return k
        return self._patched(k, spans, path)

    def _patched(self, s: str, spans: list[Span], path: Any) -> str:
        """``s`` with ``spans`` replaced, the removals recorded under ``path``."""
        entry = render_path(path)
        self.trail.extend(TrailEntry(entry, name) for _, _, name in spans)
        return replaced(s, spans)

    def _cut(self, path: Any, reason: str) -> str:
        """Record the removal of the value at ``path``; its placeholder."""
        self.trail.append(TrailEntry(render_path(path), reason))
        return placeholder(reason)
