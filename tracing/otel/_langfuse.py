"""The Langfuse SDK v5 ``mask_otel_spans`` hook: export-time attribute patches by the policy.

``Langfuse(mask=policy.langfuse_mask, mask_otel_spans=langfuse_span_mask(policy))``. The hook
lives here, not in ``redaction``, because it must know where each convention keeps a tool span's
args and results; ``redaction`` stays the bottom layer (it imports nothing of ours).
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from redaction import placeholder
from tracing import attributes as A
from tracing.derive._conventions import (
    ALL_ARGS_KEYS,
    ALL_RESULT_KEYS,
    DEFAULT_CONVENTIONS,
    GENAI,
    Convention,
    SpanView,
    match_convention,
    requested_calls,
)
from tracing.derive._listed import Resolve
from tracing.derive._redact import SpanRedactor, redact_span_data, trace_redactor

if TYPE_CHECKING:
    from redaction import RedactionPolicy

_log = logging.getLogger("tracing.langfuse")

# Where the conventions keep a tool span's args and results: the processor's own table
# (tracing/derive/_conventions.py), so that the two paths cannot drift apart.
ARGS_KEYS: Final = ALL_ARGS_KEYS
OUTPUT_KEYS: Final = ALL_RESULT_KEYS
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


def _convention(
    name: str, attrs: Mapping[str, Any], conventions: tuple[Convention, ...]
) -> Convention | None:
    """The convention that recognises a tool span (our own copies by ``intentrace.tool.name``)."""
    found = match_convention(name, attrs, conventions)
    if found is None and isinstance(attrs.get(A.TOOL_NAME), str):
        return GENAI  # our shaped copy for Langfuse: the tool name lives in intentrace.tool.name
    return found


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _batch_calls(spans: Mapping[Any, Any]) -> Resolve:
    """Call id -> tool name of every call listed or run in one export batch."""
    names: dict[str, str] = {}
    for span in spans.values():
        attrs: Mapping[str, Any] = span.attributes or {}
        for call in requested_calls(attrs):
            if call.call_id:
                names.setdefault(call.call_id, call.tool_name)
        call_id = attrs.get(A.GEN_AI_TOOL_CALL_ID) or attrs.get(A.OI_TOOL_CALL_ID)
        tool = attrs.get(A.TOOL_NAME) or attrs.get(A.GEN_AI_TOOL_NAME)
        if isinstance(call_id, str) and isinstance(tool, str):
            names.setdefault(call_id, tool)
    return names.get


def _span_patch(
    policy: RedactionPolicy,
    name: str,
    attrs: Mapping[str, Any],
    *,
    resolve: Resolve | None = None,
    conventions: tuple[Convention, ...] = DEFAULT_CONVENTIONS,
) -> tuple[dict[str, Any], list[str]]:
    """(attributes to set, attributes to delete) for one span: the processor's rule."""
    view = SpanView(name=name, attributes=attrs)
    convention = _convention(name, attrs, conventions)
    delete: list[str] = []
    if convention is not None:
        facts = convention.facts(view)
        own_tool = attrs.get(A.TOOL_NAME)
        tool = own_tool if isinstance(own_tool, str) and own_tool else facts.tool_name
        own_agent = attrs.get(A.AGENT_ID)
        agent = own_agent if isinstance(own_agent, str) and own_agent else facts.agent_id
        decision = policy.decide(tool, agent)
        redactor = SpanRedactor(
            policy, tool, agent, str(decision.args), str(decision.output), resolve=resolve
        )
        shaped, _, _, _ = redact_span_data(
            view,
            redactor,
            args_keys=convention.args_keys,
            result_keys=convention.result_keys,
            keep_ours=True,
        )
        new: Mapping[str, Any] = shaped
        for key in attrs:
            last = key.rsplit(".", 1)[-1]
            intent = key in _INTENT_KEYS or last in _INTENT_SUFFIXES
            outcome = key in _OUTCOME_KEYS or last in _OUTCOME_SUFFIXES
            if (intent and not decision.show_intent) or (outcome and not decision.show_outcome):
                delete.append(key)
    else:
        new, _ = trace_redactor(policy).attributes(attrs, resolve=resolve)
    updates: dict[str, Any] = {}
    for key, raw in new.items():
        old = attrs.get(key)
        if key not in attrs or key in delete or raw == old:
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
        resolve = _batch_calls(params.spans)
        for identifier, span in params.spans.items():
            attrs: Mapping[str, Any] = span.attributes
            try:
                updates, delete = _span_patch(policy, str(span.name), attrs, resolve=resolve)
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
    patches by the span processor's own rule (``tracing.derive``): tool args/results by the
    policy, the tool calls any span lists by their tools' policies, every attribute name and
    string scrubbed, hidden intent and outcome attributes deleted. Never raises; a span that
    cannot be scrubbed has its string attributes replaced (fail closed). Span names and events
    are out of its reach (the span processor redacts them)."""

    def hook(*, params: Any, **_: Any) -> Any:
        return mask_otel_spans(policy, params)

    return hook


# --------------------------------------------------------------------------------------------
# two Langfuse clients

SEVERAL_CLIENTS: Final = (
    "Langfuse: {count} clients with different public keys live in this process, so the Langfuse "
    "SDK skips every @observe call (and get_client()) that names no langfuse_public_key, "
    "without an error. Use one client: pass yours, configure(langfuse=<your Langfuse client>), "
    "or create it after configure(...) called without langfuse= (its processor is wrapped "
    "too); see docs/tracing.md, 'Your own Langfuse client'."
)
"""The warning (logger ``tracing.langfuse``) given once a process, when a second Langfuse client
(of another public key) appears beside one."""
_warned: set[str] = set()
"""The keys of the clients when the warning was given (empty: not given yet)."""


def langfuse_public_keys() -> frozenset[str]:
    """The public keys of the Langfuse clients alive in this process (the SDK keeps one client
    per key); empty without the SDK."""
    # lazy: the Langfuse SDK is the optional `langfuse` extra
    try:
        module = importlib.import_module("langfuse._client.resource_manager")
    except ImportError:
        return frozenset()
    manager: Any = getattr(module, "LangfuseResourceManager", None)
    instances: Any = getattr(manager, "_instances", None)
    if not isinstance(instances, Mapping):
        return frozenset()
    return frozenset(str(k) for k in cast("Mapping[Any, Any]", instances))


def check_langfuse_clients(adding: str | None = None) -> bool:
    """Warn once a process when clients of several public keys exist, counting
    ``adding`` (the key of a client being made). True when there are several. Never raises."""
    try:
        keys = langfuse_public_keys() | ({adding} if adding else set[str]())
        if len(keys) < 2:
            return False
        if not _warned:
            _warned.update(keys)
            _log.warning(SEVERAL_CLIENTS.format(count=len(keys)))
        return True
    except Exception:  # (private SDK state: a change there must not break configure)
        return False
