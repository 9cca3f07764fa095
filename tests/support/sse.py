"""A loopback HTTP server that replays SSE streams, and the providers' wire formats.

The real SDK clients point their ``base_url`` at the server; each request gets the next
scripted response, sent with chunked transfer encoding one SSE event (or byte slice) at a time.
``cut=True`` closes the connection without the terminating chunk (the client sees a broken
stream); ``eof=True`` ends the body cleanly but early (the client sees a stream that just
stops). The builders render events exactly as the providers send them (recorded shapes).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    parts: list[bytes]
    cut: bool = False
    status: int = 200
    delay_s: float = 0.0
    hold_at: int | None = None
    """Send this many parts, then wait for ``release`` (the client holds a stream mid-way)."""
    reached: threading.Event = field(default_factory=threading.Event)
    """Set once the parts before ``hold_at`` are sent."""
    release: threading.Event = field(default_factory=threading.Event)
    content_type: str = "text/event-stream; charset=utf-8"


@dataclass
class SSEServer:
    scripts: deque[Script] = field(default_factory=deque)
    requests: list[tuple[str, Any]] = field(default_factory=lambda: [])
    httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.httpd is not None
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def respond(
        self,
        parts: list[bytes],
        *,
        cut: bool = False,
        delay_s: float = 0.0,
        hold_at: int | None = None,
        status: int = 200,
        content_type: str | None = None,
    ) -> Script:
        script = Script(parts, cut=cut, delay_s=delay_s, hold_at=hold_at, status=status)
        if content_type is not None:
            script.content_type = content_type
        self.scripts.append(script)
        return script

    def start(self) -> SSEServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                try:
                    self.reply()
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                    self.close_connection = True

            def reply(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    server.requests.append((self.path, json.loads(body or b"null")))
                except ValueError:
                    server.requests.append((self.path, body))
                if not server.scripts:
                    self.send_response(500)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                script = server.scripts.popleft()
                self.send_response(script.status)
                self.send_header("content-type", script.content_type)
                self.send_header("transfer-encoding", "chunked")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                for n, part in enumerate(script.parts):
                    if n == script.hold_at:
                        script.reached.set()
                        script.release.wait(30)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.flush()
                    if script.delay_s:
                        time.sleep(script.delay_s)
                if script.hold_at is not None and script.hold_at >= len(script.parts):
                    script.reached.set()
                    script.release.wait(30)
                if script.cut:
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)  # a client that hung up is normal


def sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def split(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (the last may be shorter)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def interleave(*streams: list[Any]) -> list[Any]:
    """Round-robin merge: a1, b1, a2, b2, ... (parallel calls whose deltas interleave)."""
    out: list[Any] = []
    for i in range(max((len(s) for s in streams), default=0)):
        out.extend(s[i] for s in streams if i < len(s))
    return out


# --- OpenAI Chat Completions ------------------------------------------------------------------
CHAT_ID = "chatcmpl-AqN4bX7Yz2Lk9hQe3Rt5Uv8Wx1Cd"


def chat_chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    return sse(
        {
            "id": CHAT_ID,
            "object": "chat.completion.chunk",
            "created": 1737000000,
            "model": "gpt-4o-2024-08-06",
            "service_tier": "default",
            "system_fingerprint": "fp_f9f4fb6dbf",
            "choices": choices,
            "usage": None,
            **extra,
        }
    )


def chat_tool_start(index: int, call_id: str, name: str) -> bytes:
    return chat_chunk(
        [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                },
                "logprobs": None,
                "finish_reason": None,
            }
        ]
    )


def chat_tool_delta(index: int, arguments: str) -> bytes:
    return chat_chunk(
        [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]},
                "logprobs": None,
                "finish_reason": None,
            }
        ]
    )


def chat_finish(reason: str = "tool_calls") -> bytes:
    return chat_chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}])


def chat_stream(
    calls: list[tuple[str, str, str]],
    *,
    size: int = 7,
    interleaved: bool = True,
    done: bool = True,
    text: str | None = None,
    usage: bool = False,
    finish: str = "tool_calls",
) -> list[bytes]:
    """A Chat Completions stream with ``calls`` = [(call id, tool name, arguments JSON)].

    ``text``: content deltas first; ``usage``: the final usage chunk (``stream_options=
    {"include_usage": true}``: no choices); ``finish``: the ``finish_reason``."""
    parts = [
        chat_chunk(
            [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "content": "" if text else None,
                        "refusal": None,
                    },
                    "logprobs": None,
                    "finish_reason": None,
                }
            ]
        )
    ]
    for piece in split(text, 6) if text else []:
        parts.append(
            chat_chunk(
                [{"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}]
            )
        )
    per_call: list[list[bytes]] = []
    for i, (cid, name, args) in enumerate(calls):
        per_call.append(
            [chat_tool_start(i, cid, name)] + [chat_tool_delta(i, p) for p in split(args, size)]
        )
    if interleaved:
        parts += interleave(*per_call)
    else:
        for p in per_call:
            parts += p
    if done:
        parts.append(chat_finish(finish))
        if usage:
            parts.append(
                chat_chunk(
                    [], usage={"prompt_tokens": 91, "completion_tokens": 47, "total_tokens": 138}
                )
            )
        parts.append(sse("[DONE]"))
    return parts


def chat_error(message: str = "The server had an error while processing your request.") -> bytes:
    """The error object OpenAI sends in place of a chunk mid-stream."""
    return sse({"error": {"message": message, "type": "server_error", "param": None, "code": None}})


# --- OpenAI Responses -------------------------------------------------------------------------
RESP_ID = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"


def _response(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": RESP_ID,
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-4.1-2025-04-14",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": {},
    }


def responses_stream(
    calls: list[tuple[str, str, str]],
    *,
    size: int = 7,
    interleaved: bool = True,
    complete: bool = True,
    error_after: int | None = None,
    end_after: int | None = None,
    end: str = "completed",
    text: str | None = None,
) -> list[bytes]:
    """A Responses stream with function calls [(call id, tool name, arguments JSON)].

    ``text``: a message item with that output text first (every event of a text part).
    ``error_after``: an ``error`` event after that many argument deltas, then the stream ends.
    ``end_after`` deltas, then the response ends as ``end``: ``failed`` (``response.failed``
    with the provider's error) or ``incomplete`` (``response.incomplete``, max output tokens).
    """
    seq = 0

    def ev(kind: str, **data: Any) -> bytes:
        nonlocal seq
        out = sse({"type": kind, "sequence_number": seq, **data}, event=kind)
        seq += 1
        return out

    parts = [
        ev("response.created", response=_response("in_progress", [])),
        ev("response.in_progress", response=_response("in_progress", [])),
    ]
    first = 0
    if text is not None:
        first = 1
        msg = {"id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c9", "type": "message",
               "status": "in_progress", "role": "assistant", "content": []}  # fmt: skip
        part = {"type": "output_text", "text": "", "annotations": []}
        ids = {"item_id": msg["id"], "output_index": 0, "content_index": 0}
        parts += [
            ev("response.output_item.added", output_index=0, item=msg),
            ev("response.content_part.added", **ids, part=part),
            *[ev("response.output_text.delta", **ids, delta=p, logprobs=[]) for p in split(text, 5)],
            ev("response.output_text.done", **ids, text=text, logprobs=[]),
            ev("response.content_part.done", **ids, part={**part, "text": text}),
            ev("response.output_item.done", output_index=0,
               item={**msg, "status": "completed", "content": [{**part, "text": text}]}),
        ]  # fmt: skip

    def item(i: int, status: str, args: str) -> dict[str, Any]:
        cid, name, _ = calls[i]
        return {
            "id": f"fc_{i}{RESP_ID[5:20]}",
            "type": "function_call",
            "status": status,
            "arguments": args,
            "call_id": cid,
            "name": name,
        }

    def added(i: int) -> bytes:
        return ev(
            "response.output_item.added", output_index=first + i, item=item(i, "in_progress", "")
        )

    def finished(i: int) -> list[bytes]:
        args = calls[i][2]
        return [
            ev("response.function_call_arguments.done", item_id=item(i, "", "")["id"],
               output_index=first + i, arguments=args),
            ev("response.output_item.done", output_index=first + i, item=item(i, "completed", args)),
        ]  # fmt: skip

    # (kind, call): the items' events in the order the API sends them; parallel calls'
    # deltas interleaved (each item's end after all deltas), or one call after the other
    deltas: list[list[tuple[int, str]]] = [
        [(i, p) for p in split(args, size)] for i, (_, _, args) in enumerate(calls)
    ]
    steps: list[tuple[str, int, str]] = []
    if interleaved:
        steps += [("added", i, "") for i in range(len(calls))]
        steps += [("delta", i, p) for i, p in interleave(*deltas)]
        steps += [("done", i, "") for i in range(len(calls))]
    else:
        for i in range(len(calls)):
            steps += [("added", i, ""), *[("delta", i, p) for _, p in deltas[i]], ("done", i, "")]
    n = 0
    for kind, i, piece in steps:
        if kind == "added":
            parts.append(added(i))
            continue
        if kind == "done":
            if not complete:
                continue
            parts += finished(i)
            continue
        if error_after is not None and n == error_after:
            parts.append(
                ev("error", code="server_error", message="The server had an error", param=None)
            )
            return parts
        if end_after is not None and n == end_after:
            if end == "failed":
                failed = _response("failed", [])
                failed["error"] = {"code": "server_error", "message": "The model crashed"}
                parts.append(ev("response.failed", response=failed))
            else:
                stopped = _response("incomplete", [])
                stopped["incomplete_details"] = {"reason": "max_output_tokens"}
                parts.append(ev("response.incomplete", response=stopped))
            return parts
        n += 1
        parts.append(
            ev(
                "response.function_call_arguments.delta",
                item_id=item(i, "", "")["id"],
                output_index=first + i,
                delta=piece,
            )
        )
    if not complete:
        return parts
    parts.append(
        ev(
            "response.completed",
            response=_response(
                "completed", [item(i, "completed", c[2]) for i, c in enumerate(calls)]
            ),
        )
    )
    return parts


# --- Anthropic Messages -----------------------------------------------------------------------
MSG_ID = "msg_01XFDUDYJgAACzvnptvVoYEL"


def anthropic_stream(
    calls: list[tuple[str, str, str]],
    *,
    size: int = 7,
    interleaved: bool = False,
    complete: bool = True,
    error_after: int | None = None,
    text: str | None = "Let me look into that.",
    thinking: str | None = None,
) -> list[bytes]:
    """A Messages stream: an optional thinking block (``thinking_delta``s, a
    ``signature_delta``), an optional text block, then ``tool_use`` blocks
    [(tool use id, tool name, input JSON)]; ``error_after`` deltas, an ``error`` event."""

    def ev(kind: str, **data: Any) -> bytes:
        return sse({"type": kind, **data}, event=kind)

    parts = [
        ev(
            "message_start",
            message={
                "id": MSG_ID,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 472,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 2,
                },
            },
        ),
        sse({"type": "ping"}, event="ping"),
    ]
    first = 0
    if thinking is not None:
        parts += [
            ev("content_block_start", index=0,
               content_block={"type": "thinking", "thinking": "", "signature": ""}),
            *[ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": p})
              for p in split(thinking, 9)],
            ev("content_block_delta", index=0,
               delta={"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}),
            ev("content_block_stop", index=0),
        ]  # fmt: skip
        first = 1
    if text is not None:
        parts += [
            ev("content_block_start", index=first, content_block={"type": "text", "text": ""}),
            ev("content_block_delta", index=first, delta={"type": "text_delta", "text": text}),
            ev("content_block_stop", index=first),
        ]
        first += 1
    starts = [
        ev(
            "content_block_start",
            index=first + i,
            content_block={"type": "tool_use", "id": cid, "name": name, "input": {}},
        )
        for i, (cid, name, _) in enumerate(calls)
    ]
    deltas = [
        [
            ev(
                "content_block_delta",
                index=first + i,
                delta={"type": "input_json_delta", "partial_json": p},
            )
            for p in ["", *split(args, size)]
        ]
        for i, (_, _, args) in enumerate(calls)
    ]
    stops = [ev("content_block_stop", index=first + i) for i in range(len(calls))]
    if interleaved:
        body = starts + interleave(*deltas) + stops
    else:
        body = [p for i in range(len(calls)) for p in [starts[i], *deltas[i], stops[i]]]
    n_delta = 0
    for part in body:
        if error_after is not None and b'"input_json_delta"' in part:
            if n_delta == error_after:
                parts.append(
                    ev("error", error={"type": "overloaded_error", "message": "Overloaded"})
                )
                return parts
            n_delta += 1
        parts.append(part)
    if not complete:
        return parts
    parts += [
        ev(
            "message_delta",
            delta={"stop_reason": "tool_use", "stop_sequence": None},
            usage={"output_tokens": 89},
        ),
        ev("message_stop"),
    ]
    return parts


# --- Google Gemini (streamGenerateContent?alt=sse) --------------------------------------------
GEMINI_RESPONSE_ID = "2w3PaPzNJbqdvdIPkIrZsAs"


def gemini_chunk(
    parts: list[dict[str, Any]],
    *,
    finish: str | None = None,
    response_id: str | None = GEMINI_RESPONSE_ID,
    usage: bool = False,
) -> bytes:
    """One ``GenerateContentResponse`` chunk: the parts are this chunk's own (not cumulative)."""
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}
    if usage:
        body["usageMetadata"] = {
            "promptTokenCount": 52, "candidatesTokenCount": 31, "totalTokenCount": 83,
        }  # fmt: skip
    if response_id is not None:
        body["responseId"] = response_id
    return sse(body)


def gemini_stream(
    calls: list[tuple[str | None, str, dict[str, Any]]],
    *,
    text: str | None = "Let me look.",
    per_chunk: int = 1,
    done: bool = True,
    response_id: str | None = GEMINI_RESPONSE_ID,
) -> list[bytes]:
    """Text parts, then ``functionCall`` parts [(id or None, name, args)], ``per_chunk`` calls
    per chunk (parallel calls share one), the last chunk with ``finishReason`` and usage."""
    parts = (
        [gemini_chunk([{"text": p}], response_id=response_id) for p in split(text, 8)]
        if text
        else []
    )
    fcs = []
    for cid, name, args in calls:
        fc: dict[str, Any] = {"name": name, "args": args}
        if cid is not None:
            fc["id"] = cid
        fcs.append({"functionCall": fc})
    groups = [fcs[i : i + per_chunk] for i in range(0, len(fcs), per_chunk)]
    for n, group in enumerate(groups):
        last = done and n == len(groups) - 1
        parts.append(
            gemini_chunk(
                group, finish="STOP" if last else None, usage=last, response_id=response_id
            )
        )
    if done and not groups:
        parts.append(gemini_chunk([], finish="STOP", usage=True, response_id=response_id))
    return parts


def gemini_error(
    code: int = 503, status: str = "UNAVAILABLE", message: str = "The model is overloaded."
) -> bytes:
    """The error object Gemini sends mid-stream."""
    return sse({"error": {"code": code, "message": message, "status": status}})
