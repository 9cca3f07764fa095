"""Links the viewer makes: to a call inside the viewer, and out to its trace in the user's
tracing backend (a URL template). Pure Python: the CLI checks a template with it too."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote, urlencode, urlsplit

SESSION_PARAM: Final = "session"
"""Query parameter naming the session (``?session=…``)."""
ANCHOR_PARAM: Final = "anchor"
"""Query parameter naming the call to open, scroll to and highlight (``&anchor=<toolCallId>``)."""
TURN_PARAM: Final = "turn"
"""Query parameter naming the turn to jump to (``&turn=3``)."""

TRACE_ID_FIELD: Final = "{trace_id}"
SPAN_ID_FIELD: Final = "{span_id}"


def check_trace_url(template: str) -> str:
    """The template, stripped; ``ValueError`` (a one-line message that says how to fix it) when
    it is not an ``http(s)`` URL with ``{trace_id}`` in it."""
    value = template.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"the trace URL template {value!r} is not an http(s) URL "
            "(e.g. http://localhost:3000/project/<id>/traces/{trace_id})"
        )
    if TRACE_ID_FIELD not in value:
        raise ValueError(
            f"the trace URL template {value!r} has no {TRACE_ID_FIELD} "
            "(it is replaced by the call's trace id; {span_id} by its span id)"
        )
    return value


def trace_url(template: str, trace_id: str | None, span_id: str | None = None) -> str | None:
    """The template with the call's ids put in (URL-quoted), or None without a trace id."""
    if not trace_id:
        return None
    return template.replace(TRACE_ID_FIELD, quote(trace_id, safe="")).replace(
        SPAN_ID_FIELD, quote(span_id or "", safe="")
    )


def app_root(page_url: str | None) -> str:
    """The viewer's root URL from the URL of the page the browser shows (``/`` when unknown),
    so a link works wherever the viewer is served (``--server.baseUrlPath`` included)."""
    if not page_url:
        return "/"
    parts = urlsplit(page_url)
    path = parts.path.rsplit("/", 1)[0] + "/"
    if parts.scheme and parts.netloc:
        return f"{parts.scheme}://{parts.netloc}{path}"
    return path


def session_link(root: str, session_id: str, call_id: str | None = None) -> str:
    """A shareable link to a session, or to one call in it (the deep link)."""
    query = {SESSION_PARAM: session_id}
    if call_id is not None:
        query[ANCHOR_PARAM] = call_id
    return f"{root}session?{urlencode(query, quote_via=quote)}"
