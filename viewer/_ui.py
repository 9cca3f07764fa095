"""Shared pieces of the pages: plain-text rules, page links, the call row, deep-link focus.

Plain text only. Anything that comes from the ledger (intents, outcomes, labels, tool names,
agent and session ids, args, results, errors) passes the display sanitizer (``viewer._text``)
and is shown with ``st.text`` (one line with ``wrap=False``: cut with an ellipsis, the full text
on hover), ``st.code``/``st.json`` (the detail), ``st.dataframe`` or Altair — elements that never
interpret Markdown or HTML. Elements
whose labels are Markdown (expanders, page links, badges, captions, headers, metrics) only get
our own fixed words and numbers. The one ``st.html`` with script runs our own code over hex
digests of call ids, never stored text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from tracing.status import Status
from viewer._story import Call, format_duration
from viewer._text import one_line

_PAGES_KEY: Final = "_intentrace_pages"

SESSION_PARAM: Final = "session"
"""Query parameter naming the session (``?session=…``)."""
ANCHOR_PARAM: Final = "anchor"
"""Query parameter naming the call to open, scroll to and highlight (``&anchor=<toolCallId>``)."""


def remember_pages(pages: Mapping[str, StreamlitPage]) -> None:
    """Keep this run's pages (by url path) so that pages can link to each other."""
    st.session_state[_PAGES_KEY] = dict(pages)


def page(url_path: str) -> StreamlitPage | None:
    """A page registered in the router this run, by its url path."""
    pages: Mapping[str, StreamlitPage] = st.session_state.get(_PAGES_KEY, {})
    return pages.get(url_path)


def call_key(call_id: str) -> str:
    """A CSS-safe element key for a call (the browser finds it as ``.st-key-call-<hex>``)."""
    return "call-" + hashlib.sha1(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def link_to_call(session_id: str, call_id: str, *, label: str = "Open", help: str = "") -> None:
    """A link that opens the Session page on one call (the deep link, in-app)."""
    _link_to_session_page({SESSION_PARAM: session_id, ANCHOR_PARAM: call_id}, label, help)


def link_to_session(session_id: str, *, label: str = "Open", help: str = "") -> None:
    _link_to_session_page({SESSION_PARAM: session_id}, label, help)


def _link_to_session_page(query: dict[str, str], label: str, help: str) -> None:
    target = page("session")
    if target is None:
        return
    st.page_link(
        target, label=label, query_params=query, icon=":material/arrow_forward:", help=help
    )


STATUS_WORDS: Final[Mapping[Status, str]] = {
    Status.STREAMING: "writing",
    Status.IN_FLIGHT: "running",
    Status.BACKGROUND: "in background",
    Status.SUCCESS: "done",
    Status.ERROR: "failed",
    Status.CANCELLED: "cancelled",
    Status.ABANDONED: "abandoned",
}


def live_badge(status: Status) -> None:
    """The live mark of a call that has not settled (fixed words only)."""
    if status == Status.STREAMING:
        st.badge("live · writing", icon=":material/edit:", color="orange")
    elif status == Status.BACKGROUND:
        st.badge("live · background", icon=":material/schedule:", color="violet")
    else:
        st.badge("live", icon=":material/progress_activity:", color="blue")


def call_row(
    call: Call,
    *,
    session_id: str,
    now_ns: int,
    focused: bool = False,
    key: str | None = None,
) -> None:
    """One call on one fixed-height line: mark and label (the intent cut to ``INTENT_CHARS``
    with its framing, `` · failed``, `` · in background``, kept), tool, time, live badge, link.
    The full label is in the detail and in the timeline's tooltip."""
    row_key = key or "row-" + call_key(call.id)[5:]
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key=row_key):
        st.text(f"{call.glyph} {call.short}", wrap=False, width="stretch")
        if call.live:
            took = format_duration(max(0.0, (now_ns - call.start_ns) / 1e6)) or "…"
        else:
            took = format_duration(call.duration_ms) or STATUS_WORDS.get(call.status, "")
        st.text(f"{one_line(call.tool_name, 48)}   {took}", wrap=False, width="content")
        if call.live:
            live_badge(call.status)
        if not focused:
            link_to_call(session_id, call.id, label="Details")


_FOCUS_CSS: Final = """<style>
.st-key-{key} {{
  background: rgba(255, 200, 0, 0.16);
  outline: 2px solid #e0a800;
  outline-offset: 4px;
  border-radius: 0.5rem;
  scroll-margin-top: 5rem;
}}
</style>"""

# Scrolls the focused call into view once it exists (elements arrive as deltas), once per
# element. The key is a hex digest made here, never stored text.
_FOCUS_JS: Final = """<script>
(function () {{
  var tries = 0;
  var timer = setInterval(function () {{
    var el = document.querySelector(".st-key-{key}");
    if (el || ++tries > 100) {{
      clearInterval(timer);
      // once per element: a live session's refresh must not pull the reader back
      if (el && el.getAttribute("data-focused") !== "1") {{
        document.querySelectorAll("[data-focused='1']").forEach(function (old) {{
          old.removeAttribute("data-focused");
        }});
        el.setAttribute("data-focused", "1");
        el.scrollIntoView({{block: "center"}});
      }}
    }}
  }}, 100);
}})();
</script>"""


def focus(call_id: str) -> None:
    """Highlight the call's row and scroll it into view (the deep link's target)."""
    key = call_key(call_id)
    st.html(_FOCUS_CSS.format(key=key))
    st.html(_FOCUS_JS.format(key=key), unsafe_allow_javascript=True, width=1)


def page_style() -> None:
    """Small layout rules shared by every page."""
    st.html(
        """<style>
[class*="st-key-nest-"] { padding-left: 1.25rem; box-sizing: border-box; }
[class*="st-key-head-"] [data-testid="stText"] { font-weight: 600; }
/* call rows: one fixed-height line */
[class*="st-key-row-"], [class*="st-key-call-"][data-testid="stHorizontalBlock"] {
  height: 2.25rem; flex-wrap: nowrap; overflow: hidden;
}

</style>"""
    )
