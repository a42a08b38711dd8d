"""An AG-UI run leaves no cycle of evalport's behind it (issue 37): what it made is freed
as soon as it is dropped, not by the garbage collector, whose full collections hold every
first token due while they run. httpx's own response objects are cyclic; they are not
ours to change."""

from __future__ import annotations

import gc
from collections import Counter

import pytest

pytest.importorskip("ag_ui.core")

from test_agui_decoding import USAGE, Agent, finished, frames, started, text, tool


def _cyclic_garbage() -> Counter[str]:
    """The modules of the objects that only the collector would free, by count."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return Counter(type(item).__module__.split(".")[0] for item in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def test_a_finished_run_leaves_no_cycle_of_evalport_or_the_sdk() -> None:
    run = [
        started(),
        *tool("c1", "lookup", '{"order_id": "A1"}', '{"status": "shipped"}'),
        *text("a1", "Order ", "shipped."),
        finished(usage=USAGE),
    ]
    agent = Agent(*(frames(run) for _ in range(3)))
    async with agent.target() as target:
        session = await target.open()
        await session.send("warm up")  # imports and first-use caches are not the run's
        gc.collect()
        gc.disable()
        try:
            for question in ("where is A1?", "and now?"):
                turn = await session.send(question)
                assert turn.run.reply == "Order shipped."
            del turn
            left = _cyclic_garbage()
        finally:
            gc.enable()
        await session.close()
    assert left["evalport"] == 0 and left["ag_ui"] == 0, left
    assert left["httpx"] > 0  # the check sees cycles: httpx's response is one
