"""A session read as a story: turns → blocks of sibling calls → calls, subagents nested.

Pure Python over the ledger's anchors (no Streamlit here), so the structure, the labels and the
pagination are tested without a browser. Labels come from ``tracing.status`` (``frame_label``,
``group_header``); nothing here re-implements a resolution rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Final

from tracing.ledger import Anchor, BlockInfo
from tracing.status import (
    FRAME_TIMED_OUT,
    GLYPHS,
    LIVE_STATUSES,
    SETTLED_STATUSES,
    HeaderCall,
    Status,
    call_kind,
    frame_label,
    group_header,
)
from viewer._text import FRAMES, INTENT_CHARS, one_line

PAGE_CALLS: Final = 50
"""Calls per page of a session (whole blocks; a page holds more when one block is bigger): a
page is drawn row by row in the browser, so its size is what the first page costs."""


def split_frame(label: str) -> tuple[str, str]:
    """``(head, framing)`` of a label: ``"Reading x · failed"`` -> ``("Reading x", " · failed")``.

    Rows cut the head (``INTENT_CHARS``) and always show the framing.
    """
    for frame in FRAMES:
        if label.endswith(frame) and len(label) > len(frame):
            return label[: -len(frame)], frame
    return label, ""


def call_label(anchor: Mapping[str, object]) -> str:
    """The label of one stored call, by ``frame_label`` over its visible intent and outcome.

    A background call that never returned is stored as an error whose label says
    ``· timed out``; that framing is kept (it is not derivable from the other columns).
    """
    status = Status(str(anchor["status"]))
    stored = anchor.get("label")
    timed_out = (
        status == Status.ERROR and isinstance(stored, str) and stored.endswith(FRAME_TIMED_OUT)
    )
    intent = anchor.get("intent")
    outcome = anchor.get("outcome")
    return frame_label(
        tool_name=str(anchor["tool_name"]),
        status=status,
        intent=intent if isinstance(intent, str) else None,
        outcome=outcome if isinstance(outcome, str) else None,
        timed_out=timed_out,
    )


def _no_blocks() -> list[Block]:
    return []


@dataclass(slots=True)
class Call:
    """One call as the story shows it."""

    id: str
    seq: int
    settle_seq: int | None
    turn: int | None
    batch_id: str | None
    parent_id: str | None
    agent_id: str | None
    tool_name: str
    intent: str | None
    status: Status
    label: str
    """Resolved label (full text; lists show ``one_line`` of ``line``)."""
    start_ns: int
    end_ns: int | None
    duration_ms: float | None
    has_error_text: bool
    children: list[Block] = field(default_factory=_no_blocks)
    """Blocks of the subagent this call spawned (calls whose parent is this call)."""
    child_latest: str | None = None
    """The subagent's latest intent (group-header rules over its calls), if it has calls."""
    depth: int = 0

    def __reduce__(self) -> tuple[Any, ...]:
        # A plain tuple of fields: stories are cached (pickled) whole; this halves load time.
        return (Call, _call_fields(self))

    @property
    def live(self) -> bool:
        return self.status in LIVE_STATUSES

    @property
    def line(self) -> str:
        """The collapsed line: the label, or ``parent label · child's latest intent``."""
        if self.child_latest:
            return f"{self.label} · {self.child_latest}"
        return self.label

    @property
    def parts(self) -> tuple[str, str]:
        """``(head, framing)`` of the row: a row cuts the head and always shows the framing."""
        head, frame = split_frame(self.label)
        if self.child_latest:
            return f"{head}{frame} · {self.child_latest}", ""
        return head, frame

    @property
    def short(self) -> str:
        """The row's text: the head cut to ``INTENT_CHARS``, the framing kept (one line)."""
        head, frame = self.parts
        return one_line(head, INTENT_CHARS) + frame

    @property
    def glyph(self) -> str:
        return GLYPHS.get(self.status, "·")

    def header_call(self) -> HeaderCall:
        return HeaderCall(
            status=self.status,
            intent=self.intent,
            label=self.label,
            seq=self.seq,
            settle_seq=self.settle_seq,
            kind=call_kind(self.tool_name, spawned=bool(self.children)),
        )

    @property
    def live_inside(self) -> bool:
        """Whether this call or a call nested under it has not settled yet."""
        return self.holds(is_live)

    def holds(self, keep: Callable[[Call], bool]) -> bool:
        """Whether this call or a call nested under it is one ``keep`` keeps."""
        return any(keep(call) for call in self.walk())

    def walk(self) -> Iterable[Call]:
        """This call and every call nested under it, in story order."""
        yield self
        for block in self.children:
            for call in block.calls:
                yield from call.walk()


@dataclass(slots=True)
class Block:
    """Sibling calls of one model step (one ``batch_id``; a call without one is alone)."""

    key: str
    batch_id: str | None
    turn: int | None
    activity_label: str | None
    calls: list[Call]
    header: str = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (Block, _block_fields(self))

    @property
    def first_seq(self) -> int:
        return self.calls[0].seq

    @property
    def grouped(self) -> bool:
        """Whether the block is drawn under a header: siblings, or an activity label (a block
        of one call is the call alone)."""
        return len(self.calls) > 1 or bool(self.activity_label)

    @property
    def size(self) -> int:
        """Calls in the block, nested subagent calls included."""
        return sum(1 for call in self.calls for _ in call.walk())

    @property
    def live(self) -> bool:
        """Whether a call of the block, or one nested under it, has not settled yet."""
        return self.holds(is_live)

    def holds(self, keep: Callable[[Call], bool]) -> bool:
        """Whether a call of the block, or one nested under it, is one ``keep`` keeps."""
        return any(top.holds(keep) for top in self.calls)

    def counts(self) -> tuple[int, int, int, int]:
        """(calls, failed, cancelled, live) of the block's own calls."""
        failed = sum(1 for c in self.calls if c.status in (Status.ERROR, Status.ABANDONED))
        cancelled = sum(1 for c in self.calls if c.status == Status.CANCELLED)
        live = sum(1 for c in self.calls if c.live)
        return len(self.calls), failed, cancelled, live


_call_fields = attrgetter(*(f.name for f in fields(Call)))
_block_fields = attrgetter(*(f.name for f in fields(Block)))


def count_text(calls: int, failed: int = 0, cancelled: int = 0, live: int = 0) -> str:
    """The block's count line (also what screen readers announce; never model text)."""
    parts = [f"{calls} call" if calls == 1 else f"{calls} calls"]
    if failed:
        parts.append(f"{failed} failed")
    if cancelled:
        parts.append(f"{cancelled} cancelled")
    if live:
        parts.append(f"{live} live")
    return " · ".join(parts)


@dataclass(slots=True)
class Story:
    """A session as turns → blocks → calls, cut into pages of whole top-level blocks."""

    session_id: str
    blocks: list[Block]
    """Top-level blocks in story order (by first ``seq``)."""
    calls: dict[str, Call]
    """Every call of the session by id (nested ones included)."""
    pages: list[tuple[int, int]]
    """``[start, end)`` ranges over ``blocks``, one per page."""
    top_of: dict[str, int]
    """Call id -> index of the top-level block that shows it."""
    start_ns: int | None
    end_ns: int | None
    max_updated_ns: int

    @property
    def total(self) -> int:
        return len(self.calls)

    def page_of(self, call_id: str | None) -> int | None:
        """0-based page that shows ``call_id`` (None when the call is not in this session)."""
        if call_id is None or call_id not in self.top_of:
            return None
        return page_holding(self.pages, self.top_of[call_id])

    def page_blocks(self, page: int) -> list[Block]:
        if not self.pages:
            return []
        start, end = self.pages[max(0, min(page, len(self.pages) - 1))]
        return self.blocks[start:end]

    def ordered(self) -> list[Call]:
        """Every call in ``seq`` order (the detail's previous/next call)."""
        return sorted(self.calls.values(), key=lambda c: (c.seq, c.id))

    def neighbours(self, call_id: str) -> tuple[Call | None, Call | None]:
        """The calls before and after ``call_id`` in ``seq`` order."""
        ordered = self.ordered()
        for index, call in enumerate(ordered):
            if call.id == call_id:
                before = ordered[index - 1] if index > 0 else None
                after = ordered[index + 1] if index + 1 < len(ordered) else None
                return before, after
        return None, None

    def turn_numbers(self) -> list[int | None]:
        """The turns of the story, in story order (each once)."""
        return list(dict.fromkeys(turn for turn, _ in turns(self.blocks)))

    def live_blocks(self) -> list[Block]:
        """The top-level blocks that hold a live call (nested ones included): the Live page."""
        return [block for block in self.blocks if block.live]

    def checkpoints(self) -> list[Call]:
        """The settled calls in ``seq`` order (what ``Ledger.checkpoints`` returns, from the
        rows already read): labelled rewind points."""
        settled = [c for c in self.calls.values() if c.status in SETTLED_STATUSES]
        return sorted(settled, key=lambda c: c.seq)

    def ancestors(self, call_id: str) -> list[str]:
        """Ids of the calls ``call_id`` is nested under, outermost first."""
        chain: list[str] = []
        call = self.calls.get(call_id)
        seen: set[str] = set()
        while call is not None and call.parent_id and call.parent_id in self.calls:
            if call.parent_id in seen:  # a cycle in bad data: stop
                break
            seen.add(call.parent_id)
            chain.append(call.parent_id)
            call = self.calls[call.parent_id]
        chain.reverse()
        return chain


def to_call(anchor: Anchor) -> Call:
    intent = anchor["intent"]
    return Call(
        id=anchor["tool_call_id"],
        seq=anchor["seq"],
        settle_seq=anchor["settle_seq"],
        turn=anchor["turn"],
        batch_id=anchor["batch_id"],
        parent_id=anchor["parent_call_id"],
        agent_id=anchor["agent_id"],
        tool_name=anchor["tool_name"],
        intent=intent if intent else None,
        status=anchor["status"],
        label=call_label(anchor),
        start_ns=anchor["start_ns"],
        end_ns=anchor["end_ns"],
        duration_ms=anchor["duration_ms"],
        has_error_text=bool(anchor["error"]),
    )


def _group(
    calls: Sequence[Call], activity: Mapping[str, str | None], scope: str = ""
) -> list[Block]:
    """Blocks of sibling calls, ordered by their first ``seq``; headers by ``group_header``.

    ``scope`` (the spawning call's id for a subagent's calls) keeps block keys unique when a
    subagent's calls share a ``batch_id`` with calls elsewhere.
    """
    by_key: dict[str, Block] = {}
    for call in calls:  # calls arrive in seq order
        own = f"batch:{call.batch_id}" if call.batch_id is not None else f"call:{call.id}"
        key = f"{scope}/{own}" if scope else own
        block = by_key.get(key)
        if block is None:
            label = activity.get(call.batch_id) if call.batch_id is not None else None
            block = Block(
                key=key, batch_id=call.batch_id, turn=call.turn, activity_label=label, calls=[]
            )
            by_key[key] = block
        elif block.turn is None:
            block.turn = call.turn
        block.calls.append(call)
    blocks = sorted(by_key.values(), key=lambda b: b.first_seq)
    for block in blocks:
        block.header = group_header((c.header_call() for c in block.calls), block.activity_label)
    return blocks


def build_story(
    session_id: str,
    anchors: Iterable[Anchor],
    block_infos: Iterable[BlockInfo] = (),
    *,
    page_calls: int = PAGE_CALLS,
) -> Story:
    """Arrange a session's anchors (any order) as a story.

    Args:
        session_id: the session.
        anchors: its calls (``Ledger.session_anchors``).
        block_infos: its blocks (``Ledger.blocks``), for the activity labels.
        page_calls: calls per page (whole top-level blocks).
    """
    rows = sorted(anchors, key=lambda a: (a["seq"], a["tool_call_id"]))
    activity = {b["batch_id"]: b["activity_label"] for b in block_infos}
    calls = {a["tool_call_id"]: to_call(a) for a in rows}
    ordered = [calls[a["tool_call_id"]] for a in rows]

    # Subagents: a call whose parent is a call of this session nests under it. A parent that
    # is missing (another session, not written yet) or a cycle leaves the call at top level.
    kids: dict[str, list[Call]] = {}
    top: list[Call] = []
    for call in ordered:
        parent = call.parent_id
        if parent and parent in calls and parent != call.id and not _cycles(calls, call):
            kids.setdefault(parent, []).append(call)
        else:
            top.append(call)

    def attach(call: Call, depth: int) -> None:
        call.depth = depth
        children = kids.get(call.id, [])
        if not children:
            return
        for child in children:
            attach(child, depth + 1)
        call.children = _group(children, activity, scope=call.id)
        nested = [c for block in call.children for top_call in block.calls for c in top_call.walk()]
        call.child_latest = group_header(c.header_call() for c in nested)

    for call in top:
        attach(call, 0)
    blocks = _group(top, activity)

    top_of: dict[str, int] = {}
    for index, block in enumerate(blocks):
        for call in block.calls:
            for nested in call.walk():
                top_of[nested.id] = index

    pages = paginate(blocks, page_calls)

    starts = [a["start_ns"] for a in rows]
    ends = [a["end_ns"] or a["start_ns"] for a in rows]
    return Story(
        session_id=session_id,
        blocks=blocks,
        calls=calls,
        pages=pages,
        top_of=top_of,
        start_ns=min(starts) if starts else None,
        end_ns=max(ends) if ends else None,
        max_updated_ns=max((a["updated_ns"] for a in rows), default=0),
    )


def paginate(blocks: Sequence[Block], page_calls: int = PAGE_CALLS) -> list[tuple[int, int]]:
    """``[start, end)`` ranges over ``blocks``: pages of whole blocks of about ``page_calls``
    calls (nested calls count; a page holds more when one block is bigger)."""
    pages: list[tuple[int, int]] = []
    start, weight = 0, 0
    for index, block in enumerate(blocks):
        weight += block.size
        if weight >= page_calls:
            pages.append((start, index + 1))
            start, weight = index + 1, 0
    if start < len(blocks):
        pages.append((start, len(blocks)))
    return pages


def page_holding(pages: Sequence[tuple[int, int]], index: int) -> int | None:
    """0-based page whose range holds block ``index``."""
    for number, (start, end) in enumerate(pages):
        if start <= index < end:
            return number
    return None


def is_live(call: Call) -> bool:
    """The Live page's filter: calls that have not settled yet."""
    return call.live


@dataclass(frozen=True, slots=True)
class CallFilter:
    """The Session page's search inside a session; an empty filter keeps every call."""

    text: str = ""
    """Case-insensitive substring of the call's label, intent, tool name or id."""
    tool: str | None = None
    status: Status | None = None
    errors_only: bool = False
    """Failed calls only (``error``, ``abandoned``)."""

    @property
    def active(self) -> bool:
        return bool(self.text.strip() or self.tool or self.status or self.errors_only)

    def __call__(self, call: Call) -> bool:
        if self.errors_only and call.status not in (Status.ERROR, Status.ABANDONED):
            return False
        if self.tool is not None and call.tool_name != self.tool:
            return False
        if self.status is not None and call.status != self.status:
            return False
        needle = self.text.strip().casefold()
        if not needle:
            return True
        return any(
            needle in text.casefold()
            for text in (call.label, call.intent or "", call.tool_name, call.id)
        )


def _cycles(calls: Mapping[str, Call], call: Call) -> bool:
    """Whether following ``parent_id`` from ``call`` comes back to it (bad data)."""
    seen = {call.id}
    parent = call.parent_id
    while parent and parent in calls:
        if parent in seen:
            return True
        seen.add(parent)
        parent = calls[parent].parent_id
    return False


def turns(blocks: Sequence[Block]) -> list[tuple[int | None, list[Block]]]:
    """Consecutive blocks grouped by turn (story order is kept; a turn never repeats)."""
    grouped: list[tuple[int | None, list[Block]]] = []
    for block in blocks:
        if grouped and grouped[-1][0] == block.turn:
            grouped[-1][1].append(block)
        else:
            grouped.append((block.turn, [block]))
    return grouped


def format_duration(ms: float | None) -> str:
    """``12 ms``, ``0.4 s``, ``2 min 5 s``; empty when unknown."""
    if ms is None:
        return ""
    if ms < 1:
        return "<1 ms"
    if ms < 100:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
