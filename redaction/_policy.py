"""The redaction policy: which action applies to a call's args and output, the label rule,
and ``redact_call`` — the one entry point every sink uses."""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar, cast

from redaction._base import HMAC_PREFIX, TrailEntry, placeholder
from redaction._errors import PolicyError, RedactionError
from redaction._rules import (
    STRICTNESS,
    Action,
    AgentOverlay,
    Decision,
    RedactedCall,
    Rule,
    ToolRule,
    check_action,
    check_glob,
    is_glob,
    matches,
    may_overlap,
    stricter,
    tool_entry,
)
from redaction._scrubber import Scrubbed, Scrubber, ScrubOptions
from redaction._toml import policy_fields_from_toml
from redaction.environment_variables import (
    INTENTRACE_REDACTION_HASH_KEY,
    INTENTRACE_REDACTION_POLICY,
)

_log = logging.getLogger("redaction")

T = TypeVar("T")


class CallRedactor(Protocol):
    """What the tracing side uses of a policy: :class:`RedactionPolicy` satisfies it (and so
    may a test's stand-in that wraps one)."""

    def redact_call(
        self,
        *,
        tool_name: str,
        agent_id: str | None = None,
        args: Any = None,
        intent: str | None = None,
        outcome: str | None = None,
        output: Any = None,
        error: str | None = None,
    ) -> Any: ...

    def scrub(self, value: Any) -> Any: ...

    def scrub_text(self, text: str) -> str: ...


@dataclass(frozen=True)
class RedactionPolicy:
    """One policy for args, outputs, intents and outcomes, plus the secret scrubber.

    Build it in Python or load it from TOML (``RedactionPolicy.load``). It is immutable and
    thread-safe; the scrubber is compiled once when the policy is built.
    """

    default_rule: Rule = Rule("keep", "keep")
    """The rule for every call no tool rule matches; unset fields mean ``keep``."""
    tools: tuple[ToolRule, ...] = ()
    """Per-tool rules: an exact name wins over globs; among globs the first listed wins."""
    agents: tuple[AgentOverlay, ...] = ()
    """Per-agent overlays; every matching overlay applies and each may only tighten."""
    scrubbing: ScrubOptions = field(default_factory=ScrubOptions)
    """What the scrubber looks for."""
    hash_key: bytes | None = field(default=None, repr=False)
    """Key for ``hash``; when ``None`` and a rule uses ``hash``, read from
    ``INTENTRACE_REDACTION_HASH_KEY``."""
    source: str = field(default="<python>", compare=False)
    """Where the policy came from (file path), used in error messages."""

    _scrubber: Scrubber = field(init=False, repr=False, compare=False)
    _cache: dict[tuple[str, str | None], Decision] = field(init=False, repr=False, compare=False)
    _lock: threading.Lock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        src = self.source
        check_action(self.default_rule.args, src, "[default] args")
        check_action(self.default_rule.output, src, "[default] output")
        for t in self.tools:
            entry = tool_entry(t.match)
            check_glob(t.match, src, entry)
            check_action(t.args, src, f"{entry} args")
            check_action(t.output, src, f"{entry} output")
        for a in self.agents:
            entry = f"[agents.{json.dumps(a.match)}]"
            check_glob(a.match, src, entry)
            for fld in ("args", "output"):
                value = check_action(getattr(a, fld), src, f"{entry} {fld}")
                if value is not None:
                    self._check_not_looser(value, fld, entry, None)
            for t in a.tools:
                tentry = tool_entry(t.match, a.match)
                check_glob(t.match, src, tentry)
                for fld in ("args", "output"):
                    value = check_action(getattr(t, fld), src, f"{tentry} {fld}")
                    if value is not None:
                        self._check_not_looser(value, fld, tentry, t.match)
                        # also not looser than the agent-wide layer it sits on
                        wide = cast("Action | None", getattr(a, fld))
                        if wide is not None and STRICTNESS[value] < STRICTNESS[wide]:
                            raise PolicyError(
                                src,
                                f"{tentry} {fld}",
                                f"{value!r} is looser than {entry} {fld} = {wide!r};"
                                " agent overlays may only be stricter",
                            )
        key = self.hash_key
        if key is None and self._uses_hash():
            env = os.environ.get(INTENTRACE_REDACTION_HASH_KEY, "")
            if not env:
                raise PolicyError(
                    src,
                    self._first_hash_entry(),
                    f"uses 'hash' but no key is set: set ${INTENTRACE_REDACTION_HASH_KEY}"
                    " (or pass hash_key=)",
                )
            key = env.encode()
            object.__setattr__(self, "hash_key", key)
        if key is not None and len(key) < 16 and self._uses_hash():
            raise PolicyError(
                src, self._first_hash_entry(), "the hash key must be at least 16 bytes"
            )
        object.__setattr__(self, "_scrubber", Scrubber(self.scrubbing, source=src))
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_lock", threading.Lock())

    # -- validation helpers ------------------------------------------------------------------

    def _base_rules(self) -> list[tuple[str, Rule | ToolRule]]:
        rules: list[tuple[str, Rule | ToolRule]] = [("[default]", self.default_rule)]
        rules.extend((tool_entry(t.match), t) for t in self.tools)
        return rules

    def _check_not_looser(self, value: Action, fld: str, entry: str, tool: str | None) -> None:
        """An overlay field must be at least as strict as every base rule it can land on.

        Agent-wide (``tool`` None): the default and every tool rule. Per tool: the base rule
        that pattern resolves to, plus every tool rule whose pattern may overlap it."""
        candidates: list[tuple[str, Rule | ToolRule]] = []
        if tool is None:
            candidates = self._base_rules()
        else:
            if self._tool_rule(self.tools, tool) is None:
                candidates.append(("[default]", self.default_rule))
            candidates.extend(
                (tool_entry(t.match), t) for t in self.tools if may_overlap(t.match, tool)
            )
        for base_entry, rule in candidates:
            base = cast("Action | None", getattr(rule, fld))
            where = base_entry
            if base is None:
                if not isinstance(rule, ToolRule):
                    continue
                base = cast("Action | None", getattr(self.default_rule, fld))
                where = "[default]"
                if base is None:
                    continue
            if STRICTNESS[value] < STRICTNESS[base]:
                raise PolicyError(
                    self.source,
                    f"{entry} {fld}",
                    f"{value!r} is looser than {where} {fld} = {base!r};"
                    " agent overlays may only be stricter",
                )

    def _uses_hash(self) -> bool:
        return self._first_hash_entry() != ""

    def _first_hash_entry(self) -> str:
        for entry, rule in self._base_rules():
            for fld in ("args", "output"):
                if getattr(rule, fld) == "hash":
                    return f"{entry} {fld}"
        for a in self.agents:
            for fld in ("args", "output"):
                if getattr(a, fld) == "hash":
                    return f"[agents.{json.dumps(a.match)}] {fld}"
            for t in a.tools:
                for fld in ("args", "output"):
                    if getattr(t, fld) == "hash":
                        return f"{tool_entry(t.match, a.match)} {fld}"
        return ""

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def default(cls) -> RedactionPolicy:
        """Keep everything, scrub secrets (a shared instance)."""
        return _default_policy()

    @classmethod
    def from_toml(cls, text: str, *, source: str = "<string>") -> RedactionPolicy:
        """Build a policy from TOML text (format in docs/redaction.md).

        Raises:
            PolicyError: unknown keys, bad actions, globs or regexes, a looser agent overlay,
                ``hash`` without a key — one line naming ``source`` and the entry.
        """
        return cls(**policy_fields_from_toml(text, source=source))

    @classmethod
    def load(cls, path: str | PathLike[str] | None = None) -> RedactionPolicy:
        """Load the policy: ``path`` argument > ``$INTENTRACE_REDACTION_POLICY`` > default.

        Raises:
            PolicyError: the file cannot be read or is not a valid policy.
        """
        if path is None:
            env = os.environ.get(INTENTRACE_REDACTION_POLICY, "")
            if not env:
                return _default_policy()
            path = env
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise PolicyError(str(p), "", f"cannot read the policy file: {reason}") from None
        return cls.from_toml(text, source=str(p))

    # -- decisions ---------------------------------------------------------------------------

    def decide(self, tool_name: str, agent_id: str | None = None) -> Decision:
        """The actions and label flags for one call of ``tool_name`` by ``agent_id``."""
        cache_key = (tool_name, agent_id)
        hit = self._cache.get(cache_key)
        if hit is not None:
            return hit
        d = self._resolve(tool_name, agent_id)
        with self._lock:
            if len(self._cache) >= 4096:
                self._cache.clear()
            self._cache[cache_key] = d
        return d

    def _resolve(self, tool_name: str, agent_id: str | None) -> Decision:
        args: Action = self.default_rule.args or "keep"
        output: Action = self.default_rule.output or "keep"
        rule = self._tool_rule(self.tools, tool_name)
        if rule is not None:
            args = rule.args or args
            output = rule.output or output
        if agent_id is not None:
            for a in self.agents:
                if not matches(a.match, agent_id):
                    continue
                if a.args is not None:
                    args = stricter(args, a.args)
                if a.output is not None:
                    output = stricter(output, a.output)
                for t in a.tools:
                    if matches(t.match, tool_name):
                        if t.args is not None:
                            args = stricter(args, t.args)
                        if t.output is not None:
                            output = stricter(output, t.output)
        return Decision(args, output)

    def strictest(self, kind: str) -> Action:
        """The strictest action any call, of any tool by any agent, can get on ``kind``
        (``"args"`` or ``"output"``): what data gets when its tool cannot be told."""
        fld = "output" if kind == "output" else "args"
        found: Action = cast("Action | None", getattr(self.default_rule, fld)) or "keep"
        layers: list[Rule | ToolRule | AgentOverlay] = [*self.tools]
        for a in self.agents:
            layers.append(a)
            layers.extend(a.tools)
        for layer in layers:
            action = cast("Action | None", getattr(layer, fld))
            if action is not None:
                found = stricter(found, action)
        return found

    @staticmethod
    def _tool_rule(rules: tuple[ToolRule, ...], name: str) -> ToolRule | None:
        glob_hit: ToolRule | None = None
        for t in rules:
            if t.match == name:
                return t
            if glob_hit is None and is_glob(t.match) and fnmatch.fnmatchcase(name, t.match):
                glob_hit = t
        return glob_hit

    # -- scrubbing ---------------------------------------------------------------------------

    def scrub(self, value: T) -> Scrubbed[T]:
        """Scrub secrets from any JSON-like value or string (JSON text inside strings too).

        Raises:
            RedactionError: scrubbing could not run (callers drop the data: fail closed).
        """
        try:
            out, trail = self._scrubber.scrub(value, "$")
        except Exception as exc:
            raise RedactionError(f"scrubbing failed: {type(exc).__name__}") from None
        return Scrubbed(cast(T, out), tuple(trail))

    def scrub_text(self, text: str) -> str:
        """Scrub secrets from one string (a span name, an error message, a label).

        Raises:
            RedactionError: scrubbing could not run.
        """
        try:
            out, _ = self._scrubber.scrub_text(text)
        except Exception as exc:
            raise RedactionError(f"scrubbing failed: {type(exc).__name__}") from None
        return out

    def stats(self) -> dict[str, str]:
        """The scrubber's engine: ``engine`` (``hyperscan`` or ``python``), ``engine_detail``."""
        return self._scrubber.stats()

    @property
    def scrubber(self) -> Scrubber:
        """The compiled scrubber (for adapters)."""
        return self._scrubber

    # -- the one entry point -----------------------------------------------------------------

    def redact_call(
        self,
        *,
        tool_name: str,
        agent_id: str | None = None,
        args: Any = None,
        intent: str | None = None,
        outcome: str | None = None,
        output: Any = None,
        error: str | None = None,
    ) -> RedactedCall:
        """Redact one tool call for every sink: args and output by the policy's actions,
        intent and outcome by the label rule, everything kept scrubbed of secrets.

        The intent passed in is the raw model text; apply ``sanitize_label`` after this.

        Raises:
            RedactionError: redaction could not run; the caller drops the span or anchor.
        """
        try:
            return self._redact_call(tool_name, agent_id, args, intent, outcome, output, error)
        except RedactionError:
            raise
        except Exception as exc:
            raise RedactionError(f"redaction failed: {type(exc).__name__}") from None

    def _redact_call(  # noqa: PLR0917
        self,
        tool_name: str,
        agent_id: str | None,
        args: Any,
        intent: str | None,
        outcome: str | None,
        output: Any,
        error: str | None,
    ) -> RedactedCall:
        decision = self.decide(tool_name, agent_id)
        trail: list[TrailEntry] = []
        args_out = self._apply(decision.args, args, "args", trail)
        output_out = self._apply(decision.output, output, "output", trail)
        intent_out = self._label(intent, decision.show_intent, "intent", trail)
        outcome_out = self._label(outcome, decision.show_outcome, "outcome", trail)
        error_out: str | None = None
        if error is not None:
            error_out, t = self._scrubber.scrub_text(str(error), "error")
            trail.extend(t)
        return RedactedCall(
            decision=decision,
            args=args_out,
            intent=intent_out,
            outcome=outcome_out,
            output=output_out,
            error=error_out,
            trail=tuple(trail),
        )

    def _label(
        self, text: str | None, show: bool, root: str, trail: list[TrailEntry]
    ) -> str | None:
        if text is None:
            return None
        if not show:
            trail.append(TrailEntry(root, "policy"))
            return None
        out, t = self._scrubber.scrub_text(str(text), root)
        trail.extend(t)
        return out

    def _apply(self, action: Action, value: Any, root: str, trail: list[TrailEntry]) -> Any:
        if value is None:
            return None
        if action == "keep":
            out, t = self._scrubber.scrub(value, root)
            trail.extend(t)
            return out
        trail.append(TrailEntry(root, "policy"))
        if action == "redact":
            return placeholder("policy")
        return self._hash_value(value)

    # -- hashing -----------------------------------------------------------------------------

    def hash_text(self, value: str | bytes) -> str:
        """The HMAC form of one value: ``[hmac:<32 hex>]`` (keyed HMAC-SHA256, truncated).

        Raises:
            RedactionError: no hash key is configured.
        """
        key = self.hash_key
        if key is None:
            env = os.environ.get(INTENTRACE_REDACTION_HASH_KEY, "")
            if not env:
                raise RedactionError(f"no hash key: set ${INTENTRACE_REDACTION_HASH_KEY}")
            key = env.encode()
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        digest = hmac.new(key, data, hashlib.sha256).hexdigest()[:32]
        return f"{HMAC_PREFIX}{digest}]"

    def _hash_value(self, value: Any) -> Any:
        """Hash the leaves, keep the shape (JSON text stays JSON text)."""
        if isinstance(value, str):
            stripped = value.lstrip()[:1]
            if stripped in ("{", "["):
                try:
                    obj = json.loads(value)
                except ValueError:
                    obj = None
                if isinstance(obj, dict | list):
                    return json.dumps(self._hash_tree(obj, 0), ensure_ascii=False)
            if self._scrubber.is_placeholder(value):
                return value
            return self.hash_text("s:" + value)
        if isinstance(value, bytes | bytearray):
            return self.hash_text(b"b:" + bytes(value))
        return self._hash_tree(value, 0)

    def _hash_tree(self, v: Any, depth: int) -> Any:
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int | float):
            return self.hash_text("n:" + json.dumps(v))
        if isinstance(v, str):
            # an HMAC form or a placeholder stays as it is: hashing hashed data changes nothing
            return v if self._scrubber.is_placeholder(v) else self.hash_text("s:" + v)
        if depth >= self._scrubber.options.max_depth:
            return placeholder("depth")
        if isinstance(v, Mapping):
            out: dict[Any, Any] = {}
            for k, x in cast("Mapping[Any, Any]", v).items():
                key = self._scrubber.scrub_text(k)[0] if isinstance(k, str) else k
                out[key] = self._hash_tree(x, depth + 1)
            return out
        if isinstance(v, list | tuple):
            return [self._hash_tree(x, depth + 1) for x in cast("list[Any]", v)]
        return self.hash_text("o:" + str(v))

    # -- Langfuse adapter --------------------------------------------------------------------

    def langfuse_mask(self, *, data: Any, **kwargs: Any) -> Any:
        """For ``Langfuse(mask=policy.langfuse_mask)``: scrub observation input, output and
        metadata. Never raises: if scrubbing fails, the data is replaced (fail closed). The
        export-time hook for span attributes is ``tracing.otel.langfuse_span_mask(policy)``."""
        try:
            media: dict[str, Any] = {}
            out = self._scrubber.scrub(_set_aside_media(data, media, 0), "$")[0]
            return _restore_media(out, media, 0) if media else out
        except Exception:
            _log.warning("redaction: langfuse mask failed; the value was replaced", exc_info=True)
            return placeholder("error")


_MEDIA_TYPES: Final = frozenset({"LangfuseMedia"})
"""Langfuse's media wrappers: it hands them to ``mask`` after swapping base64 data URIs for them
and serialises them to a media reference afterwards. Binary content has no text to scrub; the
scrubber would turn the wrapper into its ``str()`` and break the reference."""
_MEDIA_DEPTH: Final = 64


def _set_aside_media(value: Any, media: dict[str, Any], depth: int) -> Any:
    if type(value).__name__ in _MEDIA_TYPES:
        token = f"langfusemedia{secrets.token_hex(8)}"
        media[token] = value
        return token
    if depth > _MEDIA_DEPTH:
        return value
    if isinstance(value, Mapping):
        items = cast("Mapping[Any, Any]", value).items()
        return {k: _set_aside_media(v, media, depth + 1) for k, v in items}
    if isinstance(value, list | tuple):
        seq = cast("list[Any] | tuple[Any, ...]", value)
        return type(seq)(_set_aside_media(v, media, depth + 1) for v in seq)
    return value


def _restore_media(value: Any, media: dict[str, Any], depth: int) -> Any:
    if isinstance(value, str):
        return media.get(value, value)
    if depth > _MEDIA_DEPTH:
        return value
    if isinstance(value, dict):
        items = cast("dict[Any, Any]", value).items()
        return {k: _restore_media(v, media, depth + 1) for k, v in items}
    if isinstance(value, list | tuple):
        seq = cast("list[Any] | tuple[Any, ...]", value)
        return type(seq)(_restore_media(v, media, depth + 1) for v in seq)
    return value


_default_instance: list[RedactionPolicy] = []


def _default_policy() -> RedactionPolicy:
    if not _default_instance:
        _default_instance.append(RedactionPolicy())
    return _default_instance[0]
