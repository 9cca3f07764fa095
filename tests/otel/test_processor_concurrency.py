"""Threads and asyncio tasks at once: every call keeps its own intent, outcome and session."""

from __future__ import annotations

import asyncio
import threading

from tracing import attributes as A
from tracing import harvest, session, tool_call
from tracing.testing import capture

THREADS = 8
CALLS = 25
TASKS = 40


def test_threads_and_tasks_do_not_cross_talk() -> None:
    with capture() as cap:
        tracer = cap.tracer
        start = threading.Barrier(THREADS + 1)

        def worker(n: int) -> None:
            start.wait()
            with session(f"thread-{n}", agent_id=f"agent-{n}"):
                for i in range(CALLS):
                    with tool_call(
                        "search",
                        {"intent": f"Searching t{n} c{i}", "i": i},
                        tracer=tracer,
                        call_id=f"t{n}-{i}",
                        label_bearing=True,
                    ) as c:
                        c.set_result({"i": i}, outcome=f"Found t{n} c{i}")

        async def task(n: int) -> None:
            with session(f"task-{n}"):
                async with tool_call(
                    "fetch",
                    {"intent": f"Fetching a{n}"},
                    tracer=tracer,
                    call_id=f"a{n}",
                    label_bearing=True,
                ) as c:
                    await asyncio.sleep(0.001 * (n % 5))
                    c.set_outcome(f"Fetched a{n}")

        async def tasks() -> None:
            await asyncio.gather(*(task(n) for n in range(TASKS)))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
        for t in threads:
            t.start()
        start.wait()
        asyncio.run(tasks())
        for t in threads:
            t.join()

        # background calls dispatched in one thread, harvested from others
        dispatched: list[str] = []
        for n in range(5):
            with tool_call(
                "index", {"intent": f"Indexing b{n}"}, tracer=tracer, label_bearing=True
            ) as c:
                c.to_background()
                dispatched.append(c.anchor_id)
        harvesters = [
            threading.Thread(target=harvest, args=(cid, None), kwargs={"outcome": f"Indexed b{n}"})
            for n, cid in enumerate(dispatched)
        ]
        for t in harvesters:
            t.start()
        for t in harvesters:
            t.join()

        spans = cap.dicts()
        anchors = cap.anchors()  # by anchor id, what the spans carry
        cap.assert_no_internal_errors()

    assert len(spans) == THREADS * CALLS + TASKS + 5
    for span in spans:
        attrs = span["attributes"]
        anchor = anchors[attrs[A.TOOL_CALL_ID]]
        call_id = str(anchor["provider_call_id"])
        assert anchor["status"] == "success"
        if call_id.startswith("t"):
            n, i = call_id[1:].split("-")
            assert span["name"] == f"Found t{n} c{i}"
            assert attrs[A.INTENT] == f"Searching t{n} c{i}"
            assert anchor["session_id"] == f"thread-{n}" and anchor["agent_id"] == f"agent-{n}"
        elif call_id.startswith("a"):
            assert span["name"] == f"Fetched {call_id}"
            assert anchor["session_id"] == f"task-{call_id[1:]}"
        else:
            n = dispatched.index(anchor["tool_call_id"])
            assert span["name"] == f"Indexed b{n}"
            assert attrs[A.BACKGROUND] is True
    assert cap.processor.stats()["live_calls"] == 0
