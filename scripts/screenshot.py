"""Screenshots of the viewer for the docs: a real ``intentrace view`` and headless Chromium.

    .venv/bin/python scripts/screenshot.py --ledger sqlite:///.demo/ledger.db \
        --path "/" --out docs/images/sessions.png

The server's first page load can come up blank, so the page is loaded once before the one that
is captured; the capture waits for ``--wait`` (a CSS selector) and a moment for the layout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tests/ helpers

from tests.viewer.browser import chromium_tab, serve  # (after the path is set)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ledger", required=True, help="ledger URL the viewer reads")
    parser.add_argument("--path", default="/", help="page and query, e.g. /?sort=Calls")
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--wait", default="[data-testid=stDataFrame]", help="CSS selector")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--timezone", default="Europe/Berlin", help="the browser's time zone")
    opts = parser.parse_args()
    with (
        serve(opts.ledger) as base,
        chromium_tab(base, opts.width, opts.height, timezone_id=opts.timezone) as tab,
    ):
        tab.page.goto(base + opts.path)
        tab.page.wait_for_selector(opts.wait, timeout=60_000)
        tab.page.wait_for_timeout(1_500)
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        tab.page.screenshot(path=str(opts.out))
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
