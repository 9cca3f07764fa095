"""What both scrubbing paths share: placeholders, trail entries and paths, compiled rules, and
the last step of finding (dropping spans inside placeholders, merging overlaps)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, cast

PLACEHOLDER_PREFIX: Final = "[redacted:"
HMAC_PREFIX: Final = "[hmac:"
_PATH_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

CLEAN_TEXT_MAX_CHARS: Final = 256
CLEAN_TEXT_ENTRIES: Final = 8192
"""Short strings found clean are remembered (args repeat between a call's start and settle)."""

Span = tuple[int, int, str]
"""``(start, end, rule)``: a part of a string to replace."""


def placeholder(reason: str) -> str:
    """The text that replaces a removed value: ``[redacted:<reason>]``."""
    return f"{PLACEHOLDER_PREFIX}{reason}]"


@dataclass(frozen=True)
class TrailEntry:
    """One removal: where (a JSON-path-like string) and why (a rule name). Never the value."""

    path: str
    """``$.user.password``, ``args.items[2]``, ``intent``, ..."""
    rule: str
    """A value-rule name (``jwt``), ``key:<category>`` (``key:password``), ``policy``,
    ``depth``, ``size`` or a user pattern's name."""


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
