"""TOML policy files -> the fields of a ``RedactionPolicy``. Every error is one line naming file
and entry."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from typing import Any, cast

from redaction._errors import PolicyError
from redaction._rules import AgentOverlay, Rule, ToolRule
from redaction._scrubber import ScrubOptions, UserPattern
from redaction.environment_variables import INTENTRACE_REDACTION_HASH_KEY

_TOP = frozenset({"default", "tools", "agents", "scrub", "hash"})
_RULE = frozenset({"args", "output"})
_AGENT = frozenset({"args", "output", "tools"})
_SCRUB = frozenset(
    {
        "emails",
        "phones",
        "disable",
        "patterns",
        "keys",
        "max_depth",
        "max_string_chars",
        "max_nodes",
        "engine",
    }
)
_PATTERN = frozenset({"name", "regex", "literals"})
_HASH = frozenset({"key_env"})


def _q(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def _table(value: object, source: str, entry: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PolicyError(source, entry, "must be a table")
    return cast("Mapping[str, Any]", value)


def _keys(table: Mapping[str, Any], allowed: frozenset[str], source: str, entry: str) -> None:
    for key in table:
        if key not in allowed:
            raise PolicyError(
                source,
                entry,
                f"unknown key {key!r} (expected one of {', '.join(sorted(allowed))})",
            )


def _bool(table: Mapping[str, Any], key: str, source: str, entry: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise PolicyError(source, f"{entry} {key}", "must be true or false")
    return value


def _int(table: Mapping[str, Any], key: str, default: int, source: str, entry: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(source, f"{entry} {key}", "must be a positive integer")
    return value


def _strings(value: object, source: str, entry: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in cast("list[Any]", value)):
        raise PolicyError(source, entry, "must be a list of strings")
    return tuple(cast("list[str]", value))


def _rule_fields(table: Mapping[str, Any], source: str, entry: str) -> tuple[Any, Any]:
    for fld in ("args", "output"):
        if fld in table and not isinstance(table[fld], str):
            raise PolicyError(source, f"{entry} {fld}", "must be a string: keep, redact or hash")
    return table.get("args"), table.get("output")


def _tool_rules(value: object, source: str, prefix: str) -> tuple[ToolRule, ...]:
    rules: list[ToolRule] = []
    for name, body in _table(value, source, f"[{prefix}]").items():
        entry = f"[{prefix}.{_q(name)}]"
        t = _table(body, source, entry)
        _keys(t, _RULE, source, entry)
        args, output = _rule_fields(t, source, entry)
        rules.append(ToolRule(name, args, output))
    return tuple(rules)


def _scrub(value: object, source: str) -> ScrubOptions:
    t = _table(value, source, "[scrub]")
    _keys(t, _SCRUB, source, "[scrub]")
    defaults = ScrubOptions()
    patterns: list[UserPattern] = []
    raw_patterns = t.get("patterns", [])
    if not isinstance(raw_patterns, list):
        raise PolicyError(source, "[[scrub.patterns]]", "must be an array of tables")
    for i, p in enumerate(cast("list[Any]", raw_patterns)):
        entry = f"[[scrub.patterns]][{i}]"
        pt = _table(p, source, entry)
        _keys(pt, _PATTERN, source, entry)
        name, regex = pt.get("name"), pt.get("regex")
        if not isinstance(name, str) or not isinstance(regex, str):
            raise PolicyError(source, entry, "needs a string 'name' and a string 'regex'")
        literals = _strings(pt.get("literals", []), source, f"{entry} literals")
        patterns.append(UserPattern(name, regex, literals))
    return ScrubOptions(
        emails=_bool(t, "emails", source, "[scrub]"),
        phones=_bool(t, "phones", source, "[scrub]"),
        disable=_strings(t.get("disable", []), source, "[scrub] disable"),
        patterns=tuple(patterns),
        keys=_strings(t.get("keys", []), source, "[scrub] keys"),
        max_depth=_int(t, "max_depth", defaults.max_depth, source, "[scrub]"),
        max_string_chars=_int(t, "max_string_chars", defaults.max_string_chars, source, "[scrub]"),
        max_nodes=_int(t, "max_nodes", defaults.max_nodes, source, "[scrub]"),
        engine=_engine(t, source),
    )


def _engine(t: Mapping[str, Any], source: str) -> str | None:
    value = t.get("engine")
    if value is not None and not isinstance(value, str):
        raise PolicyError(source, "[scrub] engine", "must be a string")
    return value


def policy_fields_from_toml(text: str, *, source: str = "<string>") -> dict[str, Any]:
    """Parse and validate a policy file's text: the keyword arguments of ``RedactionPolicy``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(source, "", f"not valid TOML: {exc}") from None
    _keys(data, _TOP, source, "top level")

    default = Rule("keep", "keep")
    if "default" in data:
        t = _table(data["default"], source, "[default]")
        _keys(t, _RULE, source, "[default]")
        args, output = _rule_fields(t, source, "[default]")
        default = Rule(args or "keep", output or "keep")

    tools = _tool_rules(data.get("tools", {}), source, "tools")

    agents: list[AgentOverlay] = []
    for name, body in _table(data.get("agents", {}), source, "[agents]").items():
        entry = f"[agents.{_q(name)}]"
        t = _table(body, source, entry)
        _keys(t, _AGENT, source, entry)
        args, output = _rule_fields(t, source, entry)
        agent_tools = _tool_rules(t.get("tools", {}), source, f"agents.{_q(name)}.tools")
        agents.append(AgentOverlay(name, args, output, agent_tools))

    scrubbing = _scrub(data["scrub"], source) if "scrub" in data else ScrubOptions()

    hash_key: bytes | None = None
    if "hash" in data:
        t = _table(data["hash"], source, "[hash]")
        _keys(t, _HASH, source, "[hash]")
        env_name = t.get("key_env", INTENTRACE_REDACTION_HASH_KEY)
        if not isinstance(env_name, str) or not env_name:
            raise PolicyError(source, "[hash] key_env", "must be an environment variable name")
        value = os.environ.get(env_name, "")
        hash_key = value.encode() if value else None
        if hash_key is None and env_name != INTENTRACE_REDACTION_HASH_KEY:
            raise PolicyError(source, "[hash] key_env", f"${env_name} is not set")
    return {
        "default_rule": default,
        "tools": tools,
        "agents": tuple(agents),
        "scrubbing": scrubbing,
        "hash_key": hash_key,
        "source": source,
    }
