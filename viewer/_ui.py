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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from tracing.status import Status
from viewer._links import ANCHOR_PARAM, SESSION_PARAM
from viewer._story import Block, Call, Story, count_text, format_duration
from viewer._text import one_line, short_label

_PAGES_KEY: Final = "_intentrace_pages"


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
            # (no `help`: Streamlit then draws the link twice, one hidden)
            link_to_call(session_id, call.id, label=details_label(call))


def details_label(call: Call) -> str:
    """The *Details* link's text, also its accessible name: distinct per call of a session
    (its sequence number; fixed words and a number, never stored text)."""
    return f"Details #{call.seq}"


@dataclass(frozen=True, slots=True)
class StoryView:
    """What every block and call of one render of a story needs to know.

    The Session page and the Live page both draw blocks with ``story_block``: the same header
    (``Block.header``: latest in-flight intent > activity label once settled > latest settled
    label > count; a block of one call has none),
    the same rows, the same "parent · child's latest" line of a running subagent.
    """

    story: Story
    now_ns: int
    anchor: str | None = None
    """The linked call: its row is highlighted and its detail drawn in place."""
    opened: frozenset[str] = field(default_factory=frozenset[str])
    """Calls whose subagent section is open."""
    keep: Callable[[Call], bool] | None = None
    """Only calls it keeps, and calls holding such calls, are drawn, and subagent sections
    holding them are open (the Live page: live calls; the Session page's search); headers and
    counts still cover the whole block."""
    detail: Callable[[str], None] | None = None
    """Draws the linked call's detail under its row (the Session page)."""


def story_block(view: StoryView, block: Block) -> None:
    """One block of sibling calls: its header and count line, then its calls."""
    digest = call_key(f"{view.story.session_id}\x00{block.key}")[5:]
    with st.container(border=True, key=f"block-{digest}"):
        if block.grouped:  # (a block of one call is the call alone: no header)
            with st.container(horizontal=True, vertical_alignment="center", key=f"head-{digest}"):
                st.text(short_label(block.header), wrap=False, width="stretch")
                st.caption(count_text(*block.counts()))
        for call in block.calls:
            if view.keep is None or call.holds(view.keep):
                _story_call(view, call)


def _story_call(view: StoryView, call: Call) -> None:
    key = call_key(call.id)
    session_id = view.story.session_id
    if call.id == view.anchor:
        with st.container(key=key):
            call_row(call, session_id=session_id, now_ns=view.now_ns, focused=True)
            if view.detail is not None:
                view.detail(call.id)
    else:
        call_row(call, session_id=session_id, now_ns=view.now_ns, key=key)
    if not call.children:
        return
    nested = sum(b.size for b in call.children)
    opened = call.id in view.opened or (
        view.keep is not None and any(b.holds(view.keep) for b in call.children)
    )
    with (
        st.container(key=f"nest-{key[5:]}"),
        st.expander(
            f"Subagent · {count_text(nested)}",
            expanded=opened,
            icon=":material/subdirectory_arrow_right:",
        ),
    ):
        agents = sorted({c.agent_id for b in call.children for c in b.calls if c.agent_id})
        with st.container(horizontal=True, vertical_alignment="center"):
            st.text(
                "Subagent: " + (one_line(", ".join(agents), 120) or "(no agent id)"),
                wrap=False,
                width="stretch",
            )
            first = call.children[0].calls[0]
            link_to_call(session_id, first.id, label="Open its thread")
        for block in call.children:
            if view.keep is None or block.holds(view.keep):
                story_block(view, block)


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
    scroll_to(key)


def scroll_to(key: str) -> None:
    """Scroll the element with this key into view once (``key``: made here, CSS-safe)."""
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
