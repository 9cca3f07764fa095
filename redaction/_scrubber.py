"""The scrubber: compiled once per policy, applied by a per-call walker that keeps a trail.

It walks nested mappings and sequences (and JSON text inside strings, which it re-serialises
only when something was removed), applies the key-name rule to mapping keys and the value rules
to every string, and replaces what it finds by a placeholder that says why
(``[redacted:jwt]``) and never echoes the secret. Beyond the depth/size bounds it fails closed:
the value is replaced, never passed through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, Generic, TypeVar, cast
from uuid import UUID

from redaction._base import (
    CLEAN_TEXT_ENTRIES,
    CLEAN_TEXT_MAX_CHARS,
    HMAC_PREFIX,
    PLACEHOLDER_PREFIX,
    CompiledRule,
    Span,
    TrailEntry,
    finish,
    placeholder,
    render_path,
    replaced,
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
)

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


_KEY_SAFE_TYPES = (bool, type(None))
_FAST_SCALARS: Final = frozenset({float, bool, type(None)})
_BIG_INT: Final = 10**12
"""Integers this large are checked as text (card numbers)."""
_PASS_TYPES = (bool, int, float, type(None), datetime, date, time, timedelta, UUID, Decimal)


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
        if self._fast is not None:
            result = self._fast.scrub(value, root, text=False)
            if result is not None:
                return result
        walker = _Walker(self)
        out = walker.walk(value, root, 0)
        return out, walker.trail

    def scrub_text(self, text: str, path: str = "$") -> tuple[str, list[TrailEntry]]:
        """Scrub one string (JSON inside it included)."""
        if self._fast is not None:
            result = self._fast.scrub(text, path, text=True)
            if result is not None:
                return result
        walker = _Walker(self)
        out = walker.text(text, path, 0)
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
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        ends = "" in node
        alts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if ends else body

    return emit(trie)


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


_NOT_JSON: Final = object()


class _Walker:
    """One scrub call: the trail and the node budget."""

    __slots__ = ("max_depth", "max_nodes", "max_string", "nodes", "s", "trail")

    def __init__(self, scrubber: Scrubber) -> None:
        self.s = scrubber
        self.trail: list[TrailEntry] = []
        self.nodes = 0
        o = scrubber.options
        self.max_depth = o.max_depth
        self.max_nodes = o.max_nodes
        self.max_string = o.max_string_chars

    def _cut(self, path: Any, reason: str) -> str:
        self.trail.append(TrailEntry(render_path(path), reason))
        return placeholder(reason)

    def walk(self, v: Any, path: Any, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            return self._cut(path, "size")
        t = cast("type[object]", type(v))
        if t is str:
            return self.text(v, path, depth)
        if t is int and not -_BIG_INT < v < _BIG_INT:
            # a card number can travel as a JSON number
            text = str(v)
            before = len(self.trail)
            new = self._replace(text, path)
            return v if len(self.trail) == before else new
        if isinstance(v, _PASS_TYPES):
            return v
        if isinstance(v, str):  # a str subclass
            return self.text(str(v), path, depth)
        if depth >= self.max_depth:
            return self._cut(path, "depth")
        if isinstance(v, Mapping):
            return self._mapping(cast("Mapping[Any, Any]", v), path, depth)
        if isinstance(v, list | tuple):
            items = cast("list[Any] | tuple[Any, ...]", v)
            out: list[Any] = []
            append = out.append
            for i, x in enumerate(items):
                tx = cast("type[object]", type(x))
                if tx in _FAST_SCALARS or (tx is int and -_BIG_INT < x < _BIG_INT):
                    self.nodes += 1  # fast path: numbers, booleans and null carry no secret
                    append(x)
                else:
                    append(self.walk(x, (path, i), depth + 1))
            return tuple(out) if isinstance(v, tuple) else out
        if isinstance(v, bytes | bytearray):
            raw = bytes(v)
            if len(raw) > self.max_string:
                return self._cut(path, "size")
            text = raw.decode("utf-8", "surrogateescape")
            before = len(self.trail)
            new = self.text(text, path, depth)
            if len(self.trail) == before:
                return v
            return new.encode("utf-8", "surrogateescape")
        # Anything else (objects, sets, enums): scrub its text form; never pass it raw.
        if isinstance(v, set | frozenset):
            items2 = sorted(cast("set[Any]", v), key=repr)
            return [self.walk(x, (path, i), depth + 1) for i, x in enumerate(items2)]
        return self.text(str(v), path, depth)

    def _mapping(self, v: Mapping[Any, Any], path: Any, depth: int) -> dict[Any, Any]:
        s = self.s
        out: dict[Any, Any] = {}
        for k, x in v.items():
            if isinstance(k, str):
                key = self._key_text(k, path)
                kp = (path, key)
                cat = s.key_category(k)
                if cat is not None and not (
                    isinstance(x, _KEY_SAFE_TYPES)
                    or (isinstance(x, str | list | dict | tuple) and not x)
                    or (isinstance(x, str) and s.is_placeholder(x))
                ):
                    self.nodes += 1
                    out[key] = self._cut(kp, f"key:{cat}")
                    continue
                out[key] = self.walk(x, kp, depth + 1)
            else:
                out[k] = self.walk(x, (path, repr(k)), depth + 1)
        return out

    def _key_text(self, k: str, path: Any) -> str:
        clean = self.s.clean_keys
        if k in clean or not k:
            return k
        if len(k) > self.max_string:
            return self._cut(path, "size")
        before = len(self.trail)
        out = self._replace(k, path)
        if len(self.trail) == before and len(clean) < 16384 and len(k) <= 256:
            clean.add(k)  # keys repeat: remember the ones with nothing to remove
        return out

    def text(self, s: str, path: Any, depth: int) -> str:
        if len(s) > self.max_string:
            return self._cut(path, "size")
        if s[:1] in ("{", "[") or (s[:1].isspace() and s.lstrip()[:1] in ("{", "[")):
            try:
                obj = json.loads(s)
            except RecursionError:
                return self._cut(path, "depth")
            except ValueError:
                obj = _NOT_JSON
            if isinstance(obj, dict | list):
                before = len(self.trail)
                new = self.walk(obj, path, depth + 1)
                if len(self.trail) == before:
                    return s
                try:
                    return json.dumps(new, ensure_ascii=False)
                except (RecursionError, ValueError, TypeError):
                    return self._cut(path, "error")
        return self._replace(s, path)

    def _replace(self, s: str, path: Any) -> str:
        spans = self.s.find(s)
        if not spans:
            return s
        entry = render_path(path)
        self.trail.extend(TrailEntry(entry, name) for _, _, name in spans)
        return replaced(s, spans)
