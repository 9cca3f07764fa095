"""Per-anchor definitions the analyses share (pure Python, applied once per anchor as it is copied).

* ``normalize_intent``: NFKC, case-folded, every run of digits becomes ``#``, every run of other
  characters that are not letters/digits/``#`` becomes one space, trimmed; ``None`` when nothing
  is left. A literal ``#`` stays (``C#`` is a word): ``"Reading C# docs"`` -> ``"reading c# docs"``;
  ``"Reading src/app_2.py"`` -> ``"reading src app # py"``.
* ``leading_phrase``: the first ``words`` words of the normalized intent.
* ``canonical_args``: the args JSON parsed and re-serialized with sorted keys and no whitespace
  (so key order and spacing do not make two calls different); text that is not JSON stays as is.
* ``intent_hidden``: the redaction record says the policy hid the intent.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

import orjson

_DIGITS: Final = re.compile(r"\d+")
_SEPARATORS: Final = re.compile(r"(?:[^\w#]|_)+")
_HIDDEN: Final = re.compile(r'"intent_hidden"\s*:\s*true')


def normalize_intent(intent: str | None) -> str | None:
    """The normalized form of an intent (see the module docstring); None when empty."""
    if not intent:
        return None
    text = unicodedata.normalize("NFKC", intent).casefold()
    text = _DIGITS.sub("#", text)
    text = " ".join(_SEPARATORS.sub(" ", text).split())
    return text or None


def leading_phrase(normalized: str | None, words: int) -> str | None:
    """The first ``words`` words of a normalized intent."""
    if not normalized:
        return None
    return " ".join(normalized.split(" ")[: max(1, words)])


def word_count(normalized: str | None) -> int:
    """Words in a normalized intent (0 for none)."""
    return len(normalized.split(" ")) if normalized else 0


def canonical_args(args: str | None) -> str | None:
    """The args JSON with sorted keys and no whitespace; text that is not JSON as is (it can
    never equal the canonical form of JSON, which is itself JSON)."""
    if args is None:
        return None
    try:
        # decoded at once: orjson's output buffers, kept by the hundred thousand, cost several
        # times the parse itself in allocator work; the str copy does not
        return orjson.dumps(orjson.loads(args), option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return args
    except TypeError:  # e.g. an integer beyond 64 bits: keep the text
        return args


def intent_hidden(redaction: str | None) -> bool:
    """Whether the redaction record says the intent was hidden by the policy."""
    return bool(redaction) and _HIDDEN.search(redaction or "") is not None


_ARGS_REDACTED: Final = re.compile(r'"args"\s*:\s*"redact"')


def args_redacted(redaction: str | None) -> bool:
    """Whether the redaction record says the args were replaced by a placeholder."""
    return bool(redaction) and _ARGS_REDACTED.search(redaction or "") is not None


def names_tool(normalized: str | None, tool_name: str) -> bool:
    """Whether a normalized intent names its own tool (``"Running read_file"``)."""
    tool = normalize_intent(tool_name)
    if not normalized or not tool:
        return False
    return f" {tool} " in f" {normalized} "


PHRASE_WORDS: Final = 2
"""Words in an intent's leading phrase (``"Searching for OAuth handling"`` -> ``searching for``)."""


# --- information an intent carries, across scripts ----------------------------------------------
# Scripts written without spaces between words: every character is a token of its own (a word
# boundary cannot be told without a dictionary; single characters are what a tool's other
# intents can be compared on). Weights: a character's information relative to a Latin letter
# (a Han character is about a word, a kana or a Hangul syllable about a syllable).
_PER_CHAR: Final[tuple[tuple[int, int, int], ...]] = (
    (0x0E00, 0x0EFF, 1),  # Thai, Lao
    (0x1000, 0x109F, 1),  # Myanmar
    (0x1780, 0x17FF, 1),  # Khmer
    (0x3040, 0x30FF, 2),  # Hiragana, Katakana
    (0x3400, 0x4DBF, 3),  # Han, extension A
    (0x4E00, 0x9FFF, 3),  # Han
    (0xF900, 0xFAFF, 3),  # Han compatibility
    (0x20000, 0x3FFFF, 3),  # Han, extensions B and later
)
_HANGUL: Final = (0xAC00, 0xD7AF)
HANGUL_WEIGHT: Final = 2


def _per_char_weight(ch: str) -> int:
    """The weight of a character of a script written without spaces (0: not one)."""
    code = ord(ch)
    if code < 0x0E00:
        return 0
    for low, high, weight in _PER_CHAR:
        if low <= code <= high:
            return weight
    return 0


NAME_JOINER: Final = "/"
"""Joins the parts of a name into one token (a normalized intent never holds it)."""
_NAME: Final = re.compile(r"(?<![0-9a-z\u00c0-\u024f])[0-9a-z]+(?:[/\\.:_][0-9a-z]+)+")
"""A name in an intent as written (NFKC, case-folded): letters or digits joined by ``/``,
``\\``, ``.``, ``:`` or ``_`` without a space: a path, a file name, a module, an identifier."""
_NAME_CHARS: Final = frozenset("/\\.:_")


def _script_tokens(normalized: str) -> list[str]:
    """The words of a normalized text, with every character of a script written without spaces
    on its own."""
    if normalized.isascii():
        return normalized.split(" ")
    out: list[str] = []
    for word in normalized.split(" "):
        run: list[str] = []
        for ch in word:
            if _per_char_weight(ch):
                if run:
                    out.append("".join(run))
                    run = []
                out.append(ch)
            else:
                run.append(ch)
        if run:
            out.append("".join(run))
    return out


def _name_spans(intent: str | None) -> tuple[str, list[tuple[int, int]]]:
    """The intent NFKC-normalized and case-folded, and where the names are in it (a name
    holds a letter: ``3.12`` is a number, ``v3.12`` a name)."""
    if not intent or _NAME_CHARS.isdisjoint(intent):
        return "", []
    text = unicodedata.normalize("NFKC", intent).casefold()
    spans = [m.span() for m in _NAME.finditer(text) if any(c.isalpha() for c in m.group())]
    return text, spans


def intent_tokens(normalized: str | None, intent: str | None = None) -> str | None:
    """The tokens of a normalized intent, space-separated: its words, every character of a
    script written without spaces on its own (``"todoを検索"`` -> ``"todo を 検 索"``), and each
    name of the intent as written (``intent``: ``src/db.py``, ``user_id``, ``os.path``) one
    token, its parts joined by ``NAME_JOINER`` (``"reading src/db.py"`` -> ``"reading
    src/db/py"``). None when they are the words of the normalized intent themselves (the common
    case, stored as NULL)."""
    if not normalized:
        return None
    text, spans = _name_spans(intent)
    if not spans:
        if normalized.isascii():  # no script written without spaces
            return None
        tokens = _script_tokens(normalized)
        return " ".join(tokens) if len(tokens) != normalized.count(" ") + 1 else None
    out: list[str] = []
    at = 0
    for start, end in [*spans, (len(text), len(text))]:
        gap = normalize_intent(text[at:start])
        if gap:
            out.extend(_script_tokens(gap))
        name = normalize_intent(text[start:end])
        if name:
            out.append(NAME_JOINER.join(name.split(" ")))
        at = end
    return " ".join(out)


def is_name(token: str) -> bool:
    """Whether a token (``intent_tokens``) is a name."""
    return NAME_JOINER in token


def information(normalized: str | None) -> int:
    """The information of a normalized intent in Latin-letter equivalents: every letter, digit
    run (``#``) or other character 1, a kana 2, a Hangul syllable 2, a Han character 3; spaces
    0 (``"reading"`` 7, ``"検索中"`` 9, ``"ファイル"`` 8)."""
    if not normalized:
        return 0
    if normalized.isascii():  # every character 1, spaces (and a name's joiners) 0
        return len(normalized) - normalized.count(" ") - normalized.count(NAME_JOINER)
    total = 0
    for ch in normalized:
        if ch in (" ", NAME_JOINER):
            continue
        weight = _per_char_weight(ch)
        if not weight:
            weight = HANGUL_WEIGHT if _HANGUL[0] <= ord(ch) <= _HANGUL[1] else 1
        total += weight
    return total


def information_sql(expr: str) -> str:
    """DuckDB SQL computing ``information`` of the text ``expr`` (the same weights)."""
    ranges = " ".join(
        f"WHEN unicode(ch) BETWEEN {low} AND {high} THEN {weight}"
        for low, high, weight in _PER_CHAR
    )
    hangul = f"WHEN unicode(ch) BETWEEN {_HANGUL[0]} AND {_HANGUL[1]} THEN {HANGUL_WEIGHT}"
    return (
        f"coalesce(list_sum(list_transform(string_split({expr}, ''), lambda ch: "
        f"CASE WHEN ch = ' ' OR ch = '{NAME_JOINER}' THEN 0 {ranges} {hangul} ELSE 1 END)), 0)"
    )
