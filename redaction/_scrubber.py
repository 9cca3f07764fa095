"""The scrubber: compiled once per policy, applied by a per-call walker that keeps a trail.

Its rules are the built-in value rules (``redaction._patterns``), the user's patterns and the
key-name rule. A call goes to the fast walker (``redaction._fast``: one multi-pattern scan, the
exact rules confirm the candidates) when the engine runs here, else, or for a value the fast
walker leaves, to the pure-Python walker (``redaction._walk``), its oracle. Either replaces what
it finds by a placeholder that says why (``[redacted:jwt]``) and never echoes the secret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from redaction._base import (
    CLEAN_TEXT_ENTRIES,
    CLEAN_TEXT_MAX_CHARS,
    HMAC_PREFIX,
    KEY_SAFE_TYPES,
    PLACEHOLDER_PREFIX,
    CompiledRule,
    Span,
    TrailEntry,
    finish,
    run_rule,
)
from redaction._engine import ENGINE_CHOICES, EngineInfo, EngineUnavailable, resolve_choice
from redaction._errors import PolicyError
from redaction._fast import FastPath
from redaction._patterns import (
    DIGIT_RULES,
    DIGIT_RUN,
    KEY_CATEGORIES,
    KEY_RULE_SOURCE,
    VALUE_RULES,
    ValueRule,
    normalise_key,
    trie,
)
from redaction._walk import Walker

T = TypeVar("T")

FIXED_REASONS: Final[tuple[str, ...]] = ("policy", "depth", "size", "error")
"""Placeholder reasons that are not patterns: a policy action, the depth/size bounds, a failure."""

_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True)
class Scrubbed(Generic[T]):
    """A scrubbed value and the trail of what was removed from it."""

    value: T
    trail: tuple[TrailEntry, ...]

    @property
    def scrubbed(self) -> int:
        """Number of removals."""
        return len(self.trail)


@dataclass(frozen=True)
class UserPattern:
    """A user-supplied value pattern (TOML ``[[scrub.patterns]]``)."""

    name: str
    """Rule name: lower-case letters, digits and ``_``; appears in placeholders and trails."""
    regex: str
    """Python regular expression; the whole match is replaced."""
    literals: tuple[str, ...] = ()
    """Optional prefilter: the regex runs only on strings containing one of these substrings."""


@dataclass(frozen=True)
class ScrubOptions:
    """What the scrubber looks for and how far it walks."""

    emails: bool = False
    """Also replace email addresses."""
    phones: bool = False
    """Also replace phone numbers."""
    disable: tuple[str, ...] = ()
    """Built-in value rules to turn off, by name (see ``BUILTIN_PATTERNS``)."""
    patterns: tuple[UserPattern, ...] = ()
    """Extra value patterns."""
    keys: tuple[str, ...] = ()
    """Extra key-name regexes, searched in the normalised key (``X-Acme-Ref`` -> ``x_acme_ref``);
    a match redacts the value under the key (``[redacted:key:custom]``)."""
    max_depth: int = 32
    """Nesting depth (JSON inside strings counts); deeper values become ``[redacted:depth]``."""
    max_string_chars: int = 1_000_000
    """Longer strings become ``[redacted:size]``."""
    max_nodes: int = 200_000
    """Values visited per scrub; the rest become ``[redacted:size]``."""
    engine: str | None = None
    """``auto`` (Hyperscan when its wheel is installed, else pure Python), ``hyperscan``
    (required: a policy error without it) or ``python`` (the pure-Python path, the reference
    the fast path is tested against). ``None``: ``$INTENTRACE_SCRUB_ENGINE``, else ``auto``.
    Every engine gives the same output and trail."""


class Scrubber:
    """Compiled rules. Thread-safe: each call uses its own walker."""

    def __init__(self, options: ScrubOptions, *, source: str = "<python>") -> None:
        self.options = options
        builtin = {r.name for r in VALUE_RULES}
        for i, name in enumerate(options.disable):
            if name not in builtin:
                raise PolicyError(
                    source, f"[scrub] disable[{i}]", f"unknown built-in pattern {name!r}"
                )
        rules: list[CompiledRule] = []
        for r in VALUE_RULES:
            if r.name in options.disable:
                continue
            if r.optional and not (
                (r.name == "email" and options.emails) or (r.name == "phone" and options.phones)
            ):
                continue
            rules.append(_from_builtin(r))
        names = set(builtin) | set(FIXED_REASONS)
        for i, p in enumerate(options.patterns):
            entry = f"[[scrub.patterns]][{i}] {p.name!r}"
            if not _NAME.fullmatch(p.name):
                raise PolicyError(
                    source, entry, "name must be lower-case letters, digits and _ (max 40)"
                )
            if p.name in names:
                raise PolicyError(source, entry, "name is already a pattern name")
            names.add(p.name)
            try:
                compiled = re.compile(p.regex)
            except re.error as exc:
                raise PolicyError(source, entry, f"bad regex: {exc}") from None
            if compiled.search("") is not None:
                raise PolicyError(source, entry, "regex matches the empty string")
            lits = tuple(p.literals) or None
            rules.append(CompiledRule(p.name, compiled, lits, False, None, None))
        self._rules: tuple[CompiledRule, ...] = tuple(rules)
        self._build_prefilter()
        key_source = KEY_RULE_SOURCE
        for i, k in enumerate(options.keys):
            try:
                re.compile(k)
            except re.error as exc:
                raise PolicyError(source, f"[scrub] keys[{i}]", f"bad regex: {exc}") from None
            if re.search(k, "") is not None:
                raise PolicyError(source, f"[scrub] keys[{i}]", "regex matches the empty string")
        if options.keys:
            key_source += "|(?P<custom>" + "|".join(f"(?:{k})" for k in options.keys) + ")"
        self._key_rule = re.compile(key_source)
        self._key_cache: dict[str, str | None] = {}
        self.clean_keys: set[str] = set()
        self._clean_texts: set[str] = set()
        """Mapping keys already found to hold nothing to remove (bounded)."""
        cats = [*KEY_CATEGORIES, "custom"]
        reasons = sorted(names | {f"key:{c}" for c in cats}, key=len, reverse=True)
        self._placeholder = re.compile(
            r"\[(?:redacted:(?:"
            + "|".join(re.escape(r) for r in reasons)
            + r")|hmac:[0-9a-f]{32})\]"
        )
        for name, value in (
            ("max_depth", options.max_depth),
            ("max_string_chars", options.max_string_chars),
            ("max_nodes", options.max_nodes),
        ):
            if value < 1:
                raise PolicyError(source, f"[scrub] {name}", "must be a positive integer")
        choice = resolve_choice(options.engine)
        if choice not in ENGINE_CHOICES:
            raise PolicyError(
                source, "[scrub] engine", f"{choice!r} is not one of {', '.join(ENGINE_CHOICES)}"
            )
        self._fast: FastPath | None = None
        self.engine: EngineInfo
        """Which engine finds the candidates (see ``stats``)."""
        try:
            self._fast, self.engine = FastPath.build(self, choice)
        except EngineUnavailable as exc:
            raise PolicyError(
                source, "[scrub] engine", f"hyperscan cannot run here: {exc}"
            ) from None

    # -- public helpers used by the policy -------------------------------------------------

    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        """The value rules that run: the enabled built-ins in order, then the user's."""
        return self._rules

    @property
    def placeholders(self) -> re.Pattern[str]:
        """Matches every placeholder and HMAC form this scrubber can write."""
        return self._placeholder

    def is_placeholder(self, text: str) -> bool:
        """``text`` is exactly one placeholder or HMAC form (left as it is on a second pass)."""
        return self._placeholder.fullmatch(text) is not None

    def hidden_by_key(self, value: Any) -> bool:
        """Under a sensitive key, ``value`` is replaced: it is not null, a boolean, empty or
        already a placeholder."""
        return not (
            isinstance(value, KEY_SAFE_TYPES)
            or (isinstance(value, str | list | dict | tuple) and not value)
            or (isinstance(value, str) and self.is_placeholder(value))
        )

    def key_category(self, key: str) -> str | None:
        """The key-name rule's category for ``key`` or ``None`` (cached)."""
        cached = self._key_cache.get(key, "")
        if cached != "":
            return cached
        probe = key
        if PLACEHOLDER_PREFIX in probe or HMAC_PREFIX in probe:
            probe = self._placeholder.sub(" ", probe)
        m = self._key_rule.search(normalise_key(probe))
        cat = m.lastgroup if m is not None else None
        if len(self._key_cache) < 16384:
            self._key_cache[key] = cat
        return cat

    def scrub(self, value: Any, root: str = "$") -> tuple[Any, list[TrailEntry]]:
        """Scrub any JSON-like value; returns the new value and the trail."""
        return self._scrub(value, root, text=False)

    def scrub_text(self, text: str, path: str = "$") -> tuple[str, list[TrailEntry]]:
        """Scrub one string (JSON inside it included)."""
        return self._scrub(text, path, text=True)

    def _scrub(self, value: Any, root: str, *, text: bool) -> tuple[Any, list[TrailEntry]]:
        if self._fast is not None:
            result = self._fast.scrub(value, root, text=text)
            if result is not None:
                return result
        walker = Walker(self)
        out = walker.text(value, root, 0) if text else walker.walk(value, root, 0)
        return out, walker.trail

    def stats(self) -> dict[str, str]:
        """Which engine scrubs (``engine``: ``hyperscan`` or ``python``) and why
        (``engine_detail``: its version, or the reason for the pure-Python path)."""
        return {"engine": self.engine.name, "engine_detail": self.engine.detail}

    # -- text -------------------------------------------------------------------------------

    def find(self, s: str) -> list[Span]:
        """Spans ``(start, end, rule)`` to replace in ``s`` (merged, outside placeholders)."""
        if self._fast is not None:
            return self._fast.find(s)
        return self.find_python(s)

    def find_python(self, s: str) -> list[Span]:
        """``find`` by the pure-Python path: every rule whose literal occurs runs its regex."""
        rules = self._rules
        clean = self._clean_texts
        if s in clean:
            return []
        # Prefilter: one search for every rule's literals (a trie-shaped alternation over the
        # lower-cased text, so the regex engine skips to candidate first characters), one for
        # a digit run; only the rules whose literal occurs run their own regex.
        lower = s.lower()
        todo: set[int] = set(self._always)
        trigger = self._trigger
        if trigger is not None:
            by_literal = self._by_literal
            overlaps = self._overlaps
            for m in trigger.finditer(lower):
                lit = m.group()
                todo.update(by_literal[lit])
                # matches do not overlap: a literal starting inside this one is checked here
                for k, other in overlaps.get(lit, ()):
                    if lower.startswith(other, m.start() + k):
                        todo.update(by_literal[other])
        if self._digit_rules and DIGIT_RUN.search(s) is not None:
            todo.update(self._digit_rules)
        if not todo:
            self._remember_clean(s)
            return []
        spans: list[Span] = []
        for idx in sorted(todo):
            rule = rules[idx]
            if rule.requires and not any(c in s for c in rule.requires):
                continue
            run_rule(rule, s, spans)
        if not spans:
            self._remember_clean(s)
            return spans
        return finish(s, spans, self._placeholder)

    def clear_caches(self) -> None:
        """Forget the remembered clean keys and strings (benchmarks measure cold scrubbing)."""
        self.clean_keys.clear()
        self._clean_texts.clear()
        self._key_cache.clear()

    def _remember_clean(self, s: str) -> None:
        if len(s) <= CLEAN_TEXT_MAX_CHARS:
            clean = self._clean_texts
            if len(clean) >= CLEAN_TEXT_ENTRIES:
                clean.clear()
            clean.add(s)

    @property
    def clean_texts(self) -> set[str]:
        """Short strings found to hold nothing to remove (bounded; see ``remember_clean``)."""
        return self._clean_texts

    def remember_clean(self, short: list[str], found: list[str]) -> None:
        """Remember the strings of ``short`` (none longer than ``CLEAN_TEXT_MAX_CHARS``) but
        those of ``found``: the others were found to hold nothing to remove."""
        clean = self._clean_texts
        if len(clean) + len(short) > CLEAN_TEXT_ENTRIES:
            clean.clear()
        clean.update(short[:CLEAN_TEXT_ENTRIES])
        clean.difference_update(found)

    def _build_prefilter(self) -> None:
        by_literal: dict[str, set[int]] = {}
        always: list[int] = []
        digit_rules: list[int] = []
        for idx, rule in enumerate(self._rules):
            if rule.literals is None:
                (digit_rules if rule.digits else always).append(idx)
                continue
            for lit in rule.literals:
                by_literal.setdefault(lit.lower(), set()).add(idx)
        # The trigger search reports non-overlapping matches, longest first: a literal that is a
        # prefix of another is folded into it; one that starts inside a match (at offset k) is
        # checked at that offset when the match is found.
        overlaps: dict[str, list[tuple[int, str]]] = {}
        for lit, idxs in by_literal.items():
            for other, oidx in by_literal.items():
                if other == lit:
                    continue
                if lit.startswith(other):
                    idxs.update(oidx)
                for k in range(1, len(lit)):
                    if lit[k:].startswith(other) or other.startswith(lit[k:]):
                        overlaps.setdefault(lit, []).append((k, other))
        self._overlaps = {k: tuple(v) for k, v in overlaps.items()}
        self._by_literal = {k: frozenset(v) for k, v in by_literal.items()}
        self._always = tuple(always)
        self._digit_rules = tuple(digit_rules)
        self._trigger = re.compile(_trie_regex(list(by_literal))) if by_literal else None


def _trie_regex(words: list[str]) -> str:
    """An alternation of ``words`` shaped as a trie (``s(?:k\\-|ecret)``), longest first."""

    def emit(node: dict[str, Any]) -> str:
        ends = "" in node
        alts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if ends else body

    return emit(trie(words))


def _from_builtin(r: ValueRule) -> CompiledRule:
    return CompiledRule(
        r.name,
        r.regex,
        r.literals,
        r.name in DIGIT_RULES,
        r.secret,
        r.validator,
        r.requires,
        builtin=True,
    )
