"""The injected ``intent`` property: schema injection and removal, the label marker, and the
registry of label-bearing tools (the gate).

Pure Python (no OpenTelemetry).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar, cast, overload

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


def _schema_without_intent(schema: Mapping[str, Any]) -> JSONDict:
    out: JSONDict = _plain(schema)
    if not has_intent_marker(schema):
        return out
    props = cast("JSONDict", out["properties"])
    del props[INTENT_ARG]
    req = out.get("required")
    if isinstance(req, list):
        out["required"] = [n for n in cast("list[Any]", req) if n != INTENT_ARG]
    return out


@overload
def without_intent(schema: Mapping[str, Any]) -> JSONDict: ...
@overload
def without_intent(schema: list[Any] | tuple[Any, ...]) -> list[Any]: ...
def without_intent(schema: Mapping[str, Any] | list[Any] | tuple[Any, ...]) -> JSONDict | list[Any]:
    """A new schema or tool definition without our injected ``intent`` (a business ``intent``
    stays).

    Takes every shape ``inject_intent`` takes: a bare JSON Schema, an OpenAI Chat Completions,
    OpenAI Responses, Anthropic or MCP tool definition, or a list (or tuple) of those, which
    gives a new list. For embedders that show no label. Never mutates its input; anything it
    does not recognise comes back as a plain copy.
    """
    if isinstance(schema, list | tuple):
        items = cast("Iterable[Any]", schema)
        return [
            without_intent(cast("Mapping[str, Any]", item))
            if isinstance(item, Mapping)
            else _plain(item)
            for item in items
        ]
    found = _locate(schema)
    if found is None:
        return _schema_without_intent(schema)
    path = found[1]
    out: JSONDict = _plain(schema)
    holder: JSONDict = out
    for key in path[:-1]:
        holder = cast("JSONDict", holder[key])
    inner = holder.get(path[-1])
    if isinstance(inner, Mapping):
        holder[path[-1]] = _schema_without_intent(cast("Mapping[str, Any]", inner))
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


def tool_names_of(tool: Any, *, _depth: int = 0) -> list[str]:
    """The tool names a tool, a tool definition or a tool list stands for (empty: none found).

    A non-empty ``str`` is a name; a schema mapping gives its name (OpenAI Chat Completions and
    Responses, Anthropic, MCP, or any ``{"name": ...}``); a framework's tool object gives its
    ``name`` attribute (LangChain, CrewAI, Google ADK, Agno, AutoGen, DSPy, pydantic-ai, the
    ``mcp`` package's ``Tool``) and its ``fully_qualified_name`` too when it has one (Semantic
    Kernel's ``plugin-function``); a plain function its ``__name__``; an object or mapping
    holding ``tools`` (a toolset, MCP ``ListToolsResult``) the names of those.
    """
    if isinstance(tool, str):
        return [tool] if tool.strip() else []
    names: list[str] = []
    if isinstance(tool, Mapping):
        mapping = cast("Mapping[str, Any]", tool)
        found = _locate(mapping)
        name = found[0] if found is not None else mapping.get("name")
        if isinstance(name, str) and name.strip():
            names.append(name)
        inner: Any = mapping.get("tools") if not names else None
    else:
        name = getattr(tool, "name", None)
        if isinstance(name, str) and name.strip():
            names.append(name)
            qualified = getattr(tool, "fully_qualified_name", None)
            if isinstance(qualified, str) and qualified.strip() and qualified != name:
                names.append(qualified)
        elif callable(tool):
            fn_name = getattr(tool, "__name__", None)
            if isinstance(fn_name, str) and fn_name.strip() and fn_name != "<lambda>":
                names.append(fn_name)
        inner = getattr(tool, "tools", None) if not names else None
    if inner is not None and _depth < 2 and isinstance(inner, Iterable):
        for item in cast("Iterable[Any]", inner):
            if not isinstance(item, str | bytes):
                names.extend(tool_names_of(item, _depth=_depth + 1))
    return names


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
