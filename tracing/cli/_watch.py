"""``intentrace watch``: what the agent is doing right now, in the terminal.

Fed from the ledger only (polling ``written_after``, reconciling with ``in_flight`` now and
then), so it follows an agent in another process, or on another machine through PostgreSQL.
Calls are grouped in blocks of siblings (one model step, ``batch_id``) headed by
``tracing.status.group_header``; a block stays on screen while any of its calls is live and
scrolls up, settled into its outcomes, when the last one finishes.

Two renderings: rich (a live region redrawn in place; a TTY) and plain text (one line per
change; a pipe, a log file, ``--format plain``). Model-written text is always plain text:
labels go through ``sanitize_label`` and into ``rich.text.Text`` (never markup), so
``[bold]`` in an intent shows literally. ``NO_COLOR`` turns colours off (rich honours it).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import click

from tracing.cli._ledger import ledger_option, reading
from tracing.intent import sanitize_label
from tracing.ledger import Anchor, Ledger
from tracing.status import GLYPHS, LIVE_STATUSES, HeaderCall, Status, call_kind, group_header

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

"""Status marks (the viewer's, so that both read the same)."""
STYLES: Final[dict[Status, str]] = {
    Status.STREAMING: "italic cyan",
    Status.IN_FLIGHT: "yellow",
    Status.BACKGROUND: "blue",
    Status.SUCCESS: "green",
    Status.ERROR: "bold red",
    Status.CANCELLED: "magenta",
    Status.ABANDONED: "magenta",
}
LABEL_CHARS: Final = 160
_sleep = time.sleep  # (tests replace it to interrupt the loop)
RECONCILE_SECONDS: Final = 5.0
"""How often the watcher re-reads the in-flight calls (catches writes from a writer whose clock
is behind, and calls that settled while a poll fell behind)."""


def _text(value: object, max_chars: int = LABEL_CHARS) -> str:
    """Model- or app-written text as one plain line (escapes and control characters removed)."""
    return sanitize_label(str(value) if value is not None else "", max_chars=max_chars)


def _duration(call: Anchor, now_ns: int) -> str:
    if call["duration_ms"] is not None:
        ms = float(call["duration_ms"])
    else:
        ms = max(0.0, (now_ns - int(call["start_ns"])) / 1e6)
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _state(call: Anchor, now_ns: int) -> str:
    status = call["status"]
    if status == Status.STREAMING:
        return "writing…"
    if status in (Status.IN_FLIGHT, Status.BACKGROUND):
        return _duration(call, now_ns) + (" · bg" if status == Status.BACKGROUND else "")
    if status == Status.SUCCESS:
        return _duration(call, now_ns)
    return f"{status} {_duration(call, now_ns)}"


@dataclass
class Block:
    """Sibling calls of one model step (a call without a ``batch_id`` is a block alone)."""

    session_id: str
    key: str
    calls: dict[str, Anchor] = field(default_factory=lambda: {})
    activity: str | None = None
    spawners: set[str] = field(default_factory=set[str])
    """Ids of calls that calls were made under (subagents): the watcher's, shared."""

    @property
    def live(self) -> bool:
        return any(c["status"] in LIVE_STATUSES for c in self.calls.values())

    def ordered(self) -> list[Anchor]:
        return sorted(self.calls.values(), key=lambda c: (c["seq"], c["tool_call_id"]))

    def header(self) -> str:
        return _text(
            group_header(
                (
                    HeaderCall(
                        status=c["status"],
                        intent=_text(c["intent"]) or None,
                        label=_text(c["label"]),
                        seq=c["seq"],
                        settle_seq=c["settle_seq"],
                        kind=call_kind(c["tool_name"], spawned=c["tool_call_id"] in self.spawners),
                    )
                    for c in self.calls.values()
                ),
                self.activity,
            )
        )

    @property
    def grouped(self) -> bool:
        """Whether the block gets a header line (siblings, or an activity label)."""
        return len(self.calls) > 1 or bool(self.activity)


class Watcher:
    """The live state, fed by polling the ledger (no rendering here)."""

    def __init__(self, ledger: Ledger, session_id: str | None) -> None:
        self.ledger = ledger
        self.session_id = session_id
        self.cursor = 0
        self.blocks: dict[tuple[str, str], Block] = {}
        self.where: dict[str, tuple[str, str]] = {}  # call id -> block key
        self.spawners: set[str] = set()  # ids of calls that calls were made under
        self.seen_live = False
        self.last_reconcile = 0.0
        self.history: list[Anchor] = []  # the primed session's calls (for --once)

    def block_key(self, call: Anchor) -> tuple[str, str]:
        batch = call["batch_id"]
        return (call["session_id"], f"b:{batch}" if batch else f"c:{call['tool_call_id']}")

    def prime(self, recent: int = 0) -> list[Anchor]:
        """Load the calls in flight; return up to ``recent`` latest settled calls (of the
        watched session, else the most recently active one) and set the poll cursor."""
        live = self.ledger.in_flight(session_id=self.session_id, limit=1000)
        session = self.session_id
        if session is None:
            latest = self.ledger.sessions(limit=1)
            session = latest[0]["session_id"] if latest else None
        history = self.ledger.session_anchors(session) if session is not None else []
        stamps = [a["version"] for a in (*live, *history)]
        self.cursor = max(stamps, default=0)
        self.forget(self.apply(live))
        for call in history:  # a live block's settled siblings belong to it (and its header)
            key = self.block_key(call)
            block = self.blocks.get(key)
            if block is not None and call["tool_call_id"] not in block.calls:
                block.calls[call["tool_call_id"]] = call
                self.where[call["tool_call_id"]] = key
        self.last_reconcile = time.monotonic()
        settled = [a for a in history if a["status"] not in LIVE_STATUSES]
        settled.sort(key=lambda a: (a["settle_seq"] or a["seq"], a["seq"]))
        self.history = history
        return settled[-recent:] if recent > 0 else []

    def settled_blocks(self, latest: list[Anchor]) -> list[Block]:
        """The blocks of the ``latest`` settled calls, in the order they settled, each whole
        (every call of its batch, so its header counts them all); a block still on screen as
        live is left to ``live_blocks`` (its settled calls show there, once)."""
        on_screen = {(b.session_id, b.key) for b in self.live_blocks()}
        members: dict[tuple[str, str], dict[str, Anchor]] = {}
        for call in self.history:
            members.setdefault(self.block_key(call), {})[call["tool_call_id"]] = call
        blocks: dict[tuple[str, str], Block] = {}
        for call in latest:
            key = self.block_key(call)
            if key in on_screen or key in blocks:
                continue
            blocks[key] = Block(key[0], key[1], dict(members.get(key, {})), spawners=self.spawners)
        self._label(blocks.values())
        return list(blocks.values())

    def poll(self) -> tuple[list[Anchor], list[Block]]:
        """Read what changed: (changed calls in write order, blocks that just settled)."""
        changed: list[Anchor] = []
        while True:
            # by row version, not a writer's clock: a writer whose clock is behind is seen too
            rows = self.ledger.written_after(self.cursor, session_id=self.session_id, limit=1000)
            changed.extend(rows)
            if rows:
                self.cursor = max(self.cursor, rows[-1]["version"])
            if len(rows) < 1000:
                break
        if time.monotonic() - self.last_reconcile >= RECONCILE_SECONDS:
            changed.extend(self._reconcile())
        return changed, self.apply(changed)

    def _reconcile(self) -> list[Anchor]:
        self.last_reconcile = time.monotonic()
        live = self.ledger.in_flight(session_id=self.session_id, limit=1000)
        known = {a["tool_call_id"] for a in live}
        out = [a for a in live if a["tool_call_id"] not in self.where]
        for key in list(self.blocks.values()):
            for call_id, call in list(key.calls.items()):
                if call["status"] in LIVE_STATUSES and call_id not in known:
                    fresh = self.ledger.anchor(call_id)
                    if fresh is not None:
                        out.append(fresh)
        return out

    def apply(self, anchors: Iterable[Anchor]) -> list[Block]:
        """Fold anchors into the blocks; return the touched blocks that have settled (the
        caller shows them a last time, then ``forget``s them)."""
        touched: dict[tuple[str, str], Block] = {}
        for call in anchors:
            call_id = call["tool_call_id"]
            key = self.block_key(call)
            old = self.where.get(call_id)
            if old is not None and old != key:  # moved to another block (the span's batch)
                previous = self.blocks.get(old)
                if previous is not None:
                    previous.calls.pop(call_id, None)
                    if not previous.calls:
                        del self.blocks[old]
                        touched.pop(old, None)
            block = self.blocks.get(key)
            if block is None:
                block = self.blocks[key] = Block(call["session_id"], key[1], spawners=self.spawners)
            block.calls[call_id] = call
            self.where[call_id] = key
            if call["parent_call_id"]:
                self.spawners.add(call["parent_call_id"])
            touched[key] = block
            if call["status"] in LIVE_STATUSES:
                self.seen_live = True
        self._activities({b.session_id for b in touched.values() if b.key.startswith("b:")})
        return [b for b in touched.values() if not b.live]

    def forget(self, blocks: Iterable[Block]) -> None:
        """Drop settled blocks (they have scrolled up)."""
        for block in blocks:
            key = (block.session_id, block.key)
            if self.blocks.get(key) is block:
                del self.blocks[key]
            for call_id in block.calls:
                if self.where.get(call_id) == key:
                    del self.where[call_id]

    def _activities(self, sessions: set[str]) -> None:
        self._label(b for b in self.blocks.values() if b.session_id in sessions)

    def _label(self, blocks: Iterable[Block]) -> None:
        """Set each batch block's activity label (from the ledger's blocks of its session)."""
        batched = [b for b in blocks if b.key.startswith("b:")]
        for session in {b.session_id for b in batched}:
            labels = {
                b["batch_id"]: b["activity_label"]
                for b in self.ledger.blocks(session)
                if b["activity_label"]
            }
            for block in batched:
                if block.session_id == session:
                    block.activity = labels.get(block.key[2:])

    def live_blocks(self) -> list[Block]:
        """Blocks on screen (any live call), by session, then first call."""
        blocks = [b for b in self.blocks.values() if b.calls and b.live]
        return sorted(blocks, key=lambda b: (b.session_id, min(c["seq"] for c in b.calls.values())))

    @property
    def idle(self) -> bool:
        return not any(b.live for b in self.blocks.values())


# --- plain text ----------------------------------------------------------------------------------
def _plain_call(call: Anchor, now_ns: int, indent: str = "  ") -> str:
    glyph = GLYPHS.get(call["status"], "·")
    label = _text(call["label"])
    return f"{indent}{glyph} {label}  [{_text(call['tool_name'], 60)}]  {_state(call, now_ns)}"


def _plain_block(block: Block, now_ns: int, *, sessions: bool) -> list[str]:
    lines: list[str] = []
    where = f"  ({_text(block.session_id, 60) or 'no session'})" if sessions else ""
    if block.grouped:
        lines.append(f"▸ {block.header()}{where}")
        lines += [_plain_call(c, now_ns, "    ") for c in block.ordered()]
    else:
        lines += [_plain_call(c, now_ns, "  ") + where for c in block.ordered()]
    return lines


# --- rich -----------------------------------------------------------------------------------------
def _rich_block(block: Block, now_ns: int, *, note: str | None = None) -> RenderableType:
    """One block: its header (siblings, or an activity label) and a line per call; ``note``
    (the session) is added in dim when blocks of several sessions share the screen."""
    # lazy: rich is the optional `cli` extra
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1), expand=False)
    grid.add_column(width=2 if block.grouped else 0)
    grid.add_column(width=1)
    grid.add_column(overflow="ellipsis", no_wrap=True)
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(no_wrap=True, justify="right")
    suffix = Text(f"  ({note})", style="dim") if note is not None else Text("")
    for call in block.ordered():
        status = call["status"]
        style = STYLES.get(status, "")
        label = Text(_text(call["label"]), style="italic" if status == Status.STREAMING else "")
        if not block.grouped:
            label.append_text(suffix)
        grid.add_row(
            "",
            Text(GLYPHS.get(status, "·"), style=style),
            label,
            Text(_text(call["tool_name"], 60)),
            Text(_state(call, now_ns), style=style),
        )
    if not block.grouped:
        return grid
    head = Text("▸ ", style="bold")
    head.append_text(Text(block.header(), style="bold"))
    head.append_text(suffix)
    return Group(head, grid)


def _session_note(session_id: str) -> str:
    return _text(session_id, 60) or "no session"


def _rich_live(watcher: Watcher, now_ns: int, *, sessions: bool) -> RenderableType:
    # lazy: rich is the optional `cli` extra
    from rich.console import Group
    from rich.text import Text

    blocks = watcher.live_blocks()
    if not blocks:
        return Text("nothing in flight", style="dim")
    parts: list[RenderableType] = []
    session: str | None = None
    for block in blocks:  # sorted by session
        if sessions and block.session_id != session:
            session = block.session_id
            parts.append(Text(_session_note(session), style="bold underline"))
        parts.append(_rich_block(block, now_ns))
    return Group(*parts)


def _console(fmt: str) -> Console:
    # lazy: rich is the optional `cli` extra
    from rich.console import Console

    # rich reads NO_COLOR itself; say it explicitly so that it holds whatever rich's version.
    no_color = bool(os.environ.get("NO_COLOR"))
    force = True if fmt == "rich" else None
    return Console(force_terminal=force, no_color=no_color, highlight=False, soft_wrap=False)


# --- the command -------------------------------------------------------------------------------
@click.command()
@ledger_option
@click.option("--session", "session_id", metavar="ID", default=None,
              help="Only this session (default: every session).")  # fmt: skip
@click.option("--once", is_flag=True, help="Print what is in flight now (and the latest "
              "settled calls) and exit.")  # fmt: skip
@click.option("--recent", type=click.IntRange(min=0), default=5, show_default=True,
              help="With --once: how many of the latest settled calls to show.")  # fmt: skip
@click.option("--interval", type=click.FloatRange(min=0.02), default=0.5, show_default=True,
              help="Seconds between two polls of the ledger.")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="Stop after this many seconds (default: until Ctrl-C).")  # fmt: skip
@click.option("--until-idle", is_flag=True,
              help="Stop once nothing is in flight (after a call was seen).")  # fmt: skip
@click.option(
    "--format", "fmt", type=click.Choice(["auto", "rich", "plain"]), default="auto",
    show_default=True, help="rich redraws in place (auto: when stdout is a terminal); "
    "plain prints one line per change.",
)  # fmt: skip
def watch(  # noqa: PLR0917 - click passes options as arguments
    ledger_url: str | None,
    session_id: str | None,
    once: bool,
    recent: int,
    interval: float,
    timeout: float | None,
    until_idle: bool,
    fmt: str,
) -> None:
    """Show what the agent is doing right now: calls in flight with their live intents.

    Reads the ledger (a SQLite file, or PostgreSQL for an agent on another machine). Sibling
    calls are grouped under one header; finished calls settle into their outcomes and scroll
    up. Plain text when stdout is not a terminal; NO_COLOR turns colours off.
    """
    if fmt == "auto":
        fmt = "rich" if sys.stdout.isatty() else "plain"
    with reading(ledger_url) as ledger:
        watcher = Watcher(ledger, session_id)
        latest = watcher.prime(recent if once else 0)
        sessions = session_id is None
        if once:
            _print_once(watcher, latest, fmt, sessions=sessions)
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if fmt == "rich":
                _follow_rich(watcher, interval, deadline, until_idle, sessions=sessions)
            else:
                _follow_plain(watcher, interval, deadline, until_idle, sessions=sessions)
        except KeyboardInterrupt:
            return


def _print_once(watcher: Watcher, latest: list[Anchor], fmt: str, *, sessions: bool) -> None:
    now_ns = time.time_ns()
    done = watcher.settled_blocks(latest)
    if fmt == "plain":
        for block in done:
            for line in _plain_block(block, now_ns, sessions=sessions):
                click.echo(line)
        for block in watcher.live_blocks():
            for line in _plain_block(block, now_ns, sessions=sessions):
                click.echo(line)
        if not watcher.live_blocks():
            click.echo("nothing in flight")
        return
    console = _console(fmt)
    for block in done:
        note = _session_note(block.session_id) if sessions else None
        console.print(_rich_block(block, now_ns, note=note))
    console.print(_rich_live(watcher, now_ns, sessions=sessions))


def _done(watcher: Watcher, deadline: float | None, until_idle: bool) -> bool:
    if deadline is not None and time.monotonic() >= deadline:
        return True
    return until_idle and watcher.seen_live and watcher.idle


def _follow_plain(
    watcher: Watcher, interval: float, deadline: float | None, until_idle: bool, *, sessions: bool
) -> None:
    shown: dict[str, tuple[str, str]] = {}  # call id -> (status, label) last printed
    header: tuple[tuple[str, str], str] | None = None

    def emit(call: Anchor) -> None:
        nonlocal header
        state = (call["status"], _text(call["label"]))
        if shown.get(call["tool_call_id"]) == state:
            return
        shown[call["tool_call_id"]] = state
        key = watcher.where.get(call["tool_call_id"]) or watcher.block_key(call)
        block = watcher.blocks.get(key)
        now_ns = time.time_ns()
        where = f"  ({_text(call['session_id'], 60) or 'no session'})" if sessions else ""
        if block is not None and block.grouped:
            head = (key, block.header())
            if head != header:
                click.echo(f"▸ {head[1]}{where}")
                header = head
            click.echo(_plain_call(call, now_ns, "    "))
        else:
            header = None
            click.echo(_plain_call(call, now_ns, "  ") + where)

    for block in watcher.live_blocks():
        for call in block.ordered():
            emit(call)
    while not _done(watcher, deadline, until_idle):
        _sleep(interval)
        changed, settled = watcher.poll()
        latest: dict[str, Anchor] = {}
        for call in changed:  # the last state of each call in this poll, in write order
            latest.pop(call["tool_call_id"], None)
            latest[call["tool_call_id"]] = call
        for call in latest.values():
            emit(watcher.blocks[watcher.where[call["tool_call_id"]]].calls[call["tool_call_id"]])
        watcher.forget(settled)
        for block in settled:
            for call_id in block.calls:
                shown.pop(call_id, None)


def _follow_rich(
    watcher: Watcher, interval: float, deadline: float | None, until_idle: bool, *, sessions: bool
) -> None:
    # lazy: rich is the optional `cli` extra
    from rich.live import Live

    console = _console("rich")
    with Live(
        _rich_live(watcher, time.time_ns(), sessions=sessions),
        console=console,
        auto_refresh=False,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as live:
        while not _done(watcher, deadline, until_idle):
            _sleep(interval)
            _, settled = watcher.poll()
            now_ns = time.time_ns()
            for block in settled:  # scrolls up above the live region, settled into outcomes
                note = _session_note(block.session_id) if sessions else None
                live.console.print(_rich_block(block, now_ns, note=note))
            watcher.forget(settled)
            live.update(_rich_live(watcher, now_ns, sessions=sessions), refresh=True)
