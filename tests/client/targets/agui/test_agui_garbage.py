"""An AG-UI run leaves no cycle of evalport's behind it (issue 37): what it made is freed
as soon as it is dropped, not by the garbage collector, whose full collections hold every
first token due while they run. httpx's own response objects are cyclic; they are not
ours to change."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("ag_ui.core")

from test_agui_decoding import USAGE, Agent, finished, frames, started, text, tool


def _not_httpx_own() -> list[str]:
    """The type of each object only the collector would free that httpx's and httpcore's
    own objects do not hold (their response objects are one cycle; not ours to change)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    inside = {id(item) for item in garbage}
    todo = [item for item in garbage if type(item).__module__.split(".")[0] in HTTPX]
    reached = {id(item) for item in todo}
    while todo:
        for referent in gc.get_referents(todo.pop()):
            if id(referent) in inside and id(referent) not in reached:
                reached.add(id(referent))
                todo.append(referent)
    return sorted(type(item).__qualname__ for item in garbage if id(item) not in reached)


HTTPX = ("httpx", "httpcore")


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
            mine: list[object] = []
            mine.append(mine)  # a cycle of the test's own: the check must find it
            del mine
            left = _not_httpx_own()
        finally:
            gc.enable()
        await session.close()
    assert left == ["list"]
