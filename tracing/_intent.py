"""Intent primitives: inject the ``intent`` property into tool schemas, read it, strip it,
resolve the outcome and make model-written text safe to show.

Pure Python (no OpenTelemetry). ``read_intent``, ``strip_intent``, ``apply_outcome`` and
``sanitize_label`` run on hot paths (span hooks, stream taps) and never raise.
"""

from __future__ import annotations

import json
import os
import re
import threading
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar, cast

import jiter

from tracing._streaming import count_internal_error, read_streaming_intent
from tracing.environment_variables import INTENTRACE_TOOL_INTENT

INTENT_ARG: Final = "intent"
"""Name of the injected argument."""

INTENT_LABEL_MARKER: Final = "ALWAYS write this field FIRST"
"""Opening words of the injected property's description; what tells our property from a tool's
own business parameter named ``intent``."""

INTENT_DESCRIPTION: Final = (
    f"{INTENT_LABEL_MARKER}, before other arguments: one present-progressive sentence "
    "on what THIS call is about to do, shown to the user as its live status. "
    "Never name the tool; sibling calls to one tool must differ."
)
"""Description of the injected property. It rides every tool schema on every request, so it is
kept short (length in docs/intent.md; a test keeps the two in step)."""

_OFF_VALUES: Final = frozenset({"0", "false", "off", "no"})

JSONDict = dict[str, Any]
Exclusion = str | Callable[[str], bool]
"""An exclusion for ``inject_intent``: a tool name, a name prefix ending in ``*``, or a
predicate on the tool name."""

_T = TypeVar("_T")


# --------------------------------------------------------------------------------------------
# schemas


def _plain(value: Any) -> Any:
    """A deep copy of a JSON-like value as plain ``dict``/``list`` (read-only mappings and
    tuples included), so that results never alias the caller's objects."""
    if isinstance(value, Mapping):
        items = cast("Mapping[Any, Any]", value)
        return {k: _plain(v) for k, v in items.items()}
    if isinstance(value, list | tuple):
        seq = cast("Iterable[Any]", value)
        return [_plain(v) for v in seq]
    return value


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    props = schema.get("properties")
    if props is None:
        return {}
    if isinstance(props, Mapping):
        return cast("Mapping[str, Any]", props)
    return None


def _is_object_schema(schema: object) -> bool:
    if not isinstance(schema, Mapping):
        return False
    s = cast("Mapping[str, Any]", schema)
    kind = s.get("type")
    if kind is None:
        # An untyped root is an object only when it says nothing else about its shape.
        if any(k in s for k in ("anyOf", "oneOf", "allOf", "$ref", "enum", "const", "items")):
            return False
    elif kind != "object":
        return False
    return _properties(s) is not None


def has_intent_marker(schema: object) -> bool:
    """Whether ``schema``'s ``intent`` property is the one we inject (its description starts
    with ``INTENT_LABEL_MARKER``).

    Args:
        schema: a JSON Schema (any mapping); anything else gives False.
    """
    if not isinstance(schema, Mapping):
        return False
    props = cast("Mapping[str, Any]", schema).get("properties")
    if not isinstance(props, Mapping):
        return False
    prop = cast("Mapping[str, Any]", props).get(INTENT_ARG)
    if not isinstance(prop, Mapping):
        return False
    description = cast("Mapping[str, Any]", prop).get("description")
    return isinstance(description, str) and description.lstrip().startswith(INTENT_LABEL_MARKER)


def can_inject_intent(schema: object) -> bool:
    """Whether ``with_intent`` can add the label to ``schema``.

    False for a root that is not an object schema and for a schema that already has its own
    (unmarked) ``intent`` property: a business parameter. True for a schema that already
    carries our property (injecting again changes nothing).
    """
    if not _is_object_schema(schema):
        return False
    s = cast("Mapping[str, Any]", schema)
    props = _properties(s) or {}
    return INTENT_ARG not in props or has_intent_marker(s)


def _intent_property() -> JSONDict:
    return {"type": "string", "description": INTENT_DESCRIPTION}


def with_intent(schema: Mapping[str, Any], *, required: bool = False) -> JSONDict:
    """A new JSON Schema with ``intent`` as its FIRST property.

    Never mutates ``schema`` (read-only mappings are fine); the result is a plain ``dict`` that
    shares nothing with the input. Idempotent: when ``schema`` already carries our property it
    comes back unchanged, ``intent`` still first.

    Args:
        schema: an object JSON Schema (``can_inject_intent(schema)`` must be True).
        required: also list ``intent`` in ``required`` (once). Strict function schemas need it.

    Raises:
        ValueError: the schema is not an object schema, or has its own ``intent`` parameter.
    """
    if not can_inject_intent(schema):
        raise ValueError(
            "cannot inject 'intent': the schema is not an object schema or already has its "
            "own 'intent' parameter"
        )
    out: JSONDict = _plain(schema)
    props: JSONDict = out.get("properties") or {}
    existing = props.pop(INTENT_ARG, None)
    out["properties"] = {INTENT_ARG: existing or _intent_property(), **props}
    if "type" not in out:
        out["type"] = "object"
    if required:
        req = out.get("required")
        names: list[Any] = list(cast("Iterable[Any]", req)) if isinstance(req, list) else []
        if INTENT_ARG not in names:
            names.insert(0, INTENT_ARG)
        out["required"] = names
    return out


def without_intent(schema: Mapping[str, Any]) -> JSONDict:
    """A new JSON Schema without our injected ``intent`` (a business ``intent`` stays).

    For embedders that show no label. Never mutates ``schema``.
    """
    out: JSONDict = _plain(schema)
    if not has_intent_marker(schema):
        return out
    props = cast("JSONDict", out["properties"])
    del props[INTENT_ARG]
    req = out.get("required")
    if isinstance(req, list):
        out["required"] = [n for n in cast("list[Any]", req) if n != INTENT_ARG]
    return out


# --------------------------------------------------------------------------------------------
# the registry: the label-bearing gate


class IntentRegistry:
    """A thread-safe set of label-bearing tool names: the tools whose schemas got our ``intent``.

    Which calls carry a label is decided here (by what we injected), never by the presence of
    an ``intent`` key in the arguments. Framework users whose tool functions declare the
    ``intent`` parameter themselves ``add`` those names. Reads take no lock.
    """

    __slots__ = ("_lock", "_names")

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._names: frozenset[str] = frozenset(names)

    def add(self, name: str) -> None:
        """Mark ``name`` as label-bearing."""
        with self._lock:
            if name not in self._names:
                self._names = self._names | {name}

    def update(self, names: Iterable[str]) -> None:
        """Mark every name in ``names`` as label-bearing."""
        new = frozenset(names)
        with self._lock:
            self._names = self._names | new

    def discard(self, name: str) -> None:
        """Forget ``name`` (no error when absent)."""
        with self._lock:
            if name in self._names:
                self._names = self._names - {name}

    def clear(self) -> None:
        """Forget every name."""
        with self._lock:
            self._names = frozenset()

    def names(self) -> frozenset[str]:
        """A snapshot of the label-bearing names."""
        return self._names

    def is_label_bearing(self, tool_name: str | None) -> bool:
        """Whether calls to ``tool_name`` carry our label (False for None)."""
        return tool_name is not None and tool_name in self._names

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"IntentRegistry({sorted(self._names)!r})"


_DEFAULT_REGISTRY: Final = IntentRegistry()


def default_registry() -> IntentRegistry:
    """The process-wide registry that ``inject_intent`` fills unless given another one."""
    return _DEFAULT_REGISTRY


# --------------------------------------------------------------------------------------------
# tool definitions


def injection_enabled() -> bool:
    """False when ``INTENTRACE_TOOL_INTENT`` is ``0``/``false``/``off``/``no``."""
    value = os.environ.get(INTENTRACE_TOOL_INTENT)
    return value is None or value.strip().lower() not in _OFF_VALUES


def _excluded(name: str, exclude: tuple[Exclusion, ...]) -> bool:
    for rule in exclude:
        if isinstance(rule, str):
            if rule.endswith("*"):
                if name.startswith(rule[:-1]):
                    return True
            elif name == rule:
                return True
        elif rule(name):
            return True
    return False


def _locate(tool: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...], bool] | None:
    """(name, path of the schema inside the tool, strict) for a known tool shape, else None."""
    kind = tool.get("type")
    function = tool.get("function")
    if kind == "function" and isinstance(function, Mapping):  # OpenAI Chat Completions
        fn = cast("Mapping[str, Any]", function)
        name = fn.get("name")
        return (name if isinstance(name, str) else None, ("function", "parameters"),
                fn.get("strict") is True)  # fmt: skip
    name = tool.get("name")
    tool_name = name if isinstance(name, str) else None
    strict = tool.get("strict") is True
    if kind == "function" and "function" not in tool:  # OpenAI Responses
        return tool_name, ("parameters",), strict
    if "input_schema" in tool and kind in (None, "custom"):  # Anthropic
        return tool_name, ("input_schema",), strict
    if "inputSchema" in tool:  # MCP
        return tool_name, ("inputSchema",), strict
    return None


def _strict_shaped(schema: Mapping[str, Any]) -> bool:
    """A schema already written for strict mode: closed, every property required."""
    props = _properties(schema) or {}
    req = schema.get("required")
    return (
        schema.get("additionalProperties") is False
        and bool(props)
        and isinstance(req, list | tuple)
        and set(props) <= set(cast("Iterable[Any]", req))
    )


def _warn(message: str) -> None:
    warnings.warn(f"intentrace: {message}", UserWarning, stacklevel=3)


def inject_intent(
    tools: Iterable[Any],
    *,
    registry: IntentRegistry | None = None,
    required: bool | None = None,
    exclude: Iterable[Exclusion] | Exclusion = (),
) -> list[Any]:
    """New tool definitions whose schemas have ``intent`` as their first property.

    Understands OpenAI Chat Completions (``{"type": "function", "function": {"name",
    "parameters"}}``), OpenAI Responses (``{"type": "function", "name", "parameters",
    "strict"}``), Anthropic (``{"name", "input_schema"}``) and MCP (``{"name",
    "inputSchema"}``) definitions. Inputs are never mutated. Tools that cannot take the property
    (unknown shape, non-object schema, an own ``intent`` parameter) come back as they are, with
    one ``UserWarning`` each; excluded tools come back silently. The names of injected tools go
    into ``registry``. ``INTENTRACE_TOOL_INTENT=0`` returns the tools untouched.

    Args:
        tools: tool definitions (mappings).
        registry: where injected names go; ``default_registry()`` when None.
        required: ``None`` lists ``intent`` in ``required`` only where strict mode needs it
            (``strict: true``, or a closed schema that already requires every property);
            ``True`` everywhere; ``False`` only where strict mode needs it.
        exclude: tool names, name prefixes ending in ``*`` (``"mcp_*"``), or predicates on the
            tool name; matching tools are left alone.

    Returns:
        A new list, in the same order.
    """
    items = list(tools)
    if not injection_enabled():
        return items
    reg = registry if registry is not None else default_registry()
    rules: tuple[Exclusion, ...] = (
        (exclude,) if isinstance(exclude, str) or callable(exclude) else tuple(exclude)
    )
    out: list[Any] = []
    injected: list[str] = []
    for tool in items:
        if not isinstance(tool, Mapping):
            _warn(f"tool {tool!r:.60} is not a mapping; no intent injected")
            out.append(tool)
            continue
        t = cast("Mapping[str, Any]", tool)
        found = _locate(t)
        name = found[0] if found is not None else None
        if found is None or name is None:
            _warn(f"tool {t.get('name') or t.get('type')!r} has no known shape; no intent injected")
            out.append(tool)
            continue
        _, path, strict = found
        if _excluded(name, rules):
            out.append(tool)
            continue
        holder: Mapping[str, Any] = t
        for key in path[:-1]:
            holder = cast("Mapping[str, Any]", holder[key])
        schema: Any = holder.get(path[-1])
        if schema is None:  # a function without parameters
            schema = {"type": "object", "properties": {}}
        if not can_inject_intent(schema):
            why = (
                "has its own 'intent' parameter"
                if _is_object_schema(schema)
                else "has no object schema"
            )
            _warn(f"tool {name!r} {why}; no intent injected")
            out.append(tool)
            continue
        s = cast("Mapping[str, Any]", schema)
        need_required = bool(required) or strict or _strict_shaped(s)
        new_tool: JSONDict = dict(t)
        if len(path) == 2:
            inner: JSONDict = dict(cast("Mapping[str, Any]", t[path[0]]))
            inner[path[1]] = with_intent(s, required=need_required)
            new_tool[path[0]] = inner
        else:
            new_tool[path[0]] = with_intent(s, required=need_required)
        out.append(new_tool)
        injected.append(name)
    if injected:
        reg.update(injected)
    return out


# --------------------------------------------------------------------------------------------
# arguments


def _decode_object(text: str | bytes) -> Any:
    """Parse JSON text, tolerating truncation; None when it is not JSON at all."""
    try:
        return jiter.from_json(
            text.encode() if isinstance(text, str) else text, partial_mode="trailing-strings"
        )
    except ValueError:
        pass
    try:  # what jiter refuses but Python accepts (lone surrogate escapes, raw control chars)
        return json.loads(text, strict=False)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def read_intent(
    args: Mapping[str, Any] | str | bytes | None, *, schema: Mapping[str, Any] | None = None
) -> str | None:
    """The ``intent`` string of a call's arguments, or None. Never raises.

    Args:
        args: the arguments as a mapping, or JSON text (``str``/``bytes``), possibly truncated:
            a truncated intent value gives the text that arrived.
        schema: the tool's schema; when given, only an ``intent`` that carries our marker is
            read (a business ``intent`` parameter gives None).
    """
    try:
        if schema is not None and not has_intent_marker(schema):
            return None
        if args is None:
            return None
        if isinstance(args, Mapping):
            value = args.get(INTENT_ARG)
            return value if isinstance(value, str) else None
        if not isinstance(args, str | bytes):  # pyright: ignore[reportUnnecessaryIsInstance]
            return None
        fast = read_streaming_intent(args)  # intent first: stops at its end
        if fast is not None and fast.complete:
            return fast.text
        parsed = _decode_object(args)
        if isinstance(parsed, dict):
            value = cast("dict[str, Any]", parsed).get(INTENT_ARG)
            return value if isinstance(value, str) else None
        return None
    except Exception as exc:  # never raise into a hot path
        count_internal_error("read_intent", exc)
        return None


_FIRST_INTENT: Final = re.compile(
    r'\{\s*"intent"\s*:\s*"(?:[^"\\]|\\.)*"\s*(?:,\s*|(?=\}))', re.DOTALL
)
_FIRST_INTENT_B: Final = re.compile(_FIRST_INTENT.pattern.encode(), re.DOTALL)


def _strip_text(text: _T) -> _T:
    if isinstance(text, str):
        m = _FIRST_INTENT.match(text.lstrip())
        if m is not None:
            rest = text.lstrip()[m.end() :]
            if '"intent"' not in rest:
                return cast("_T", "{" + rest)
    elif isinstance(text, bytes):
        m = _FIRST_INTENT_B.match(text.lstrip())
        if m is not None:
            rest_b = text.lstrip()[m.end() :]
            if b'"intent"' not in rest_b:
                return cast("_T", b"{" + rest_b)
    # The general case: parse, drop the key, write back.
    try:
        parsed = json.loads(cast("str | bytes", text))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return text  # truncated or not JSON: leave it alone
    if not isinstance(parsed, dict) or INTENT_ARG not in parsed:
        return text
    obj = cast("dict[str, Any]", parsed)
    del obj[INTENT_ARG]
    dumped = json.dumps(obj, ensure_ascii=False)
    return cast("_T", dumped.encode() if isinstance(text, bytes) else dumped)


def strip_intent(args: _T, *, schema: Mapping[str, Any] | None = None) -> _T:
    """``args`` without the injected ``intent`` key, the same kind out as in. Never raises.

    A mapping gives a new ``dict`` (the input is not mutated); JSON text gives JSON text
    (``str`` or ``bytes``), edited in place when ``intent`` is the first key, else re-encoded;
    text that is not a JSON object comes back unchanged, and so does anything else.

    Args:
        args: the call's arguments.
        schema: the tool's schema; when given, the key is stripped only if that schema's
            ``intent`` carries our marker (a business ``intent`` parameter stays).
    """
    value: Any = args
    try:
        if schema is not None and not has_intent_marker(schema):
            return args
        if isinstance(value, Mapping):
            mapping = cast("Mapping[str, Any]", value)
            return cast("_T", {k: v for k, v in mapping.items() if k != INTENT_ARG})
        if isinstance(value, str | bytes):
            return cast("_T", _strip_text(value))
    except Exception as exc:  # never raise into the tool call
        count_internal_error("strip_intent", exc)
    return args


# --------------------------------------------------------------------------------------------
# outcome and display


def apply_outcome(
    intent: str, *, outcome: str | None = None, outcome_patch: Mapping[str, Any] | None = None
) -> str:
    """The settled label text of a successful call. Never raises.

    Precedence: ``outcome`` (a full replacement, when non-empty) > ``outcome_patch`` (``{"from":
    ..., "to": ...}``: the first occurrence of ``from`` in the intent becomes ``to``,
    case-sensitive; no change when ``from`` is absent) > the intent unchanged. There is
    deliberately no tense rewriting.
    """
    if isinstance(outcome, str) and outcome:
        return outcome
    if isinstance(outcome_patch, Mapping):
        old, new = outcome_patch.get("from"), outcome_patch.get("to")
        if isinstance(old, str) and old and isinstance(new, str):
            return intent.replace(old, new, 1)
    return intent


# ESC [ ... final (CSI; also the 8-bit CSI U+009B); ESC ] / P / X / ^ / _ ... terminated by BEL
# or ESC \ (OSC, DCS, SOS, PM, APC; also their 8-bit forms, ST = U+009C). An unterminated ESC
# string sequence runs to the end of the text, as in a terminal; an unterminated 8-bit one is
# just a stray control character (UTF-8 terminals ignore 8-bit controls).
_ESCAPES: Final = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
)
_C1_OR_ESC: Final = re.compile(r"[\x1b\x90-\x9f]")
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")
_SURROGATE_PAIRS: Final = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")
# C0/C1 controls and DEL (white space among them is handled below), bidi embeddings, overrides
# and isolates, and lone surrogates.
_REMOVE: Final = re.compile(
    r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_SPACE: Final = re.compile(r"\s+")
_ELLIPSIS: Final = "…"
_LONG_INPUT: Final = 16


def _join_pair(m: re.Match[str]) -> str:
    return m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _extends(ch: str) -> bool:
    """Whether ``ch`` attaches to the character before it (grapheme extend or spacing mark)."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) in ("Mn", "Me", "Mc")
        or cp == 0x200D  # zero width joiner
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0xE0100 <= cp <= 0xE01EF
        or 0x1F3FB <= cp <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= cp <= 0xE007F  # emoji tag sequences
        or 0x1160 <= cp <= 0x11FF  # Hangul medial vowels and final consonants
        or 0xD7B0 <= cp <= 0xD7FF
    )


def _is_regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _grapheme_cut(text: str, cut: int) -> int:
    """The largest index <= ``cut`` that does not split a grapheme cluster."""
    while cut > 0 and (_extends(text[cut]) or text[cut - 1] == "\u200d"):
        cut -= 1
    if cut > 0 and _is_regional(text[cut]) and _is_regional(text[cut - 1]):
        run = 0  # regional indicators pair up from the start of their run
        i = cut - 1
        while i >= 0 and _is_regional(text[i]):
            run += 1
            i -= 1
        if run % 2:
            cut -= 1
    return cut


def sanitize_label(text: str, max_chars: int = 120) -> str:
    """One line of plain text, safe to show in a terminal, a span name or a web page.

    Removes control characters, ANSI CSI sequences and OSC (and DCS/SOS/PM/APC) sequences
    terminated by BEL or ESC \\ (the visible text after them is kept; an unterminated one runs
    to the end), bidi embedding/override/isolate characters and lone surrogates (a surrogate
    pair becomes its character). Newlines and runs of white space become one space; the ends
    are trimmed. Longer results are cut to ``max_chars`` code points including a trailing
    ``…``, never inside a grapheme cluster (combining marks, ZWJ emoji, flags). Never raises.

    Very long inputs are first cut to ``16 * max_chars`` code points (at least 4096): a label
    never needs more, and the work stays bounded.
    """
    if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        text = "" if text is None else str(text)
    if max_chars <= 0:
        return ""
    text = text[: max(4096, _LONG_INPUT * max_chars)]
    if _C1_OR_ESC.search(text):
        text = _ESCAPES.sub("", text)
    if _SURROGATE.search(text):
        text = _SURROGATE_PAIRS.sub(_join_pair, text)
    text = _REMOVE.sub("", text)
    text = _SPACE.sub(" ", text).strip()
    if len(text) <= max_chars:
        return text
    cut = _grapheme_cut(text, max_chars - 1)
    return text[:cut].rstrip() + _ELLIPSIS
