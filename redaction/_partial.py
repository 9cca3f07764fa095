"""Where a growing text could still be cut inside a secret: partial matching of the rules.

A stream tap publishes an intent while the model is still writing it. A secret cut in half
(``4111 1111`` of a card number, ``Bearer ab…`` of a token) matches no rule, so the scrubber
would let the half through. ``secret_tail(text)`` says where ``text`` must be cut so that no
secret is: the start of the earliest match of a rule that reaches the end of ``text`` or that
the end cuts off (once more text arrives it could be, or extend into, a secret).

Derived from the scrubber's own rules (the built-in ``VALUE_RULES`` that a ``ScrubOptions``
turns on, and its user patterns), recompiled with the ``regex`` module, whose
``partial=True`` matching reports a match that ran into the end of the text; so a new or
changed rule is held back the same way, with no list to keep in step. Where a rule replaces
only a part of its match (the ``secret`` group: the token after ``Bearer``, the value after
``password:``), only that part is held back: ``Bearer`` and ``password:`` are shown. Rule
validators (Luhn, a digit in the key) are not applied: a partial cannot be validated, and
holding back an innocent digit run only delays the label for a moment.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import regex  # partial matching (``re`` has none)

from redaction._patterns import VALUE_RULES
from redaction._scrubber import ScrubOptions

_log = logging.getLogger("redaction")

_DEFAULT: Final = ScrubOptions()


@dataclass(frozen=True, slots=True)
class _Matcher:
    rule: Any
    """The rule's pattern with ``\\Z`` appended (``regex``): only matches that reach the end."""
    head: Any | None
    """The part of the pattern before its ``secret`` group (None: the whole match is secret):
    where it matches, the secret part begins at its end."""


def _split(pattern: str, secret: str | None, flags: int) -> Any | None:
    """The pattern up to its ``secret`` group, compiled; None when it has none or when the
    group is not at the top level (then the whole match counts as secret)."""
    if secret is None:
        return None
    at = pattern.find(f"(?P<{secret}>")
    if at <= 0:
        return None
    head = pattern[:at]
    depth = 0
    escaped = in_class = False
    for ch in head:  # the group must not sit inside another group or a class
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return None  # an alternation at the top level: the head is not a prefix
    if depth != 0 or in_class:
        return None
    try:
        return regex.compile(head, flags)
    except regex.error:
        return None


@lru_cache(maxsize=32)
def _matchers(options: ScrubOptions) -> tuple[_Matcher, ...] | None:
    """The options' rules as partial matchers (None: one of them cannot be compiled here)."""
    out: list[_Matcher] = []
    try:
        for rule in VALUE_RULES:
            if rule.name in options.disable:
                continue
            if rule.optional and not (
                (rule.name == "email" and options.emails)
                or (rule.name == "phone" and options.phones)
            ):
                continue
            pattern, flags = rule.regex.pattern, rule.regex.flags
            out.append(
                _Matcher(
                    regex.compile(f"(?:{pattern})\\Z", flags), _split(pattern, rule.secret, flags)
                )
            )
        for user in options.patterns:
            out.append(_Matcher(regex.compile(f"(?:{user.regex})\\Z"), None))
    except regex.error as exc:  # a user pattern that only ``re`` understands: fail closed
        _log.warning("redaction: cannot match partially (%s): growing text is held back", exc)
        return None
    return tuple(out)


def secret_tail(text: str, start: int = 0, options: ScrubOptions | None = None) -> int:
    """The position from which ``text`` could be, or become, (part of) a secret;
    ``len(text)`` when nothing at its end could.

    A rule's match that reaches the end of ``text`` counts as well as one that the end cuts
    off: what follows could extend it into a longer secret (a card number's next group) or
    into one its validator accepts. For a rule with a ``secret`` group, the position is where
    that part begins (nothing is held while only ``Bearer`` or ``password:`` has arrived).

    Args:
        text: the text so far.
        start: a position before which ``text`` is known to hold no such match (the length
            of a prefix for which this returned its own length): each check of a growing
            text then costs only its new part.
        options: whose rules (default ``ScrubOptions()``, the default policy's).

    Returns ``start`` when the rules cannot be matched partially (fail closed: hold it all).
    """
    end = earliest = len(text)
    if start >= end:
        return end
    matchers = _matchers(options if options is not None else _DEFAULT)
    if matchers is None:
        return start
    for matcher in matchers:
        rx, head = matcher.rule, matcher.head
        if head is None:
            m = rx.search(text, start, partial=True)
            if m is not None and m.start() < min(earliest, end):
                earliest = m.start()
            continue
        # Only the secret part is held: find where a lead-in (``Bearer ``) is complete and
        # something follows it, then whether the rule runs from there into the end.
        for lead in head.finditer(text, start, overlapped=True):
            begin, secret = lead.start(), lead.end()
            if begin >= earliest:
                break
            if secret < end and rx.match(text, begin, partial=True) is not None:
                earliest = min(earliest, secret)
                break
    return earliest
