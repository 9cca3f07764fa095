"""JSON text scrubbed where it lies: no parse into objects, no walk, no re-serialisation.

A tool call's args reach a span as JSON text. The walkers parse it, visit every value and write
it back when something was removed; on 100 KB that costs more than every other step together.
Here the engine scans the text itself, with the key-name rule's words and "a string that starts
a JSON value" among its expressions, and only the strings it points at are decoded:

* a string without escapes is its own text, so the anchor matches inside it are the ones a scan
  of the string alone reports (the anchors use no ``^``/``$``; a match that crosses a quote only
  adds candidate starts, which the exact rules then reject); the rules confirm them in place;
* a string with an escape (found by searching for backslashes: every one is inside a string),
  and one that holds JSON text, is decoded and scrubbed by the fast walker, as the walkers would
  scrub it at that place;
* a key the key-name rule finds sensitive has its value replaced (its extent from the C scanner);
* an integer of 13 digits or more (a card number can travel as a number) is checked as text.

The result is the text with those parts replaced, its layout kept. It parses to what the
walkers give (they re-serialise; a test compares both on generated payloads, and byte for byte
on ``json.dumps`` output, which is what they write). Where exactness cannot be shown cheaply the
walkers run instead: text that is not JSON as ``json.loads`` reads it (checked by ``jiter``,
which accepts no text ``json.loads`` rejects; duplicate keys refused), deeper than the depth
bound could be, possibly over the node budget, a key with something to remove, user rules that
run on every string or extra key patterns.

Removals are recorded at the position of their value; their paths are worked out only when a
trail entry's path is read (``TrailEntry.lazy``): one tokenising pass, in Python, for all of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.scanner import make_scanner
from typing import TYPE_CHECKING, Any, Final

import jiter

from redaction._base import (
    BIG_INT,
    JSON_OPENERS,
    Span,
    TrailEntry,
    placeholder,
    render_path,
    replaced,
)
from redaction._patterns import hs_text, spellings

if TYPE_CHECKING:
    from redaction._engine import Automaton
    from redaction._fast import FastPath, TextBatch

RAW_MIN_CHARS: Final = 4096
"""JSON text at least this long is scrubbed where it lies (shorter text: the fast walker)."""
_MEAN_STRING_CHARS: Final = 512
"""Text whose strings are longer than this on average (in its head) goes to the walker."""
_HEAD_CHARS: Final = 16384
KEY_WORDS: Final = (
    *("pass", "pwd", "secret", "token", "auth", "bearer", "cookie", "cred", "key", "card"),
    *("cvv", "cvc", "ssn", "social", "pin", "otp", "mfa"),
)
"""A key the built-in key-name rule finds sensitive holds one of these (any case; the Unicode
look-alikes that lower-case to ASCII too): ``KEY_RULE_SOURCE`` matches only the normalised key,
in which every alternative contains one (a test checks it on the rule's examples)."""
KEY_END: Final = r'[^"\\]*"[ \t\n\r]*:'
"""After a key word: the rest of a key without escapes, its quote and colon (the match ends
outside strings, at the colon; keys with escapes are all looked at)."""
QUOTED_KEY_END: Final = r'[^"\\]*\\"[ \t\n\r]*[:=]'
"""After a key word: the rest of a key inside a string (JSON text in it), its escaped quote and
``:`` or ``=``. Also the one way an assignment's anchor can match in a string's decoded text
and not in its escaped form (an assignment's quote before ``:``/``=``)."""
OPENERS: Final = (r'"[\[{]', r'" +[\[{]')
r"""An opening quote before a JSON opener: a string that may hold JSON text. (Two expressions:
as one, ``" *[\[{]``, Vectorscan 5.4.12 misses and misplaces some of its matches in this
database; a test compares the database with each expression alone.)"""
_MARK: Final = "\x00"
"""The root of a walk inside one string: replaced by that string's path when it is read."""
_BLANKS: Final = " \t\n\r"
_INT: Final = re.compile(r"-?[0-9]+")
_BRACKETS: Final = {c: None for c in range(128) if chr(c) not in '[]{}"'}
"""Deletes all but quotes and brackets (and non-ASCII characters: inside strings only)."""
_INNERMOST: Final = re.compile(r"\[\]|\{\}")
_scan_value: Callable[[str, int], tuple[Any, int]] = make_scanner(json.JSONDecoder())  # pyright: ignore[reportArgumentType]
_TOKEN: Final = re.compile(
    r'[ \t\n\r]*(?:"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]|[^ \t\n\r\[\]{},:"]+)'
)


class NeedsWalker(Exception):
    """The text needs a walker (see the module's docstring)."""


_Fallback = NeedsWalker


def expressions() -> list[tuple[str, bool]]:
    """The engine expressions the raw path adds to the value rules' anchors: the key words
    (case-insensitive, look-alike spellings) before ``KEY_END``, the same before
    ``QUOTED_KEY_END``, then ``OPENERS``."""
    words = [hs_text(v) for w in KEY_WORDS for v in spellings(w)]
    out = [(w + KEY_END, True) for w in words]
    out += [(w + QUOTED_KEY_END, True) for w in words]
    out += [(o, False) for o in OPENERS]
    return out


def _key_exprs() -> int:
    return sum(len(spellings(w)) for w in KEY_WORDS)


class RawJson:
    """``FastPath.scrub`` for long JSON text (``scrub`` returns ``None``: use a walker)."""

    def __init__(
        self, fast: FastPath, auto: Automaton, n_value: int, batch: type[TextBatch]
    ) -> None:
        self.fast = fast
        self.batch = batch
        self.auto = auto
        self.n_value = n_value
        """Expressions below this index are the value rules' (``FastPath.targets``)."""
        self.n_keys = n_value + _key_exprs()
        """From ``n_value`` up to this index: ``KEY_END`` expressions (they end at a colon)."""
        self.opener = n_value + len(expressions()) - len(OPENERS)
        """From this index: ``OPENERS``."""

    def scrub(self, s: str, root: str) -> tuple[str, list[TrailEntry]] | None:
        scrubber = self.fast.s
        o = scrubber.options
        if self.fast.always_user or o.keys or len(s) > o.max_string_chars:
            return None
        head = min(len(s), _HEAD_CHARS)
        if s.count('"', 0, head) * _MEAN_STRING_CHARS < head:
            # a few long strings (code, a document): the walker decodes them and scans them
            # once, where the raw path would scan the text twice (its own scan, then theirs);
            # judged on the text's head (counting quotes in 400 KB costs 0.1 ms)
            return None
        try:
            return self._scrub(s, root)
        except NeedsWalker:
            return None

    def _scrub(self, s: str, root: str) -> tuple[str, list[TrailEntry]]:
        fast = self.fast
        scrubber = fast.s
        o = scrubber.options
        n = len(s)
        if n + 1 > o.max_nodes:
            # every value but the root follows one of these (JSON in a string: its quote)
            bound = 1 + s.count("[") + s.count(",") + s.count(":") + s.count('"')
            if bound > o.max_nodes:
                raise _Fallback
        data = s.encode("utf-8", "surrogatepass")
        try:
            jiter.from_json(data, cache_mode=False, catch_duplicate_keys=True)
        except ValueError:
            raise _Fallback from None
        hits = self.auto.scan(data)
        if len(data) != n:
            hits = _char_ends(s, hits)
        else:
            hits.sort()
        escaped = "\\" in s
        # every quote left is a string's own (escaped ones and escaped backslashes blanked)
        t = s.replace("\\\\", "__").replace('\\"', "__") if escaped else s
        depth = self._depth(t, o.max_depth - 1)
        # the strings to look at: start quote -> [end quote, value-rule hits, any hit]
        tokens: dict[int, list[Any]] = {}
        numbers: list[int] = []
        quotes = 0
        prev = 0
        n_value = self.n_value
        n_keys = self.n_keys
        opener = self.opener
        for end, expr in hits:
            p = end - 1
            quotes += t.count('"', prev, p)
            prev = p
            if t[p] == '"':
                continue  # (a match that ends on a quote is no string's own)
            if not quotes % 2:  # outside strings: numbers, and keys' colons
                if expr < n_value:
                    if "0" <= s[p] <= "9":
                        numbers.append(p)
                elif expr < n_keys:
                    b = t.rfind('"', 0, p)
                    a = t.rfind('"', 0, b)
                    # (a key with a value-rule match in it is there already)
                    if a not in tokens and scrubber.key_category(t[a + 1 : b]) is not None:
                        tokens[a] = [b, [], True]
                continue
            a = t.rfind('"', 0, p)
            got = tokens.get(a)
            if got is None:
                got = tokens[a] = [t.find('"', p), [], False]
            if expr < n_value:
                got[1].append((end - a - 1, expr))
            if expr < opener:  # (an opener alone: JSON text, perhaps, to look at)
                got[2] = True
        if escaped:
            i = s.find("\\")
            while i >= 0:
                a = t.rfind('"', 0, i)
                b = t.find('"', i)
                if a not in tokens:
                    tokens[a] = [b, [], False]
                i = s.find("\\", b)
        patches: list[tuple[int, int, str, list[TrailEntry]]] = []
        paths = _Paths(s, root)
        batch = self.batch(fast)
        walked: list[tuple[int, int]] = []
        below = depth + 1
        cut_end = -1
        starts = sorted(tokens)
        number_at = 0
        room = o.max_depth - 2 - depth  # for JSON text in a string, at the deepest level
        for a in starts:
            b, found, hit = tokens[a]
            # numbers before this string
            while number_at < len(numbers) and numbers[number_at] < a:
                cut_end = self._number(s, numbers[number_at], cut_end, patches, paths)
                number_at += 1
            if a < cut_end:
                continue
            content = s[a + 1 : b]
            plain = s.find("\\", a + 1, b) < 0
            after = _skip(s, b + 1)
            if after < n and s[after] == ":":  # a key: the key-name rule reads every one
                text = content if plain else json.loads(s[a : b + 1])
                cut_end = self._key(s, a, text, found, plain, after, patches, paths)
                continue
            if (
                not (plain or hit)
                and "\\" not in content.replace('\\"', "")
                and content.count("[") + content.count("{") <= room
            ):
                # Escaped quotes only, and no match of any expression in it: the strings in
                # its decoded text (JSON text or not) have none either (QUOTED_KEY_END), and
                # it is too shallow for a depth cut
                continue
            text = content if plain else json.loads(s[a : b + 1])
            c = text[:1]
            if not plain or c in JSON_OPENERS or (c.isspace() and text.lstrip()[:1] in "{["):
                # as the walkers would meet it, at the deepest level (a depth cut needs the
                # real one: see below)
                batch.add(text, f"{_MARK}{len(walked)}{_MARK}", below)
                walked.append((a, b))
            elif found:
                spans = fast.confirm(text, found, True)
                if spans:
                    patches.append(
                        (a, b + 1, _dumps(replaced(text, spans)), _entries(paths, a, spans))
                    )
        while number_at < len(numbers):
            cut_end = self._number(s, numbers[number_at], cut_end, patches, paths)
            number_at += 1
        if walked:
            self._walked(batch, walked, patches, paths)
        if not patches:
            return s, []
        patches.sort(key=lambda p: p[0])
        out: list[str] = []
        trail: list[TrailEntry] = []
        pos = 0
        for a, b, new, entries in patches:
            out.append(s[pos:a])
            out.append(new)
            trail.extend(entries)
            pos = b
        out.append(s[pos:])
        return "".join(out), trail

    @staticmethod
    def _depth(t: str, limit: int) -> int:
        """The deepest container's nesting level (the root's: 1); ``_Fallback`` past ``limit``."""
        opens = t.count("[") + t.count("{")
        if opens <= limit:
            return opens
        # quotes and brackets only; dropping two adjacent quotes keeps every other character
        # inside or outside strings, and most strings hold no bracket
        small = t.translate(_BRACKETS).replace('""', "")
        brackets = "".join(small.split('"')[::2]) if '"' in small else small
        level = 0
        while brackets:
            level += 1
            if level > limit:
                raise _Fallback
            brackets = _INNERMOST.sub("", brackets)  # (one pass: the pairs it had)
        return level

    def _key(  # noqa: PLR0917
        self,
        s: str,
        a: int,
        key: str,
        found: list[tuple[int, int]],
        plain: bool,
        colon: int,
        patches: list[tuple[int, int, str, list[TrailEntry]]],
        paths: _Paths,
    ) -> int:
        """A key: a removal in it needs a walker (keys rename paths); a sensitive one has its
        value replaced. Returns the end of the replaced value (or -1)."""
        fast = self.fast
        spans = fast.confirm(key, found, True) if plain else fast.find(key)
        if spans:
            raise _Fallback
        cat = fast.s.key_category(key)
        if cat is None:
            return -1
        v0 = _skip(s, colon + 1)
        value, v1 = _scan_value(s, v0)
        if not fast.s.hidden_by_key(value):
            return -1
        reason = f"key:{cat}"
        entry = TrailEntry.lazy(paths.at(v0), reason)
        patches.append((v0, v1, _dumps(placeholder(reason)), [entry]))
        return v1

    @staticmethod
    def _walked(
        batch: TextBatch,
        walked: list[tuple[int, int]],
        patches: list[tuple[int, int, str, list[TrailEntry]]],
        paths: _Paths,
    ) -> None:
        """The strings the fast walker scrubbed, patched in, their removals under their paths."""
        out, trail = batch.finish()
        per: dict[int, list[TrailEntry]] = {}
        for e in trail:
            if e.rule == "depth":
                raise _Fallback  # (met at the deepest level: perhaps not at its own)
            tag = e.path[1:].partition(_MARK)[0]
            per.setdefault(int(tag), []).append(e)
        for i, entries in per.items():
            a, b = walked[i]
            base = paths.at(a)
            lazy = [TrailEntry.lazy(_under(base, e), e.rule) for e in entries]
            patches.append((a, b + 1, _dumps(out[i]), lazy))

    def _number(
        self,
        s: str,
        p: int,
        cut_end: int,
        patches: list[tuple[int, int, str, list[TrailEntry]]],
        paths: _Paths,
    ) -> int:
        """A digit outside strings: an integer of ``BIG_INT`` or more is checked as text."""
        a = p
        while a > 0 and s[a - 1] in "0123456789-":
            a -= 1
        if a < cut_end or (patches and a < patches[-1][1]):
            return cut_end
        m = _INT.match(s, a)
        if m is None or (m.end() < len(s) and s[m.end()] in ".eE"):
            return cut_end
        v = int(m.group())
        if -BIG_INT < v < BIG_INT:
            return cut_end
        text = str(v)
        spans: list[Span] = self.fast.find(text)
        if spans:
            patches.append((a, m.end(), _dumps(replaced(text, spans)), _entries(paths, a, spans)))
            return m.end()
        return cut_end


def _under(base: Callable[[], str], entry: TrailEntry) -> Callable[[], str]:
    """The path of ``entry`` (a removal inside a decoded string) under the string's path."""
    return lambda: base() + entry.path.partition(_MARK)[2].partition(_MARK)[2]


def _skip(s: str, i: int) -> int:
    """Past the JSON white space at ``i``."""
    n = len(s)
    while i < n and s[i] in _BLANKS:
        i += 1
    return i


def _dumps(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _entries(paths: _Paths, a: int, spans: list[Span]) -> list[TrailEntry]:
    at = paths.at(a)
    return [TrailEntry.lazy(at, name) for _, _, name in spans]


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


class _Paths:
    """The paths of values in one JSON text, by position, worked out together when one is
    first read (a tokenising pass in Python: only readers of a trail's paths pay for it)."""

    __slots__ = ("_done", "_root", "_s", "_wanted")

    def __init__(self, s: str, root: str) -> None:
        self._s = s
        self._root = root
        self._wanted: list[int] = []
        self._done: dict[int, str] | None = None

    def at(self, pos: int) -> Any:
        """A function giving the path of the value that starts at ``pos``."""
        self._wanted.append(pos)
        return lambda: self._resolve()[pos]

    def _resolve(self) -> dict[int, str]:
        if self._done is None:
            self._done = _value_paths(self._s, self._root, set(self._wanted))
        return self._done


def _value_paths(s: str, root: str, wanted: set[int]) -> dict[int, str]:
    """``{position: path}`` for the values of JSON text ``s`` that start at ``wanted``."""
    out: dict[int, str] = {}
    # frames: [is_object, path of the container, index or key, expecting a key]
    frames: list[list[Any]] = []
    last = max(wanted, default=-1)
    for m in _TOKEN.finditer(s):
        tok = m.group().lstrip(" \t\n\r")
        pos = m.end() - len(tok)
        if pos > last:
            break
        c = tok[0]
        if c in ",:":
            if c == "," and frames:
                frame = frames[-1]
                if frame[0]:
                    frame[3] = True
                else:
                    frame[2] += 1
            continue
        if c in "]}":
            frames.pop()
            continue
        if frames and frames[-1][0] and frames[-1][3]:  # a key
            frames[-1][2] = json.loads(tok)
            frames[-1][3] = False
            continue
        path: Any = root if not frames else (frames[-1][1], frames[-1][2])
        if pos in wanted:
            out[pos] = render_path(path)
        if c == "{":
            frames.append([True, path, None, True])
        elif c == "[":
            frames.append([False, path, 0, False])
    return out
