"""The Langfuse SDK v5 ``mask_otel_spans`` hook: export-time attribute patches by the policy.

``Langfuse(mask=policy.langfuse_mask, mask_otel_spans=langfuse_span_mask(policy))``. The hook
lives here, not in ``redaction``, because it must know where each convention keeps a tool span's
args and results; ``redaction`` stays the bottom layer (it imports nothing of ours).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from redaction import TrailEntry
from redaction._scrubber import placeholder
from tracing import attributes as A

if TYPE_CHECKING:
    from redaction import Action, RedactionPolicy

_log = logging.getLogger("tracing.langfuse")

# Where the conventions of DESIGN.md keep a tool span's name, args, result and agent.
TOOL_NAME_KEYS: Final = (A.TOOL_NAME, "gen_ai.tool.name", "tool.name")
AGENT_KEYS: Final = (A.AGENT_ID, "gen_ai.agent.id", "gen_ai.agent.name", "agent.id", "agent.name")
ARGS_KEYS: Final = (
    "gen_ai.tool.call.arguments",
    "input.value",
    "traceloop.entity.input",
    "langfuse.observation.input",
)
OUTPUT_KEYS: Final = (
    "gen_ai.tool.call.result",
    "output.value",
    "traceloop.entity.output",
    "langfuse.observation.output",
)
# Attributes that carry the intent (deleted when the intent is hidden) or the outcome (deleted
# when the outcome is hidden): ours by name, anyone's by the last dotted segment.
_INTENT_KEYS: Final = frozenset({A.INTENT, A.LABEL})
_INTENT_SUFFIXES: Final = frozenset({"intent"})
_OUTCOME_KEYS: Final = frozenset({A.OUTCOME, A.OUTCOME_PATCH})
_OUTCOME_SUFFIXES: Final = frozenset({"outcome", "outcome_patch"})
_ERROR: Final = placeholder("error")
_FAIL_CLOSED: Final = "fail closed: redaction could not build the patches"
"""Returned (instead of a ``MaskOtelSpansResult``) only if building any result failed:
Langfuse then drops the batch without a raise in its export thread."""


def _tool_name(name: str, attrs: Mapping[str, Any]) -> str | None:
    for key in TOOL_NAME_KEYS:
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
    if attrs.get("traceloop.span.kind") == "tool":
        value = attrs.get("traceloop.entity.name")
        return value if isinstance(value, str) and value else name
    if attrs.get("langfuse.observation.type") == "tool" or attrs.get("openinference.span.kind") in (
        "TOOL",
        "tool",
    ):
        return name
    if attrs.get("gen_ai.operation.name") == "execute_tool":
        return name.removeprefix("execute_tool ").strip() or name
    return None


def _agent(attrs: Mapping[str, Any]) -> str | None:
    for key in AGENT_KEYS:
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _span_patch(
    policy: RedactionPolicy, name: str, attrs: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """(attributes to set, attributes to delete) for one span."""
    tool = _tool_name(name, attrs)
    decision = policy.decide(tool, _agent(attrs)) if tool is not None else None
    actions: dict[str, Action] = {}
    delete: list[str] = []
    if decision is not None:
        for key in ARGS_KEYS:
            actions[key] = decision.args
        for key in OUTPUT_KEYS:
            actions[key] = decision.output
        for key in attrs:
            last = key.rsplit(".", 1)[-1]
            intent = key in _INTENT_KEYS or last in _INTENT_SUFFIXES
            outcome = key in _OUTCOME_KEYS or last in _OUTCOME_SUFFIXES
            if (intent and not decision.show_intent) or (outcome and not decision.show_outcome):
                delete.append(key)
    rest = {k: v for k, v in attrs.items() if k not in actions and k not in delete}
    scrubbed, _ = policy.scrubber.scrub(rest, "$")
    new: dict[str, Any] = dict(scrubbed)
    trail: list[TrailEntry] = []
    for key, action in actions.items():
        if key in attrs:
            new[key] = policy._apply(action, attrs[key], key, trail)  # pyright: ignore[reportPrivateUsage]
    updates: dict[str, Any] = {}
    for key, raw in new.items():
        old = attrs.get(key)
        if key not in attrs or raw == old:
            continue
        value: Any = tuple(cast("list[Any]", raw)) if isinstance(raw, list) else raw
        # Langfuse's own attributes are JSON text: keep them JSON after a replacement.
        if (
            key.startswith("langfuse.")
            and isinstance(old, str)
            and isinstance(value, str)
            and _is_json(old)
            and not _is_json(value)
        ):
            value = json.dumps(value)
        updates[key] = value
    # A key that the scrubber renamed (a secret inside an attribute name) is dropped.
    delete.extend(k for k in attrs if k not in new and k not in delete)
    return updates, delete


def _fallback(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _ERROR for k, v in attrs.items() if not isinstance(v, bool | int | float)}


def mask_otel_spans(policy: RedactionPolicy, params: Any) -> Any:
    """Langfuse ``mask_otel_spans`` hook. Never raises (a raise drops Langfuse's batch)."""
    # lazy: the Langfuse SDK is the optional `langfuse` extra
    try:
        from langfuse.types import MaskOtelSpansResult, OtelSpanPatch

        patches: dict[Any, Any] = {}
        for identifier, span in params.spans.items():
            attrs: Mapping[str, Any] = span.attributes
            try:
                updates, delete = _span_patch(policy, str(span.name), attrs)
            except Exception:
                _log.warning("redaction: a span could not be scrubbed; its text was replaced")
                updates, delete = _fallback(attrs), []
            if updates or delete:
                patches[identifier] = OtelSpanPatch(
                    set_attributes=updates, delete_attributes=tuple(delete)
                )
        return MaskOtelSpansResult(span_patches=patches)
    except Exception:
        _log.error("redaction: mask_otel_spans failed; Langfuse drops this batch", exc_info=True)
        return _FAIL_CLOSED


def langfuse_span_mask(policy: RedactionPolicy) -> Callable[..., Any]:
    """For ``Langfuse(mask_otel_spans=langfuse_span_mask(policy))``: export-time attribute
    patches (tool args/results by the policy, every string scrubbed, hidden intent and outcome
    attributes deleted). Never raises; a span that cannot be scrubbed has its string attributes
    replaced (fail closed). Span names are out of its reach (the span processor renames)."""

    def hook(*, params: Any, **_: Any) -> Any:
        return mask_otel_spans(policy, params)

    return hook
