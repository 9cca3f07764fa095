"""``MCPToolArgs``: what an ``mcp`` 2.x server's own tool spans lack, recorded on them.

mcp 2.x servers make a SERVER span ``tools/call <tool>`` per call (``gen_ai.operation.name=
execute_tool``, ``gen_ai.tool.name``) but record neither the call's arguments nor its result,
so no intent can be read from it. Passed as server middleware (``MCPServer(...,
middleware=[MCPToolArgs()])``), which the SDK runs inside its OpenTelemetry middleware, this
sets ``gen_ai.tool.call.arguments`` on that span before the tool runs and
``gen_ai.tool.call.result`` after. It imports nothing of ``mcp``: the middleware protocol is
``await middleware(ctx, call_next)``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from opentelemetry import trace

from tracing import attributes as A
from tracing.diagnostics import ErrorLog

_TOOLS_CALL = "tools/call"
_ERRORS = ErrorLog("mcp", logging.getLogger(__name__))


def _json(value: Any) -> str | None:
    dump = getattr(value, "model_dump", None)  # a pydantic model (mcp's CallToolResult)
    if callable(dump):
        value = dump(mode="json", by_alias=True, exclude_none=True)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


class MCPToolArgs:
    """mcp 2.x server middleware: each ``tools/call``'s arguments and result on its span.

    Example:
        ``MCPServer("code", middleware=[tracing.MCPToolArgs()])``. Then the calls of tools
        listed in ``configure(intent_tools=[...])`` are named by their intent and outcome.
        Never raises into the server: a bug of its own is reported to ``tracing.diagnostics``.
    """

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        span = None
        try:
            params = getattr(ctx, "params", None)
            if getattr(ctx, "method", None) == _TOOLS_CALL and isinstance(params, Mapping):
                arguments = cast("Mapping[str, Any]", params).get("arguments")
                text = _json(arguments if arguments is not None else {})
                current = trace.get_current_span()
                if text is not None and current.is_recording():
                    current.set_attribute(A.GEN_AI_TOOL_CALL_ARGUMENTS, text)
                    span = current
        except Exception as exc:  # never raise into the server
            _ERRORS.report("MCPToolArgs", exc)
        result = await call_next(ctx)
        if span is not None:
            try:
                text = _json(result)
                if text is not None:
                    span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, text)
            except Exception as exc:  # never raise into the server
                _ERRORS.report("MCPToolArgs", exc)
        return result
