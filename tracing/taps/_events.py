"""Stream events of the SDKs and frameworks -> ``start``/``feed``/``end``/``whole``.

Duck-typed on the events' documented fields (no SDK import): the SDKs stay optional and a
subclass or a look-alike event (a framework's re-typed copy) works the same.

===================================  =====================================================
event                                step
===================================  =====================================================
openai Chat Completions chunk        ``choices[i].delta.tool_calls[j]``: ``id``/``function.name``
(also LiteLLM's ``ModelResponse``    start the call at (i, j), and complete the choice's
chunks)                              earlier calls; ``function.arguments`` feeds it;
                                     ``finish_reason`` ends the choice's calls (``length``,
                                     ``content_filter``: the last one was cut)
openai helper ``chunk`` event        its ``chunk`` as above
openai Responses                     ``response.output_item.added`` (a ``function_call`` item:
                                     ``call_id``, ``name``) starts; ``response.function_call_
                                     arguments.delta`` feeds; ``...arguments.done`` and
                                     ``response.output_item.done`` end; ``error``,
                                     ``response.failed``, ``response.incomplete`` give the reason
anthropic Messages                   ``content_block_start`` (a ``tool_use`` block: ``id``,
                                     ``name``) starts; ``content_block_delta`` with an
                                     ``input_json_delta`` feeds ``partial_json``;
                                     ``content_block_stop`` ends
openai-agents ``raw_response_event`` its ``data`` (a Responses event) as above
pydantic-ai ``part_start``/          a ``tool-call`` part starts (``tool_call_id``,
``part_delta``/``part_end``          ``tool_name``), ``args_delta`` feeds it, ``part_end`` and
(``function_tool_call``)             ``function_tool_call`` end it; dict arguments are whole
Google Gemini chunk                  each ``candidates[i].content.parts[j].function_call``
                                     arrives whole: one row with its whole intent
===================================  =====================================================

Calls are keyed by their position: (choice index, tool call index) for Chat Completions, the
output index for Responses, the content block index for Anthropic, the part index for
pydantic-ai, (candidate, n-th call) for Gemini. A position reused by another call id (the
next response of a stream that holds several) starts a new call.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    from tracing.taps._tracker import ToolCallTracker

Handler = Callable[["ToolCallTracker", Any], None]


_CUT_SHORT: Final = frozenset({"length", "content_filter"})
"""Chat ``finish_reason`` values that cut the last call's arguments short."""


def _chat_chunk(tracker: ToolCallTracker, chunk: Any) -> None:
    choices = chunk.choices
    if not choices:
        return
    for choice in choices:
        delta = choice.delta
        tool_calls = delta.tool_calls if delta is not None else None
        if tool_calls:
            for tc in tool_calls:
                fn = tc.function
                call_id = tc.id
                name = None
                if call_id is None:
                    if fn is not None:
                        name = fn.name
                    if not name:
                        tops = tracker.tops
                        if tops and not tracker.interleaved:
                            top = tops.get(choice.index)
                            if top is not None and tc.index is not None and tc.index < top:
                                tracker.interleaved = True  # an earlier call's delta, again
                        if not tracker.active:
                            continue  # more arguments of calls whose intent is read already
                elif fn is not None:
                    name = fn.name
                key = (choice.index, tc.index)
                if (call_id is not None or name) and tracker.start(
                    key, call_id, name, batch=getattr(chunk, "id", None)
                ):
                    index = tc.index
                    if isinstance(index, int):
                        tracker.supersede(choice.index, index)
                if fn is not None and fn.arguments:
                    tracker.feed(key, fn.arguments)
        reason = choice.finish_reason
        if reason is not None:
            if reason in _CUT_SHORT:
                tracker.fail(f"finish_reason {reason}")  # the last call's arguments were cut
            else:
                tracker.end_all(choice.index)


def _chat_chunk_event(tracker: ToolCallTracker, event: Any) -> None:
    _chat_chunk(tracker, event.chunk)


def _response_created(tracker: ToolCallTracker, event: Any) -> None:
    tracker.response(getattr(getattr(event, "response", None), "id", None))


def _response_item_added(tracker: ToolCallTracker, event: Any) -> None:
    item = event.item
    if getattr(item, "type", None) != "function_call":
        return
    key: Hashable = event.output_index
    tracker.start(key, item.call_id, item.name)
    if item.arguments:
        tracker.feed(key, item.arguments)


def _response_args_delta(tracker: ToolCallTracker, event: Any) -> None:
    if tracker.active:
        tracker.feed(event.output_index, event.delta)


def _response_args_done(tracker: ToolCallTracker, event: Any) -> None:
    tracker.done(event.output_index, getattr(event, "arguments", None))


def _response_item_done(tracker: ToolCallTracker, event: Any) -> None:
    item = event.item
    if getattr(item, "type", None) == "function_call":
        tracker.done(event.output_index, item.arguments)


def _error_text(error: Any) -> str:
    """``code: message`` of an error object or event (whichever of the two it has)."""
    if error is None:
        return "unknown error"
    if isinstance(error, str):
        return error
    fields: dict[str, Any] = (
        cast("dict[str, Any]", error)
        if isinstance(error, dict)
        else {k: getattr(error, k, None) for k in ("code", "type", "message")}
    )
    code: object = fields.get("code") or fields.get("type")
    message: object = fields.get("message")
    parts = [str(p) for p in (code, message) if p]
    return ": ".join(parts) or "unknown error"


def _error(tracker: ToolCallTracker, event: Any) -> None:
    # Responses: {"type": "error", "code", "message"}; Anthropic: {"type": "error", "error"}
    inner = getattr(event, "error", None)
    tracker.fail(_error_text(inner if inner is not None else event))


def _response_failed(tracker: ToolCallTracker, event: Any) -> None:
    tracker.fail(_error_text(getattr(getattr(event, "response", None), "error", None)))


def _response_incomplete(tracker: ToolCallTracker, event: Any) -> None:
    details = getattr(getattr(event, "response", None), "incomplete_details", None)
    reason = getattr(details, "reason", None) or "unknown reason"
    tracker.fail(f"the response is incomplete: {reason}")


def _message_start(tracker: ToolCallTracker, event: Any) -> None:
    tracker.response(getattr(getattr(event, "message", None), "id", None))


def _block_start(tracker: ToolCallTracker, event: Any) -> None:
    block = event.content_block
    if getattr(block, "type", None) == "tool_use":
        tracker.start(event.index, block.id, block.name)


def _block_delta(tracker: ToolCallTracker, event: Any) -> None:
    if not tracker.active:
        return  # text, or more arguments of calls whose intent is read already
    delta = event.delta
    if getattr(delta, "type", None) == "input_json_delta":
        tracker.feed(event.index, delta.partial_json)


def _block_stop(tracker: ToolCallTracker, event: Any) -> None:
    tracker.end(event.index)


def _raw_response(tracker: ToolCallTracker, event: Any) -> None:
    # openai-agents: RawResponsesStreamEvent wraps the provider's event (Responses events,
    # also for its Chat Completions model, which converts chunks into them)
    dispatch(tracker, event.data)


_BY_TYPE: Final[dict[str, Handler]] = {
    # openai Responses
    "response.created": _response_created,
    "response.output_item.added": _response_item_added,
    "response.function_call_arguments.delta": _response_args_delta,
    "response.function_call_arguments.done": _response_args_done,
    "response.output_item.done": _response_item_done,
    "response.failed": _response_failed,
    "response.incomplete": _response_incomplete,
    "error": _error,  # Responses and Anthropic
    # openai Chat Completions helper (client.chat.completions.stream)
    "chunk": _chat_chunk_event,
    # anthropic Messages
    "message_start": _message_start,
    "content_block_start": _block_start,
    "content_block_delta": _block_delta,
    "content_block_stop": _block_stop,
    # openai-agents (Runner.run_streamed(...).stream_events())
    "raw_response_event": _raw_response,
}


def _by_type(tracker: ToolCallTracker, event: Any) -> None:
    handler = _BY_TYPE.get(event.type)
    if handler is not None:
        handler(tracker, event)


# --- pydantic-ai (agent.iter node streams, run_stream, event_stream_handler) --------------------
def _part_start(tracker: ToolCallTracker, event: Any) -> None:
    part = event.part
    if getattr(part, "part_kind", None) != "tool-call":
        return
    args = part.args
    if isinstance(args, dict):  # a provider that sends the arguments parsed, whole
        tracker.whole(event.index, part.tool_call_id, part.tool_name, args)  # pyright: ignore[reportUnknownArgumentType]
        return
    tracker.start(event.index, part.tool_call_id, part.tool_name)
    if args:
        tracker.feed(event.index, args)


def _part_delta(tracker: ToolCallTracker, event: Any) -> None:
    delta = event.delta
    if getattr(delta, "part_delta_kind", None) != "tool_call":
        return
    if delta.tool_call_id:  # (a name delta is a piece of a name: the part start had it)
        tracker.start(event.index, delta.tool_call_id)
    args = delta.args_delta
    if isinstance(args, str) and args and tracker.active:
        tracker.feed(event.index, args)


def _part_end(tracker: ToolCallTracker, event: Any) -> None:
    if getattr(event.part, "part_kind", None) == "tool-call":
        tracker.end(event.index)


def _tool_call_event(tracker: ToolCallTracker, event: Any) -> None:
    # CallToolsNode: the tool is about to run, so its arguments are complete
    tracker.end_id(event.part.tool_call_id)


_BY_KIND: Final[dict[str, Handler]] = {
    "part_start": _part_start,
    "part_delta": _part_delta,
    "part_end": _part_end,
    "function_tool_call": _tool_call_event,
}


def _by_kind(tracker: ToolCallTracker, event: Any) -> None:
    handler = _BY_KIND.get(event.event_kind)
    if handler is not None:
        handler(tracker, event)


# --- Google Gemini (generate_content_stream) ------------------------------------------------------
def _gemini_chunk(tracker: ToolCallTracker, chunk: Any) -> None:
    candidates = chunk.candidates
    if not candidates:
        return
    response_id = getattr(chunk, "response_id", None)
    tracker.response(response_id)
    for candidate in candidates:
        content = candidate.content
        parts = getattr(content, "parts", None) if content is not None else None
        if not parts:
            continue
        for part in parts:
            fc = getattr(part, "function_call", None)
            if fc is None or fc.args is None or not fc.name:
                continue  # not a call, or one whose arguments still stream (Gemini 3)
            group = candidate.index or 0
            n = tracker.counts.get(group, 0)
            tracker.counts[group] = n + 1
            call_id = fc.id or gemini_call_id(response_id or "", n, candidate=group)
            tracker.whole(("gemini", group, n), call_id, fc.name, fc.args)


def gemini_call_id(response_id: str, n: int, *, candidate: int = 0) -> str:
    """The ledger id of the ``n``-th function call (from 0) of a Gemini response that gave the
    call no ``id`` of its own: ``<responseId>#<n>`` (``#<candidate>.<n>`` past the first
    candidate). Pass it to ``tool_call(..., call_id=...)`` so the processor meets the row."""
    return f"{response_id}#{n}" if candidate == 0 else f"{response_id}#{candidate}.{n}"


def _ignore(tracker: ToolCallTracker, event: Any) -> None:
    pass


ROUTES: Final[dict[type[Any], Handler]] = {}
"""Event class -> how to read it (decided on the first event of each class)."""


def route_for(event: Any) -> Handler:
    """How to read events of this one's class (decided once per class)."""
    cls: type[Any] = event.__class__
    route = ROUTES.get(cls)
    if route is not None:
        return route
    if isinstance(getattr(event, "type", None), str):
        route = _by_type
    elif getattr(event, "object", None) == "chat.completion.chunk" or hasattr(event, "choices"):
        route = _chat_chunk
    elif isinstance(getattr(event, "event_kind", None), str):
        route = _by_kind
    elif hasattr(event, "candidates"):
        route = _gemini_chunk
    else:
        route = _ignore
    ROUTES[cls] = route
    return route


def dispatch(tracker: ToolCallTracker, event: Any) -> None:
    """Apply one stream event to ``tracker``."""
    cls: type[Any] = event.__class__
    route = ROUTES.get(cls)
    if route is None:
        route = route_for(event)
    route(tracker, event)
