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
