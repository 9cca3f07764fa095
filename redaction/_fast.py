"""The fast path: candidates from the multi-pattern engine, confirmed by the exact rules.

``FastPath.find`` gives what ``Scrubber.find_python`` gives, by another route: the automaton
scans the text's UTF-8 bytes once; each anchor match implies the positions where its rule may
start (``redaction._patterns.Anchor``); the rule's own regex is tried only there, in order, as
``finditer`` would find them (a superset of the start positions, tried left to right, skipping
those inside the previous match, gives ``finditer``'s matches exactly). The literal and digit
prefilters of the Python path are applied as they are, so both paths run the same rules.

``FastPath.scrub`` walks a value like the Python walker (same node budget, depth bound, key
rule, JSON inside strings, trail order) but collects the strings instead of scanning each: one
scan over all of them joined, then only the strings with a candidate are confirmed and patched
in. What it does not handle (bytes, sets, ``str`` subclasses, arbitrary objects, two keys that
scrub to the same text) it leaves to the Python walker, which then does the whole call.
"""

from __future__ import annotations

import json
import re
import string
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any, Final, cast

from redaction._base import (
    BIG_INT,
    CLEAN_TEXT_MAX_CHARS,
    HMAC_PREFIX,
    JSON_OPENERS,
    NOT_JSON,
    PASS_TYPES,
    PLACEHOLDER_PREFIX,
    SCALARS,
    CompiledRule,
    Span,
    TrailEntry,
    Walk,
    finish,
    render_path,
    replaced,
    run_rule,
)
from redaction._engine import Automaton, EngineInfo, automaton
from redaction._patterns import (
    ASSIGNMENT_KEYWORDS,
    CASE_VARIANTS,
    DIGIT_RUN,
    NON_ASCII_DIGIT,
    VALUE_RULES,
    Anchor,
    assignment_key_start,
    hs_text,
    non_ascii_digits,
    sensitive_key,
    spellings,
)
from redaction._raw import RAW_MIN_CHARS, NeedsWalker, RawJson, expressions

if TYPE_CHECKING:
    from redaction._scrubber import Scrubber

_SEP: Final = "\x00"
"""Joins the strings of one scan; no anchor can match across it."""
_NUMBERS: Final = frozenset({int, float, bool})
_BLANKS: Final = " \t"
_QUOTES: Final = "\"'"
_TEXT: Final = 0
_INT: Final = 1
_TUPLE: Final = 0
_JSON: Final = 1
_UNSEEN: Final = object()
_ASSIGNMENT: Final = "secret_assignment"
_ASSIGNMENT_LEFT: Final = 40
"""How far ``secret_assignment``'s validator extends a key to the left of its keyword."""
_MEMO_ENTRIES: Final = 4096
_PLACEHOLDER: Final = -1
"""The rule index of the placeholder prefixes' expressions."""
_KEY_RUN: Final = re.compile(r"[A-Za-z0-9_.\-]*")
"""The key characters ``secret_assignment``'s key part takes after its keyword."""
_RUN_CHARS: Final = frozenset(
    string.ascii_letters + string.digits + "_.-" + "".join(chain(*CASE_VARIANTS.values()))
)
"""Key characters and the look-alikes Python's case-insensitive matching takes for a keyword's
letters: a run of them ends at an assignment's key end."""
_WINDOW: Final = 96
"""Around an anchor match: the longest anchor reach (66) and literal (19) fit."""


class _Whole:
    """One text's lower-cased form and digit run, computed when first needed."""

    __slots__ = ("_digits", "_lower", "s")

    def __init__(self, s: str) -> None:
        self.s = s
        self._lower: str | None = None
        self._digits: bool | None = None

    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.s.lower()
        return self._lower

    def digit_run(self) -> bool:
        if self._digits is None:
            self._digits = DIGIT_RUN.search(self.s) is not None
        return self._digits


class _Fallback(Exception):
    """The value needs the Python walker (a shape the fast walker does not handle)."""


def _char_ends(s: str, hits: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte offsets into ``s``'s UTF-8 (match ends, on character boundaries) as characters."""
    data = s.encode("utf-8", "surrogatepass")
    out: list[tuple[int, int]] = []
    byte = char = 0
    for end, idx in sorted(hits):
        if end != byte:
            char += len(data[byte:end].decode("utf-8", "surrogatepass"))
            byte = end
        out.append((char, idx))
    return out


def _assignment_starts(t: str, anchor: Anchor) -> tuple[int, ...]:
    """``secret_assignment``'s candidate starts in ``t`` (the run of key characters and
    keyword look-alikes that ends at an anchor's key end, ``_ASSIGNMENT_LEFT`` + ``back``
    characters at most), but for those whose key the key-name rule finds innocent.

    The regex matches only at a keyword followed by key characters up to the key end, so every
    start of a match that ends at this anchor lies in that run (a start elsewhere ends at an
    ``:``/``=`` of its own, which the engine reports too). Most candidates in code are
    assignments to innocent keys (``tokens = ...``, ``max_tokens=``, ``key =``): the validator
    rejects every match whose key is innocent, and a rejected match hides nothing, so those
    starts are not tried. The key at a start: an ASCII keyword (no keyword is a prefix of
    another, so the regex takes that one), the key characters after it, and the validator's
    extension to the left (at most 40 characters: inside ``t``). Keys repeat: the caller
    remembers ``t``'s answer.
    """
    lo = max(len(t) - anchor.back, 0)
    window = t[lo:]
    if anchor.starts_lower is not None and window.isascii():
        found = [lo + m.start() for m in anchor.starts_lower.finditer(window.lower())]
    else:
        assert anchor.starts is not None
        found = [m.start() for m in anchor.starts.finditer(t, lo)]
    out: list[int] = []
    for q in found:
        run = _KEY_RUN.match(t, q)  # (the key characters stop at the anchor's key end)
        end = run.end() if run is not None else q
        if not (
            t[q:end].lower().startswith(ASSIGNMENT_KEYWORDS)
            and not sensitive_key(t[assignment_key_start(t, q) : end])
        ):
            out.append(q)
    return tuple(out)


class FastPath:
    """The engine-backed ``find`` and walker of one scrubber."""

    def __init__(
        self,
        scrubber: Scrubber,
        auto: Automaton,
        targets: list[tuple[int, Anchor | None]],
        always_user: tuple[int, ...],
    ) -> None:
        self.s = scrubber
        self.auto = auto
        self.rules: tuple[CompiledRule, ...] = scrubber.rules
        self.targets = targets
        """Expression index -> (rule index, anchor); anchor ``None``: a user rule's literal."""
        self.lowered: tuple[tuple[str, ...] | None, ...] = tuple(
            None if r.literals is None else tuple(lit.lower() for lit in r.literals)
            for r in self.rules
        )
        """Per rule: its literals lower-cased (the Python path's prefilter)."""
        self._assignments: dict[str, tuple[int, ...]] = {}
        """The key run before an assignment anchor's key end -> its candidate starts but the
        innocent keys', relative to that run (``_assignment_starts``; bounded)."""
        self.always_user = always_user
        """User rules the engine cannot gate (no literals, or non-ASCII ones): run on every
        string, as the Python path does."""
        self.raw: RawJson | None = None
        """Long JSON text scrubbed where it lies (``redaction._raw``)."""

    @classmethod
    def build(cls, scrubber: Scrubber, choice: str) -> tuple[FastPath | None, EngineInfo]:
        by_name = {r.name: r for r in VALUE_RULES}
        exprs: list[tuple[str, bool]] = []
        targets: list[tuple[int, Anchor | None]] = []
        always_user: list[int] = []
        for idx, rule in enumerate(scrubber.rules):
            if rule.builtin:
                for anchor in by_name[rule.name].anchors:
                    pattern = anchor.pattern
                    if pattern == NON_ASCII_DIGIT:
                        pattern = "(?:" + "|".join(hs_text(d) for d in non_ascii_digits()) + ")"
                    exprs.append((pattern, anchor.caseless))
                    targets.append((idx, anchor))
            elif rule.literals is None or not all(lit.isascii() for lit in rule.literals):
                always_user.append(idx)
            else:
                # a superset of "the literal occurs in the lower-cased text"
                for lit in rule.literals:
                    exprs.extend((hs_text(v), True) for v in spellings(lit))
                    targets.extend((idx, None) for _ in spellings(lit))
        # where a placeholder may be: only there are removals checked against placeholders
        for prefix in (PLACEHOLDER_PREFIX, HMAC_PREFIX):
            exprs.append((hs_text(prefix), False))
            targets.append((_PLACEHOLDER, None))
        auto, info = automaton(tuple(exprs), choice)
        if auto is None:
            return None, info
        fast = cls(scrubber, auto, targets, tuple(always_user))
        raw, _ = automaton((*exprs, *expressions()), choice)
        if raw is not None:
            fast.raw = RawJson(fast, raw, len(exprs), TextBatch)
        return fast, info

    # -- one string ---------------------------------------------------------------------------

    def find(self, s: str) -> list[Span]:
        if not s:
            return []
        data = s.encode("utf-8", "surrogatepass")
        return self.confirm(s, self.auto.scan(data), s.isascii())

    def confirm(self, s: str, hits: list[tuple[int, int]], ascii_text: bool) -> list[Span]:
        """``find_python(s)``, given every anchor match in ``s`` (``(byte end, expression)``)."""
        if self.always_user:
            spans = self._always(s)
        elif not hits:
            return []
        else:
            spans = []
        if hits:
            if not ascii_text:
                hits = _char_ends(s, hits)
            per_rule: dict[int, list[tuple[int, Anchor | None]]] = {}
            targets = self.targets
            for end, expr in hits:
                idx, anchor = targets[expr]
                got = per_rule.get(idx)
                if got is None:
                    per_rule[idx] = [(end, anchor)]
                else:
                    got.append((end, anchor))
            protect = per_rule.pop(_PLACEHOLDER, None) is not None
            whole = _Whole(s)
            for idx in sorted(per_rule):
                rule = self.rules[idx]
                found = per_rule[idx]
                if not self._runs(idx, rule, whole, found[0][0]):
                    continue
                if rule.builtin:
                    self._confirm_rule(rule, s, found, spans)
                else:
                    run_rule(rule, s, spans)
        else:
            protect = False
        if not spans:
            return spans
        return finish(s, spans, self.s.placeholders if protect or self.always_user else None)

    def _runs(self, idx: int, rule: CompiledRule, whole: _Whole, end: int) -> bool:
        """The Python path's prefilters, exactly (both paths run the same rules): a literal of
        the rule in the lower-cased text, a digit run, one of the required characters.

        Decided on the text around one anchor match when they pass there (the anchor is most
        often the literal itself), else on the whole text: a large text is not lower-cased
        or searched for every rule it has a candidate of."""
        s = whole.s
        window = s[max(end - _WINDOW, 0) : end + _WINDOW]
        lits = self.lowered[idx]
        if lits is not None:
            # an ASCII literal in a slice's lower-cased form is in the text's: lower() maps
            # character by character (but the final sigma, not ASCII)
            low = window.lower()
            if not any(lit in low for lit in lits):
                low = whole.lower()
                if not any(lit in low for lit in lits):
                    return False
        elif rule.digits and DIGIT_RUN.search(window) is None and not whole.digit_run():
            return False
        requires = rule.requires
        return not requires or any(c in window or c in s for c in requires)

    def _always(self, s: str) -> list[Span]:
        spans: list[Span] = []
        lower: str | None = None
        for idx in self.always_user:
            rule = self.rules[idx]
            if rule.literals is not None:
                if lower is None:
                    lower = s.lower()
                if not any(lit.lower() in lower for lit in rule.literals):
                    continue
            run_rule(rule, s, spans)
        return spans

    def _confirm_rule(
        self,
        rule: CompiledRule,
        s: str,
        hits: list[tuple[int, Anchor | None]],
        spans: list[Span],
    ) -> None:
        starts: set[int] = set()
        assignment = rule.name == _ASSIGNMENT
        memo = self._assignments
        for end, anchor in hits:
            assert anchor is not None
            if anchor.length:
                starts.add(end - anchor.length)
                continue
            if anchor.whole:
                run_rule(rule, s, spans)
                return
            hi = end
            if anchor.skip:  # before an assignment's ':' or '=': blanks, then one quote
                hi = end - 1
                while hi > 0 and s[hi - 1] in _BLANKS:
                    hi -= 1
                if hi > 0 and s[hi - 1] in _QUOTES:
                    hi -= 1
            if assignment:  # the key's run
                a = hi
                floor = max(hi - anchor.back - _ASSIGNMENT_LEFT, 0)
                while a > floor and s[a - 1] in _RUN_CHARS:
                    a -= 1
                context = s[a:hi]
                found = memo.get(context)
                if found is None:
                    found = _assignment_starts(context, anchor)
                    if len(memo) >= _MEMO_ENTRIES:
                        memo.clear()
                    memo[context] = found
                for q in found:
                    starts.add(a + q)
                continue
            lo = max(hi - anchor.back, 0)
            if anchor.starts_lower is not None:
                window = s[lo:hi]
                if window.isascii():
                    lowered = window.lower()
                    starts.update(lo + m.start() for m in anchor.starts_lower.finditer(lowered))
                    continue
            finder = anchor.starts
            assert finder is not None
            starts.update(m.start() for m in finder.finditer(s, lo, hi))
        if not starts:
            return
        regex = rule.regex
        validator = rule.validator
        secret = rule.secret
        last = 0
        for p in sorted(starts):
            if p < last:
                continue
            m = regex.match(s, p)
            if m is None:
                continue
            if validator is not None and not validator(s, m):
                # a rejected match hides nothing: the search goes on at the next start, as
                # in the Python path
                continue
            last = max(m.end(), p + 1)
            a, b = m.span(secret) if secret is not None else m.span()
            if a < b:
                spans.append((a, b, rule.name))

    # -- a whole value ------------------------------------------------------------------------

    def scrub(self, value: Any, root: str, *, text: bool) -> tuple[Any, list[TrailEntry]] | None:
        """``Scrubber.scrub``/``scrub_text`` by the fast walker; ``None``: use the Python one."""
        if (
            type(value) is str
            and len(value) >= RAW_MIN_CHARS
            and self.raw is not None
            and ((c := value[:1]) in JSON_OPENERS or (c.isspace() and value.lstrip()[:1] in "{["))
        ):
            got = self.raw.scrub(value, root)
            if got is not None:
                return got
        walker = _FastWalker(self)
        box: list[Any] = [None]
        try:
            if text:
                walker.text(box, 0, value, root, 0)
            else:
                walker.put(box, 0, value, root, 0)
            trail = walker.resolve()
        except _Fallback:
            return None
        return box[0], trail


class TextBatch:
    """Strings scrubbed by one fast walker (one scan for all of them), each as if met at a
    depth, under its own root (``redaction._raw``: the strings of JSON text to decode)."""

    __slots__ = ("box", "walker")

    def __init__(self, fast: FastPath) -> None:
        self.walker = _FastWalker(fast)
        self.box: list[Any] = []

    def add(self, text: str, root: str, depth: int) -> None:
        """Scrub ``text`` (its trail's paths under ``root``, the ``len``-th one added).

        Raises:
            NeedsWalker: a shape the fast walker leaves to the Python walker.
        """
        i = len(self.box)
        self.box.append(None)
        try:
            self.walker.text(self.box, i, text, root, depth)
        except _Fallback:
            raise NeedsWalker from None

    def finish(self) -> tuple[list[Any], list[TrailEntry]]:
        """The scrubbed strings, in order, and the trail of them all.

        Raises:
            NeedsWalker: as ``add``.
        """
        try:
            trail = self.walker.resolve()
        except _Fallback:
            raise NeedsWalker from None
        return self.box, trail


class _FastWalker(Walk):
    """One scrub call: the Python walker's rules, with the strings' scan deferred and batched."""

    __slots__ = ("clean", "fast", "finals", "known", "marks", "s", "short", "slots", "texts")

    def __init__(self, fast: FastPath) -> None:
        o = fast.s.options
        super().__init__(o.max_depth, o.max_nodes, o.max_string_chars, fast.find, fast.s.clean_keys)
        self.fast = fast
        self.s = fast.s
        self.texts: list[str] = []
        """Strings to scan, in walk order."""
        self.short: list[str] = []
        """The strings to scan that are short enough to be remembered when found clean."""
        self.slots: list[tuple[Any, Any, Any, int]] = []
        """Per string: (container, key, path, kind) where its scrubbed form goes."""
        self.marks: list[int] = []
        """Per string: where its removals go in the trail (``len(trail)`` when met)."""
        self.clean = fast.s.clean_texts
        self.known: dict[str, Any] = {}
        """Keys met in this call with nothing to remove: their key-rule category."""
        self.finals: list[tuple[Any, ...]] = []
        """Tuples to freeze and JSON texts to re-serialise once the strings are patched, in the
        order met (inner ones first)."""

    def put(self, out: Any, key: Any, v: Any, path: Any, depth: int) -> None:
        """``out[key] = `` the scrubbed ``v`` (strings: as they are, patched later)."""
        self.nodes += 1
        if self.nodes > self.max_nodes:
            out[key] = self._cut(path, "size")
            return
        t: type[object] = type(v)  # pyright: ignore[reportUnknownVariableType]
        if t is str:
            self.text(out, key, v, path, depth)
        elif t is dict:
            out[key] = (
                self._cut(path, "depth")
                if depth >= self.max_depth
                else self._mapping(cast("dict[Any, Any]", v), path, depth)
            )
        elif t is list:
            out[key] = (
                self._cut(path, "depth")
                if depth >= self.max_depth
                else self._sequence(cast("list[Any]", v), path, depth)
            )
        elif t is int and not -BIG_INT < v < BIG_INT:
            out[key] = v  # a card number can travel as a JSON number
            self._defer(out, key, str(v), path, _INT)
        elif t in SCALARS or t is int or isinstance(v, PASS_TYPES):
            out[key] = v
        elif isinstance(v, str):
            raise _Fallback  # a str subclass
        elif depth >= self.max_depth:
            out[key] = self._cut(path, "depth")
        elif isinstance(v, Mapping):
            out[key] = self._mapping(cast("Mapping[Any, Any]", v), path, depth)
        elif isinstance(v, tuple):
            seq = self._sequence(cast("tuple[Any, ...]", v), path, depth)
            out[key] = seq
            self.finals.append((_TUPLE, out, key, seq))
        elif isinstance(v, list):
            out[key] = self._sequence(cast("list[Any]", v), path, depth)
        else:
            raise _Fallback  # bytes, sets, objects: the Python walker's text forms

    def _sequence(self, items: list[Any] | tuple[Any, ...], path: Any, depth: int) -> list[Any]:
        if len(items) > 8:
            kinds = set(map(type, items))
            if kinds <= _NUMBERS and (
                int not in kinds or (min(items) > -BIG_INT and max(items) < BIG_INT)
            ):
                self.nodes += len(items)  # numbers, booleans and null carry no secret
                return list(items)
        seq: list[Any] = []
        append = seq.append
        d1 = depth + 1
        for i, x in enumerate(items):
            tx: type[object] = type(x)  # pyright: ignore[reportUnknownVariableType]
            if tx in SCALARS or (tx is int and -BIG_INT < x < BIG_INT):
                self.nodes += 1  # numbers, booleans and null carry no secret
                append(x)
            elif tx is str:
                self.nodes += 1
                append(x)
                if self.nodes > self.max_nodes:
                    seq[i] = self._cut((path, i), "size")
                elif (c := x[:1]) in JSON_OPENERS or c.isspace() or len(x) > self.max_string:
                    self.text(seq, i, x, (path, i), d1)
                else:
                    self._plain(seq, i, x, (path, i))
            else:
                append(None)
                self.put(seq, i, x, (path, i), d1)
        return seq

    def _mapping(self, v: Mapping[Any, Any], path: Any, depth: int) -> dict[Any, Any]:
        s = self.s
        out: dict[Any, Any] = {}
        known = self.known
        d1 = depth + 1
        for k, x in v.items():
            if type(k) is str:
                cat = known.get(k, _UNSEEN)
                if cat is _UNSEEN:
                    key = self._key_text(k, path)
                    cat = s.key_category(k)
                    if key is k:
                        known[k] = cat
                else:
                    key = k
            elif isinstance(k, str):
                key = self._key_text(k, path)
                cat = s.key_category(k)
            else:
                self.put(out, k, x, (path, repr(k)), d1)
                continue
            if key in out:
                raise _Fallback  # two keys scrubbed to one text: the last one wins there
            if cat is not None and s.hidden_by_key(x):
                self.nodes += 1
                out[key] = self._cut((path, key), f"key:{cat}")
                continue
            tx: type[object] = type(x)  # pyright: ignore[reportUnknownVariableType]
            if tx is str:
                self.nodes += 1
                if self.nodes > self.max_nodes:
                    out[key] = self._cut((path, key), "size")
                elif (c := x[:1]) in JSON_OPENERS or c.isspace() or len(x) > self.max_string:
                    self.text(out, key, x, (path, key), d1)
                else:
                    out[key] = x
                    self._plain(out, key, x, (path, key))
            elif tx in SCALARS or (tx is int and -BIG_INT < x < BIG_INT):
                self.nodes += 1
                out[key] = self._cut((path, key), "size") if self.nodes > self.max_nodes else x
            else:
                self.put(out, key, x, (path, key), d1)
        return out

    def text(self, out: Any, key: Any, s: str, path: Any, depth: int) -> None:
        if len(s) > self.max_string:
            out[key] = self._cut(path, "size")
            return
        c = s[:1]
        if c in JSON_OPENERS or (c.isspace() and s.lstrip()[:1] in JSON_OPENERS):
            try:
                obj = json.loads(s)
            except RecursionError:
                out[key] = self._cut(path, "depth")
                return
            except ValueError:
                obj = NOT_JSON
            if isinstance(obj, dict | list):
                mark, first = len(self.trail), len(self.texts)
                inner: list[Any] = [None]
                self.put(inner, 0, obj, path, depth + 1)
                out[key] = s
                self.finals.append(
                    (_JSON, out, key, inner, mark, len(self.trail), first, len(self.texts))
                )
                return
        out[key] = s
        self._plain(out, key, s, path)

    def _plain(self, out: Any, key: Any, s: str, path: Any) -> None:
        """A string that is not JSON text (``out[key]`` holds it): scanned with the others."""
        if len(s) <= CLEAN_TEXT_MAX_CHARS:
            if s in self.clean:
                return
            self.short.append(s)
        self.texts.append(s)
        self.slots.append((out, key, path, _TEXT))
        self.marks.append(len(self.trail))

    def _defer(self, out: Any, key: Any, s: str, path: Any, kind: int) -> None:
        self.texts.append(s)
        self.slots.append((out, key, path, kind))
        self.marks.append(len(self.trail))

    def resolve(self) -> list[TrailEntry]:
        """Scan the strings, patch in the scrubbed ones, finish tuples and JSON texts; the trail."""
        fast = self.fast
        texts = self.texts
        found: dict[int, list[Span]] = {}
        if texts:
            joined = _SEP.join(texts)
            hits = fast.auto.scan(joined.encode("utf-8", "surrogatepass"))
            per_text: dict[int, list[tuple[int, int]]] = {}
            if len(texts) == 1:
                per_text[0] = hits
            elif hits:
                if joined.isascii():
                    lengths = [len(t) + 1 for t in texts]
                else:
                    lengths = [
                        (len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass"))) + 1
                        for t in texts
                    ]
                starts = [0, *accumulate(lengths)]
                hits.sort()
                # the hits of one text at a time: two bisections per text with a hit
                j, n = 0, len(hits)
                while j < n:
                    i = bisect_right(starts, hits[j][0] - 1) - 1
                    k = bisect_left(hits, (starts[i + 1],), j)
                    base = starts[i]
                    per_text[i] = (
                        [(end - base, expr) for end, expr in hits[j:k]] if base else hits[j:k]
                    )
                    j = k
            candidates = range(len(texts)) if fast.always_user else sorted(per_text)
            for i in candidates:
                s = texts[i]
                spans = fast.confirm(s, per_text.get(i, []), s.isascii())
                if spans:
                    found[i] = spans
            if self.short:
                self.s.remember_clean(
                    self.short, [t for i in found if len(t := texts[i]) <= CLEAN_TEXT_MAX_CHARS]
                )
        trail = self.trail
        if found:
            # removals go where the Python walker would have recorded them
            merged: list[TrailEntry] = []
            pos = 0
            for i in sorted(found):
                spans = found[i]
                out, key, path, _ = self.slots[i]
                mark = self.marks[i]
                merged.extend(trail[pos:mark])
                pos = mark
                entry = render_path(path)
                merged.extend(TrailEntry(entry, name) for _, _, name in spans)
                out[key] = replaced(texts[i], spans)
            merged.extend(trail[pos:])
            trail = merged
        hit_texts = sorted(found)
        for final in self.finals:
            if final[0] == _TUPLE:
                _, out, key, seq = final
                out[key] = tuple(seq)
                continue
            _, out, key, inner, mark, mark_end, first, last = final
            j = bisect_right(hit_texts, first - 1)
            if mark_end > mark or (j < len(hit_texts) and hit_texts[j] < last):
                try:
                    out[key] = json.dumps(inner[0], ensure_ascii=False)
                except (RecursionError, ValueError, TypeError):
                    raise _Fallback from None
        return trail
