"""Stream events of the ``openai`` and ``anthropic`` SDKs -> ``start``/``feed``/``end``.

Duck-typed on the events' documented fields (no SDK import): the SDKs stay optional and a
subclass or a look-alike event (a framework's re-typed copy) works the same.

===================================  =====================================================
event                                step
===================================  =====================================================
openai Chat Completions chunk        ``choices[i].delta.tool_calls[j]``: ``id``/``function.name``
                                     start the call at (i, j); ``function.arguments`` feeds it;
                                     ``choices[i].finish_reason`` ends the choice's calls
openai helper ``chunk`` event        its ``chunk`` as above
openai Responses                     ``response.output_item.added`` (a ``function_call`` item:
                                     ``call_id``, ``name``) starts; ``response.function_call_
                                     arguments.delta`` feeds; ``...arguments.done`` and
                                     ``response.output_item.done`` end
anthropic Messages                   ``content_block_start`` (a ``tool_use`` block: ``id``,
                                     ``name``) starts; ``content_block_delta`` with an
                                     ``input_json_delta`` feeds ``partial_json``;
                                     ``content_block_stop`` ends
===================================  =====================================================

Calls are keyed by their position: (choice index, tool call index) for Chat Completions, the
output index for Responses, the content block index for Anthropic.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from tracing.taps._tracker import ToolCallTracker

Handler = Callable[["ToolCallTracker", Any], None]


def _chat_chunk(tracker: ToolCallTracker, chunk: Any) -> None:
    choices = chunk.choices
    if not choices:
        return
    if tracker.batch_id is None:
        tracker.batch_id = getattr(chunk, "id", None) or None
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
                    if not name and not tracker.active:
                        continue  # more arguments of calls whose intent is read already
                elif fn is not None:
                    name = fn.name
                key = (choice.index, tc.index)
                if call_id is not None or name:
                    tracker.start(key, call_id, name)
                if fn is not None and fn.arguments:
                    tracker.feed(key, fn.arguments)
        if choice.finish_reason is not None:
            tracker.end_all(choice.index)


def _chat_chunk_event(tracker: ToolCallTracker, event: Any) -> None:
    _chat_chunk(tracker, event.chunk)


def _response_created(tracker: ToolCallTracker, event: Any) -> None:
    if tracker.batch_id is None:
        response = getattr(event, "response", None)
        tracker.batch_id = getattr(response, "id", None) or None


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


def _message_start(tracker: ToolCallTracker, event: Any) -> None:
    if tracker.batch_id is None:
        tracker.batch_id = getattr(getattr(event, "message", None), "id", None) or None


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


_BY_TYPE: Final[dict[str, Handler]] = {
    # openai Responses
    "response.created": _response_created,
    "response.output_item.added": _response_item_added,
    "response.function_call_arguments.delta": _response_args_delta,
    "response.function_call_arguments.done": _response_args_done,
    "response.output_item.done": _response_item_done,
    # openai Chat Completions helper (client.chat.completions.stream)
    "chunk": _chat_chunk_event,
    # anthropic Messages
    "message_start": _message_start,
    "content_block_start": _block_start,
    "content_block_delta": _block_delta,
    "content_block_stop": _block_stop,
}


def _by_type(tracker: ToolCallTracker, event: Any) -> None:
    handler = _BY_TYPE.get(event.type)
    if handler is not None:
        handler(tracker, event)


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
