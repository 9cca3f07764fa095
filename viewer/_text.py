"""The viewer's one display sanitizer: everything model- or tool-written passes through here.

Intents, outcomes, labels, tool names, agent and session ids, args, results, errors, analytics
cells and axis values: control characters and terminal escapes are removed, bidi embeddings,
overrides and isolates are neutralised (removed: ``invoice\\u202egnp.exe`` shows as
``invoicegnp.exe``), lone surrogates dropped. Three shapes:

- ``one_line``: one line (``sanitize_label``), cut with ``…``.
- ``short_label``: a call's label as a list row shows it: the intent cut to ``INTENT_CHARS``
  with its framing (`` · failed``, `` · in background`` …) kept at the end.
- ``block``: multi-line text (errors, payloads): newlines and tabs kept.
- ``structure``: parsed JSON keeps its structure, every key and string sanitized.
- ``frame``: a table's text cells.

Never raises (the pages call it on every render).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, cast

import pandas as pd

from tracing import sanitize_label
from tracing.status import (
    FRAME_ABANDONED,
    FRAME_BACKGROUND,
    FRAME_CANCELLED,
    FRAME_ERROR,
    FRAME_TIMED_OUT,
)

INTENT_CHARS: Final = 120
"""Longest intent (or outcome) shown in a one-line row; the framing comes on top."""
LINE_CHARS: Final = 160
"""Longest other one-line text (session ids, agent lists)."""
FRAMES: Final = (FRAME_ERROR, FRAME_CANCELLED, FRAME_BACKGROUND, FRAME_ABANDONED, FRAME_TIMED_OUT)
"""Label endings that say how a call ended; a cut label keeps them."""

# ESC/CSI/OSC-style sequences (their visible text after them is kept), then single controls
# other than newline and tab, bidi embeddings/overrides/isolates, and lone surrogates.
_ESCAPES: Final = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
)
_REMOVE: Final = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NEWLINES: Final = re.compile(r"\r\n?|[\u2028\u2029\x85]")
_SURROGATE_PAIRS: Final = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")


def _join_pair(m: re.Match[str]) -> str:
    return m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def one_line(text: object, max_chars: int = LINE_CHARS) -> str:
    """Stored text as one plain line, cut with ``…`` (``sanitize_label``)."""
    if text is None:
        return ""
    return sanitize_label(text if isinstance(text, str) else str(text), max_chars=max_chars)


def short_label(label: object, max_chars: int = INTENT_CHARS) -> str:
    """A label on one line with its intent cut to ``max_chars`` and its framing kept.

    ``"<10 KB intent> · failed"`` shows as ``"<first ~120 chars>… · failed"``.
    """
    text = "" if label is None else str(label).rstrip()
    for frame in FRAMES:
        if text.endswith(frame):
            head = one_line(text[: -len(frame)], max_chars)
            if head:
                return head + frame
    return one_line(text, max_chars)


def block(text: object) -> str:
    """Multi-line stored text (errors, payloads): newlines and tabs kept, nothing else hidden."""
    if text is None:
        return ""
    value = text if isinstance(text, str) else str(text)
    try:
        value = _NEWLINES.sub("\n", value)
        value = _ESCAPES.sub("", value)
        value = _SURROGATE_PAIRS.sub(_join_pair, value)
        return _REMOVE.sub("", value)
    except Exception:  # pragma: no cover - defensive: a page never fails on stored text
        return one_line(value)


def structure(value: Any) -> Any:
    """Parsed JSON with every key and string sanitized (``block``); structure kept."""
    if isinstance(value, str):
        return block(value)
    if isinstance(value, Mapping):
        items = cast("Mapping[Any, Any]", value)
        out: dict[str, Any] = {}
        for k, v in items.items():
            key = block(str(k))
            while key in out:  # two keys that differ only by removed characters: keep both
                key += "\u00b7"
            out[key] = structure(v)
        return out
    if isinstance(value, list | tuple):
        seq = cast("list[Any] | tuple[Any, ...]", value)
        return [structure(v) for v in seq]
    return value


def cell(value: Any) -> Any:
    """One table cell: text on one line (long text cut), lists joined, other values kept."""
    if isinstance(value, str):
        return one_line(value, 4096)
    if isinstance(value, list | tuple):
        seq = cast("list[Any] | tuple[Any, ...]", value)
        return ", ".join(one_line(v, 4096) for v in seq)
    return value


def frame(data: pd.DataFrame) -> pd.DataFrame:
    """A table with its text cells sanitized (numbers and times untouched; column names are
    ours: dashboard definitions and page code)."""
    out = data.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = out[column].map(cell)
    return out


__all__ = [
    "FRAMES",
    "INTENT_CHARS",
    "LINE_CHARS",
    "block",
    "cell",
    "frame",
    "one_line",
    "short_label",
    "structure",
]
