"""Tool-call args and results as conventions keep them: JSON text (possibly truncated), bare or
wrapped (``{"args": [...], "kwargs": {...}}`` and kin); the intent in a prefix; outcomes in results.

Pure functions, never parsing more than they need. No OpenTelemetry import here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

import jiter

from tracing.intent._schema import INTENT_ARG

PREFIX_CHARS: Final = 8192
"""How much of a JSON text is parsed to find the intent (it is written first)."""
FULL_PARSE_MAX_CHARS: Final = 4_000_000
"""Larger texts are never fully parsed (only their prefix)."""


def parse_json(value: Any, *, max_chars: int | None = None) -> Any:
    """Parse JSON text (``str``/``bytes``), tolerating truncation; other values pass through.

    With ``max_chars`` only that prefix is parsed (incomplete trailing strings are dropped, so
    a string present in the result is complete). Returns None when the text is not JSON.
    """
    if not isinstance(value, str | bytes):
        return value
    text = value
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars]
    elif max_chars is None and len(text) > FULL_PARSE_MAX_CHARS:
        text = text[:FULL_PARSE_MAX_CHARS]
    stripped = text.lstrip()
    if not stripped or stripped[:1] not in ("{", "[", b"{", b"["):
        return None
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    try:
        return jiter.from_json(data, partial_mode=True)
    except ValueError:
        try:
            return json.loads(text, strict=False)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None


def unwrap_args(parsed: Any) -> tuple[Mapping[str, Any] | None, Sequence[Any] | None]:
    """The keyword and positional args of a parsed args value.

    Conventions wrap them as ``{"kwargs": {...}}`` or ``{"args": [...], "kwargs": {...}}``
    (OpenInference, Traceloop, Langfuse); a bare object is the keyword args; a list the
    positional ones.
    """
    if isinstance(parsed, Mapping):
        mapping = cast("Mapping[str, Any]", parsed)
        keys = set(mapping)
        if keys and keys <= {"args", "kwargs"}:
            kwargs = mapping.get("kwargs")
            args = mapping.get("args")
            kw = cast("Mapping[str, Any]", kwargs) if isinstance(kwargs, Mapping) else None
            pos = cast("Sequence[Any]", args) if isinstance(args, list | tuple) else None
            if kw is not None or pos is not None:
                return kw, pos
        return mapping, None
    if isinstance(parsed, list | tuple):
        return None, cast("Sequence[Any]", parsed)
    return None, None


def args_mapping(raw: Any, *, max_chars: int | None = None) -> Mapping[str, Any] | None:
    """The keyword args of a raw args value (parsed, unwrapped), or None."""
    kwargs, _ = unwrap_args(parse_json(raw, max_chars=max_chars))
    return kwargs


ArgsPath = tuple[str | int, ...]
"""Where a value sits inside parsed args: mapping keys and list indexes, outermost first."""

WRAPPER_KEYS: Final = ("kwargs", "args", "input", "inputs", "arguments")
"""Members of a mapping that may wrap the call's args (any other members beside them are
flags, e.g. ``sanitize_inputs_outputs``); searched in this order."""
MAX_WRAP_DEPTH: Final = 6
"""How deep the intent is looked for: each wrapper member and each first list item is a level
(``{"args": [{"intent": ...}]}`` is two)."""


def _at(parsed: Any, path: ArgsPath) -> Any:
    """The value at ``path`` inside ``parsed``, or None."""
    node = parsed
    for step in path:
        if isinstance(step, int) and isinstance(node, list | tuple):
            seq = cast("Sequence[Any]", node)
            if not -len(seq) <= step < len(seq):
                return None
            node = seq[step]
        elif isinstance(step, str) and isinstance(node, Mapping):
            node = cast("Mapping[str, Any]", node).get(step)
        else:
            return None
    return node


def _locate(
    node: Any,
    read: Callable[[Any], str | None],
    path: ArgsPath,
    depth: int,
    positional: bool,
) -> tuple[str, ArgsPath] | None:
    """The rule: a mapping's own intent, else the first of its wrapper members that holds one;
    a list's first item (a non-blank string when the list is positional args, or a mapping)."""
    if isinstance(node, Mapping):
        mapping = cast("Mapping[str, Any]", node)
        found = read(mapping)
        if found:
            return found, (*path, INTENT_ARG)
        if depth >= MAX_WRAP_DEPTH:
            return None
        for key in WRAPPER_KEYS:
            inner = mapping.get(key)
            if isinstance(inner, Mapping | list | tuple):
                hit = _locate(inner, read, (*path, key), depth + 1, key == "args")
                if hit is not None:
                    return hit
        return None
    if isinstance(node, list | tuple):
        items = cast("Sequence[Any]", node)
        if not items:
            return None
        first = items[0]
        if positional and isinstance(first, str) and first.strip():
            return first, (*path, 0)
        if isinstance(first, Mapping) and depth < MAX_WRAP_DEPTH:
            return _locate(first, read, (*path, 0), depth + 1, False)
    return None


def locate_intent(
    parsed: Any, *, read: Callable[[Any], str | None], path: ArgsPath | None = None
) -> tuple[str, ArgsPath] | None:
    """``(raw intent, its path)`` in parsed args, or None.

    The rule (not a list of shapes): a mapping's own ``intent``; else the first of its
    ``kwargs``/``args``/``input``/``arguments`` members that holds one, whatever else the
    mapping carries (``{"args": [], "kwargs": {...}, "sanitize_inputs_outputs": true}``),
    recursively up to ``MAX_WRAP_DEPTH`` levels; the first positional argument when it is a
    mapping, or a non-blank string (``def tool(intent, ...)`` under Langfuse ``@observe``).
    ``path`` (a convention's ``args_path``) names where the args are: searched there first.
    """
    if path:
        hit = _locate(_at(parsed, path), read, path, 0, True)
        if hit is not None:
            return hit
    return _locate(parsed, read, (), 0, True)


def without_path(parsed: Any, path: ArgsPath) -> Any:
    """A copy of ``parsed`` without the member or item at ``path`` (only the containers along
    the path are copied); ``parsed`` itself when the path does not resolve."""
    if not path:
        return parsed
    step, rest = path[0], path[1:]
    if isinstance(step, str) and isinstance(parsed, Mapping):
        mapping = cast("Mapping[str, Any]", parsed)
        if step not in mapping:
            return mapping
        if not rest:
            return {k: v for k, v in mapping.items() if k != step}
        return {**mapping, step: without_path(mapping[step], rest)}
    if isinstance(step, int) and isinstance(parsed, list | tuple):
        items = list(cast("Sequence[Any]", parsed))
        if not 0 <= step < len(items):
            return items
        if not rest:
            del items[step]
        else:
            items[step] = without_path(items[step], rest)
        return items
    return parsed


def _cut_member(text: str, intent: str) -> str:
    """``text`` without an ``intent`` member whose value is ``intent``, as JSON or a Python repr
    spells it (``{'intent': 'Reading x', 'path': 'x'}``), with its separating comma."""
    for quoted in dict.fromkeys(
        (json.dumps(intent), json.dumps(intent, ensure_ascii=False), repr(intent))
    ):
        for key in (f'"{INTENT_ARG}"', f"'{INTENT_ARG}'"):
            member = f"{key}: {quoted}"
            at = text.find(member)
            if at < 0:
                continue
            end = at + len(member)
            if text.startswith(", ", end):  # a member with more after it
                return text[:at] + text[end + 2 :]
            if text.endswith(", ", 0, at):  # the last member
                return text[: at - 2] + text[end:]
            return text[:at] + text[end:]
    return text


def args_without_intent(parsed: Any, path: ArgsPath) -> Any:
    """``without_path(parsed, path)``, and the intent found there cut out of the string members
    beside the path that spell the args out as text (Traceloop's LangChain ``input_str``, a
    Python repr of the args beside them as ``inputs``): the ledger keeps no copy of the intent."""
    intent = _at(parsed, path)
    stripped = without_path(parsed, path)
    if not isinstance(intent, str) or not intent:
        return stripped
    return _cut_echoes(stripped, path[:-1], intent)


def _cut_echoes(node: Any, path: ArgsPath, intent: str) -> Any:
    if isinstance(node, Mapping):
        mapping = cast("Mapping[str, Any]", node)
        inner = path[0] if path else None
        return {
            k: (
                _cut_echoes(v, path[1:], intent)
                if k == inner
                else _cut_member(v, intent)
                if isinstance(v, str) and INTENT_ARG in v
                else v
            )
            for k, v in mapping.items()
        }
    if path and isinstance(path[0], int) and isinstance(node, list | tuple):
        items = list(cast("Sequence[Any]", node))
        if 0 <= path[0] < len(items):
            items[path[0]] = _cut_echoes(items[path[0]], path[1:], intent)
        return items
    return node


def locate_candidate(
    raw: Any,
    *,
    read: Callable[[Any], str | None],
    max_chars: int | None = PREFIX_CHARS,
    path: ArgsPath | None = None,
) -> tuple[str, ArgsPath] | None:
    """``(raw intent, its path)`` in a raw args value (JSON text, mapping or list), or None.
    Never raises. See ``intent_candidate``."""
    try:
        if raw is None:
            return None
        if isinstance(raw, str | bytes) and not path:
            text = raw
            head = text.lstrip()[:1]
            if head in ("{", b"{"):
                # fast path: a bare object whose first key is the intent
                found = read(text[:max_chars] if max_chars is not None else text)
                if found:
                    return found, (INTENT_ARG,)
        return locate_intent(parse_json(raw, max_chars=max_chars), read=read, path=path)
    except Exception:
        return None


def intent_candidate(
    raw: Any,
    *,
    read: Callable[[Any], str | None],
    max_chars: int | None = PREFIX_CHARS,
    path: ArgsPath | None = None,
) -> str | None:
    """The raw intent text in a raw args value, or None. Never raises.

    ``read`` is ``tracing.read_intent`` (what counts as an intent is decided there). JSON text
    is parsed only up to ``max_chars`` (the intent is the first property, so a 400 KB args
    text costs what a 1 KB one does). Where it is looked for is ``locate_intent``'s rule
    (wrappers, a first positional mapping or string); ``path`` names the args' place first.
    Callers apply the label-bearing gate.
    """
    hit = locate_candidate(raw, read=read, max_chars=max_chars, path=path)
    return hit[0] if hit is not None else None


def _payloads(parsed: Any, depth: int = 0) -> list[Mapping[str, Any]]:
    """The mapping a result is, and those inside message envelopes: ``{"content": "<json>"}``,
    ``{"data": {"content": ...}}`` (LangChain messages), ``{"kwargs": {"content": ...}}``,
    ``{"output": <message>}`` (Traceloop's LangChain tool output), ``{"result": <value>}``
    (Google ADK's wrapper of a tool's non-mapping return, e.g. a JSON text),
    MCP ``{"content": [{"type": "text", "text": "<json>"}]}``, a JSON string of JSON text."""
    if depth > 3:
        return []
    if isinstance(parsed, str):  # a JSON text encoded once more (DSPy's tool output)
        return _payloads(parse_json(parsed), depth + 1)
    if isinstance(parsed, list):
        out: list[Mapping[str, Any]] = []
        for item in cast("list[Any]", parsed)[:8]:
            if isinstance(item, Mapping):
                text = cast("Mapping[str, Any]", item).get("text")
                if isinstance(text, str):
                    out.extend(_payloads(parse_json(text), depth + 1))
        return out
    if not isinstance(parsed, Mapping):
        return []
    mapping = cast("Mapping[str, Any]", parsed)
    found = [mapping]
    for key in ("data", "kwargs", "output"):
        inner = mapping.get(key)
        if isinstance(inner, Mapping):
            found.extend(_payloads(inner, depth + 1))
    result = mapping.get("result")
    if isinstance(result, str) and len(mapping) == 1:  # ADK: {"result": "<json text>"}
        found.extend(_payloads(result, depth + 1))
    content = mapping.get("content")
    if isinstance(content, str):
        found.extend(_payloads(parse_json(content), depth + 1))
    elif isinstance(content, list):
        found.extend(_payloads(content, depth + 1))
    return found


def result_outcome(raw: Any) -> tuple[str | None, Mapping[str, Any] | None]:
    """``(outcome, outcome_patch)`` from a tool result that carries them (JSON or mapping),
    also inside a message envelope (LangChain ``ToolMessage``, MCP text content)."""
    parsed = parse_json(raw, max_chars=FULL_PARSE_MAX_CHARS)
    if parsed is None and isinstance(raw, str) and raw.lstrip()[:1] == '"':
        try:  # a JSON string whose text is the result (DSPy's OpenInference tool output)
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            parsed = None
    for mapping in _payloads(parsed):
        outcome = mapping.get("outcome")
        patch = mapping.get("outcome_patch")
        if not isinstance(outcome, str) or outcome.isspace():
            outcome = None  # an outcome of only white space is no outcome
        if outcome or isinstance(patch, Mapping):
            return (
                outcome or None,
                cast("Mapping[str, Any]", patch) if isinstance(patch, Mapping) else None,
            )
    return None, None


def first_str(d: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The first of ``keys`` whose value in ``d`` is a non-empty string."""
    for key in keys:
        value = d.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def to_json_text(value: Any) -> str | None:
    """A value as JSON text for the ledger (strings pass through as they are)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)
