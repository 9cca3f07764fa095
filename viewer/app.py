"""The viewer's entry script: ``streamlit run viewer/app.py`` (``intentrace view`` runs it).

The router is ``PAGES`` below: one line per page. Deep links: a URL that names a session or a
call (``?session=…&anchor=<toolCallId>``) opens the Session page, whichever page it names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

import streamlit as st

from viewer._pages import analytics, live, session, sessions
from viewer._ui import ANCHOR_PARAM, SESSION_PARAM, page_style, remember_pages

_ROUTED_KEY: Final = "_intentrace_routed"
"""Set once the router has run in this browser tab (deep links are followed on the first run)."""


class PageSpec(NamedTuple):
    render: Callable[[], None]
    title: str
    url_path: str
    icon: str


# The router: add a page with one line here (the first page is the default one). No bare
# strings at module level: Streamlit's "magic" would print them on every page.
PAGES: tuple[PageSpec, ...] = (
    PageSpec(sessions.render, "Sessions", "sessions", ":material/list:"),
    PageSpec(session.render, "Session", "session", ":material/timeline:"),
    PageSpec(live.render, "Live", "live", ":material/sensors:"),
    PageSpec(analytics.render, "Analytics", "analytics", ":material/insights:"),
)


def main() -> None:
    """Build the router and run the page the URL names."""
    st.set_page_config(page_title="intentrace", page_icon=":material/timeline:", layout="wide")
    pages = {
        spec.url_path: st.Page(
            spec.render,
            title=spec.title,
            url_path=spec.url_path,
            icon=spec.icon,
            default=index == 0,
        )
        for index, spec in enumerate(PAGES)
    }
    remember_pages(pages)
    current = st.navigation(list(pages.values()))
    target = pages["session"]
    params = st.query_params
    first_run = not st.session_state.get(_ROUTED_KEY)
    st.session_state[_ROUTED_KEY] = True
    if first_run and current is not target and (SESSION_PARAM in params or ANCHOR_PARAM in params):
        # A pasted deep link (``/?session=…&anchor=…``): only on a tab's first run, so that
        # Back/Forward onto a page whose URL still names a session stays on that page.
        st.switch_page(target, query_params=params.to_dict())
    page_style()
    current.run()


if __name__ == "__main__":
    main()
