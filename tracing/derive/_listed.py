"""Tool calls listed in any span's data, redacted by their own tool's policy.

A tool call's args and result do not live in its tool span only: the model span that requested
it lists the call (``gen_ai.output.messages``, ``llm.output_messages.N.message.tool_calls.M.…``,
``gen_ai.completion.N.tool_calls.M.…``), the next model span's input lists it again with its
result, and agent or chain spans often carry the whole conversation, or the provider's raw
request and response, as JSON. This module finds those calls and applies the policy of the tool
each one names: its arguments by the args action, its result by the output action. Everything
else is left for the scrubber.

Shapes recognised wherever they occur in a JSON value (attribute values, event attributes,
JSON text inside strings, truncated JSON text too):

* calls: GenAI semconv parts (``{"type": "tool_call", "name", "arguments"}``), OpenAI chat
  (``{"function": {"name", "arguments"}}``), OpenAI responses (``{"type": "function_call",
  "name", "arguments"}``), Anthropic (``{"type": "tool_use", "name", "input"}``), Gemini
  (``{"functionCall": {"name", "args"}}``), pydantic-ai (``{"part_kind": "tool-call",
  "tool_name", "args"}``) and any mapping with a string ``name`` and an ``arguments`` key;
* results: GenAI ``tool_call_response``, OpenAI ``{"role": "tool", "tool_call_id", "content"}``
  and ``function_call_output``, Anthropic ``tool_result``, Gemini ``functionResponse``,
  pydantic-ai ``tool-return``/``retry-prompt``.

And in flattened attributes: OpenInference ``llm.{input,output}_messages.N.message.…`` and
OpenLLMetry ``gen_ai.{prompt,completion}.N.…`` / ``llm.{prompts,completions}.N.…`` (calls under
``tool_calls.M.``, results in the ``content`` of a ``role=tool`` message).

A result names its tool, or the id of a call listed in the same span (or known to the caller).
A result whose tool cannot be told gets the strictest output action the policy has for anyone:
a hidden result is never guessed to be visible. Pure functions; no OpenTelemetry import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from tracing.intent._args import first_str, parse_json

_CALL_TYPES: Final = frozenset(
    {"tool_call", "function_call", "tool_use", "server_tool_use", "mcp_call", "custom_tool_call"}
)
_RESULT_TYPES: Final = frozenset(
    {
        "tool_call_response",
        "tool_call_result",
        "function_call_output",
        "tool_result",
        "mcp_call",
        "custom_tool_call_output",
    }
)
_ARGS_FIELDS: Final = ("arguments", "input", "args")
_RESULT_FIELDS: Final = ("response", "result", "output", "content")
_ID_FIELDS: Final = ("id", "call_id", "tool_call_id", "tool_use_id")
TOOL_MESSAGE_EVENT: Final = "gen_ai.tool.message"
_MAX_DEPTH: Final = 64

# flattened model messages: <message prefix><rest>
_FLAT: Final = re.compile(
    r"(?P<msg>(?:llm\.(?:input|output)_messages\.\d+\.message|gen_ai\.(?:prompt|completion)\.\d+"
    r"|llm\.(?:prompts|completions)\.\d+))\.(?P<rest>.+)"
)
_FLAT_CALL: Final = re.compile(
    r"(?:tool_calls\.(?P<j>\d+)\.(?:tool_call\.)?|function_call\.)"
    r"(?P<field>id|name|function\.name|arguments|function\.arguments)"
)


KEEP: Final = object()
"""Returned by ``apply_args``/``apply_output`` when the action is ``keep`` (left for the
scrubber)."""
_KEEP: Final = KEEP

Resolve = Callable[[str], str | None]
"""A call id -> the tool name of that call, when the caller knows it (else None)."""


@dataclass
class Listed:
    """What the tool-call pass did to one span's data."""

    calls: dict[str, str] = field(default_factory=dict[str, str])
    """Call id -> tool name of every call listed (for results listed elsewhere)."""
    changed: bool = False
    """Some call's args or result were replaced by the policy."""


class ListedCalls:
    """Applies a policy to the tool calls listed in a span's data.

    Args:
        apply_args: ``(tool name, value) -> value`` by the tool's args action, or None when
            the action is ``keep`` (the value is then left for the scrubber).
        apply_output: the same for results (``tool name`` None: the tool is not known).
        resolve: call id -> tool name known from elsewhere (earlier spans of the trace).
    """

    def __init__(
        self,
        apply_args: Callable[[str | None, Any], Any],
        apply_output: Callable[[str | None, Any], Any],
        resolve: Resolve | None = None,
    ) -> None:
        self._args = apply_args
        self._output = apply_output
        self._resolve = resolve

    # ------------------------------------------------------------------ one span's attributes
    def attributes(
        self, attrs: Mapping[str, Any], *, event_name: str | None = None
    ) -> tuple[dict[str, Any], Listed]:
        """``attrs`` with every listed call's args and result replaced by the policy.

        Values are returned as they came (same type, JSON text stays JSON text); unchanged
        ones are the very same objects."""
        listed = Listed()
        trees: dict[str, Any] = {}
        layers: dict[str, int] = {}
        for key, value in attrs.items():
            if isinstance(value, str) and not _may_list(value):
                continue
            tree, layers[key] = _tree(value)
            if tree is not None:
                trees[key] = tree
                _collect(tree, listed.calls, 0)
        flat = _flat_groups(attrs)
        for group in flat.values():
            for call in group.calls.values():
                if call.call_id and call.name:
                    listed.calls.setdefault(call.call_id, call.name)
        out = dict(attrs)
        if event_name == TOOL_MESSAGE_EVENT and "content" in attrs:
            # a GenAI ``gen_ai.tool.message`` event on a model span: one tool result
            name = self._name_of(first_str(attrs, ("name",)), first_str(attrs, _ID_FIELDS), listed)
            replaced = self._output(name, attrs["content"])
            if replaced is not _KEEP:
                out["content"] = replaced
                listed.changed = True
                trees.pop("content", None)
        for key, tree in trees.items():
            new, changed = self._walk(tree, listed, 0)
            if changed:
                listed.changed = True
                out[key] = _like(attrs[key], new, layers[key])
        for group in flat.values():
            if self._flat(group, attrs, out, listed):
                listed.changed = True
        return out, listed

    # ------------------------------------------------------------------ JSON trees
    def _walk(self, node: Any, listed: Listed, depth: int) -> tuple[Any, bool]:
        if depth > _MAX_DEPTH:
            return node, False
        original: Any = node
        if isinstance(node, list):
            changed = False
            items = cast("list[Any]", node)
            out: list[Any] = []
            for item in items:
                new, c = self._walk(item, listed, depth + 1)
                out.append(new)
                changed = changed or c
            return (out, True) if changed else (original, False)
        if not isinstance(node, dict):
            if isinstance(node, str) and node[:1] in ("{", "[", '"'):
                tree, wraps = _tree(node)
                if tree is not None:
                    new, c = self._walk(tree, listed, depth + 1)
                    if c:
                        return _like(node, new, wraps), True
            return node, False
        d = cast("dict[str, Any]", node)
        replaced: dict[str, Any] = {}
        call = _call_of(d)
        if call is not None:
            holder, args_key, name = call
            value = self._args(name, holder[args_key])
            if value is not _KEEP:
                if holder is d:
                    replaced[args_key] = value
                else:
                    inner = dict(holder)
                    inner[args_key] = value
                    replaced[_inner_key(d, holder)] = inner
        result = _result_of(d)
        if result is not None:
            result_key, name, call_id = result
            value = self._output(self._name_of(name, call_id, listed), d[result_key])
            if value is not _KEEP:
                replaced[result_key] = value
        changed = bool(replaced)
        out_d: dict[str, Any] = {}
        for key, value in d.items():
            if key in replaced:
                out_d[key] = replaced[key]
                continue
            new, c = self._walk(value, listed, depth + 1)
            out_d[key] = new
            changed = changed or c
        return (out_d, True) if changed else (original, False)

    def _name_of(self, name: str | None, call_id: str | None, listed: Listed) -> str | None:
        if name:
            return name
        if call_id:
            known = listed.calls.get(call_id)
            if known is None and self._resolve is not None:
                known = self._resolve(call_id)
            return known
        return None

    # ------------------------------------------------------------------ flattened messages
    def _flat(
        self,
        group: _FlatMessage,
        attrs: Mapping[str, Any],
        out: MutableMapping[str, Any],
        listed: Listed,
    ) -> bool:
        changed = False
        for call in group.calls.values():
            if call.args_key is None:
                continue
            value = self._args(call.name, attrs[call.args_key])
            if value is not _KEEP:
                out[call.args_key] = value
                changed = True
        if group.role == "tool" and group.content_keys:
            name = self._name_of(group.name, group.call_id, listed)
            for key in group.content_keys:
                value = self._output(name, attrs[key])
                if value is not _KEEP:
                    out[key] = value
                    changed = True
        return changed


def _may_list(text: str) -> bool:
    """Text that may list a tool call or result: every shape names a tool, a function or its
    arguments (``tool_call``, ``tool_calls``, ``tool_use``, ``functionCall``, ``arguments``)."""
    return "tool" in text or "unction" in text or "rgument" in text


def _tree(value: Any) -> tuple[Any, int]:
    """A JSON tree to walk (a mapping or list, or JSON text, truncated text too), and how many
    times the text was JSON-encoded as a string on top (Langfuse encodes its metadata values:
    ``"[{\\"role\\": ...}]"``); ``(None, 0)`` when there is none."""
    if isinstance(value, Mapping | list):
        return cast("Any", value), 0
    if isinstance(value, tuple):
        items = cast("tuple[Any, ...]", value)
        if any(isinstance(v, str) and v[:1] in ("{", "[", '"') for v in items):
            return list(items), 0
        return None, 0
    if not isinstance(value, str):
        return None, 0
    text, wraps = value, 0
    while text[:1] == '"' and wraps < 3:
        try:
            inner = json.loads(text)
        except ValueError:
            return None, 0
        if not isinstance(inner, str):
            return None, 0
        text, wraps = inner, wraps + 1
    if text.lstrip()[:1] in ("{", "["):
        parsed: Any = parse_json(text)
        if isinstance(parsed, dict | list):
            return cast("Any", parsed), wraps
    return None, 0


def _like(original: Any, new: Any, wraps: int = 0) -> Any:
    """``new`` in the form ``original`` came in (JSON text stays text, encoded as often as it
    was; tuples stay tuples)."""
    if isinstance(original, str):
        text = json.dumps(new, ensure_ascii=False)
        for _ in range(wraps):
            text = json.dumps(text, ensure_ascii=False)
        return text
    if isinstance(original, tuple):
        return tuple(cast("list[Any]", new))
    return new


def _call_of(d: dict[str, Any]) -> tuple[Mapping[str, Any], str, str | None] | None:
    """(mapping holding the args, args key, tool name) when ``d`` is a tool call."""
    kind = d.get("type")
    if isinstance(kind, str) and kind in _CALL_TYPES:
        for key in _ARGS_FIELDS:
            if key in d:
                return d, key, first_str(d, ("name", "tool_name"))
        return None
    function = d.get("function")
    if isinstance(function, Mapping) and "arguments" in function:
        fn = cast("Mapping[str, Any]", function)
        return fn, "arguments", first_str(fn, ("name",))
    for key in ("functionCall", "function_call"):
        gemini = d.get(key)
        if isinstance(gemini, Mapping):
            g = cast("Mapping[str, Any]", gemini)
            for args_key in ("args", "arguments"):
                if args_key in g:
                    return g, args_key, first_str(g, ("name",))
    if d.get("part_kind") == "tool-call" and "args" in d:
        return d, "args", first_str(d, ("tool_name",))
    if "arguments" in d and (isinstance(d.get("name"), str) or isinstance(d.get("tool_name"), str)):
        return d, "arguments", first_str(d, ("name", "tool_name"))
    if "tool_name" in d and "args" in d and "part_kind" not in d:
        return d, "args", first_str(d, ("tool_name",))
    return None


def _inner_key(d: Mapping[str, Any], holder: Mapping[str, Any]) -> str:
    for key, value in d.items():
        if value is holder:
            return key
    raise KeyError("holder")  # unreachable: the holder is one of d's values


def _result_of(d: dict[str, Any]) -> tuple[str, str | None, str | None] | None:
    """(result key, tool name, call id) when ``d`` is a tool result."""
    kind = d.get("type")
    if isinstance(kind, str) and kind in _RESULT_TYPES:
        for key in _RESULT_FIELDS:
            if key in d and (kind != "mcp_call" or key == "output"):
                return key, first_str(d, ("name", "tool_name")), first_str(d, _ID_FIELDS)
        return None
    if d.get("role") == "tool" and "content" in d:
        return "content", first_str(d, ("name", "tool_name")), first_str(d, _ID_FIELDS)
    if d.get("part_kind") in ("tool-return", "retry-prompt") and "content" in d:
        return "content", first_str(d, ("tool_name",)), first_str(d, ("tool_call_id",))
    for key in ("functionResponse", "function_response"):
        gemini = d.get(key)
        if isinstance(gemini, Mapping) and "response" in gemini:
            return key, first_str(cast("Mapping[str, Any]", gemini), ("name",)), None
    return None


def _collect(node: Any, calls: dict[str, str], depth: int) -> None:
    """Call id -> tool name of every call listed in a tree."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, list):
        for item in cast("list[Any]", node):
            _collect(item, calls, depth + 1)
        return
    if isinstance(node, str):
        if node[:1] in ("{", "[", '"') and ("name" in node):
            _collect(_tree(node)[0], calls, depth + 1)
        return
    if not isinstance(node, Mapping):
        return
    d = cast("dict[str, Any]", node)
    call = _call_of(d)
    if call is not None and call[2]:
        call_id = first_str(d, _ID_FIELDS)
        if call_id:
            calls.setdefault(call_id, call[2])
    for value in d.values():
        if isinstance(value, Mapping | list | str):
            _collect(value, calls, depth + 1)


@dataclass
class _FlatCall:
    name: str | None = None
    call_id: str | None = None
    args_key: str | None = None


@dataclass
class _FlatMessage:
    role: str | None = None
    name: str | None = None
    call_id: str | None = None
    content_keys: list[str] = field(default_factory=list[str])
    calls: dict[str, _FlatCall] = field(default_factory=dict[str, _FlatCall])


def _flat_groups(attrs: Mapping[str, Any]) -> dict[str, _FlatMessage]:
    groups: dict[str, _FlatMessage] = {}
    for key, value in attrs.items():
        if key[:4] not in ("llm.", "gen_"):
            continue
        m = _FLAT.fullmatch(key)
        if m is None:
            continue
        group = groups.setdefault(m.group("msg"), _FlatMessage())
        rest = m.group("rest")
        c = _FLAT_CALL.fullmatch(rest)
        if c is not None:
            call = group.calls.setdefault(c.group("j") or "fc", _FlatCall())
            fld = c.group("field")
            if fld == "id":
                call.call_id = value if isinstance(value, str) else None
            elif fld.endswith("name"):
                call.name = value if isinstance(value, str) else None
            else:
                call.args_key = key
        elif rest == "role":
            group.role = value if isinstance(value, str) else None
        elif rest == "name":
            group.name = value if isinstance(value, str) else None
        elif rest == "tool_call_id":
            group.call_id = value if isinstance(value, str) else None
        elif rest == "content" or rest.startswith("contents."):
            group.content_keys.append(key)
    return groups
