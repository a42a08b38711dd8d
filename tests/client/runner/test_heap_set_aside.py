"""While cases run, the heap made before them is frozen, and given back after (issue 37).

A full collection walks every object the process tracks, the imported modules' too: tens
of milliseconds once the AG-UI and A2A SDKs are imported, during which no first token is
read. Frozen objects are not walked; what the run itself makes is collected as before."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest
from evalport.client import Case, EvalContext, LocalTarget, Runner, RunOptions, Verdict


async def echo(message: str, history: list[Any], ctx: Any) -> str:
    return f"echo: {message}"


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture(autouse=True)
def _thawed() -> Any:
    gc.unfreeze()  # nothing earlier in this process left frozen
    yield
    gc.unfreeze()


async def test_the_heap_before_a_run_is_frozen_while_it_runs_and_given_back_after() -> None:
    before = Node()
    gone = weakref.ref(before)
    seen: dict[str, Any] = {}

    async def drops_a_cycle_made_before_the_run(ctx: EvalContext) -> None:
        nonlocal before
        await ctx.send("hello")
        seen["frozen"] = gc.get_freeze_count()
        del before
        gc.collect()
        seen["kept while the run lasts"] = gone() is not None
        made = Node()
        made_ref = weakref.ref(made)
        del made
        gc.collect()
        seen["made in the run, collected"] = made_ref() is None
        ctx.contains("echo: hello")

    cases = [Case(id="one", func=drops_a_cycle_made_before_the_run)]
    report = await Runner(LocalTarget(echo), RunOptions()).run(cases)

    assert report.results[0].verdict == Verdict.PASSED, report.results[0].trials[0].error
    assert seen["frozen"] > 1000  # the modules, the suite, the target
    assert seen["kept while the run lasts"] and seen["made in the run, collected"]
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None  # given back: the cycle is freed once the run ends


async def test_the_heap_is_given_back_when_the_last_of_two_runs_ends() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    during: list[int] = []

    async def waits(ctx: EvalContext) -> None:
        await ctx.send("hello")
        started.set()
        await release.wait()
        during.append(gc.get_freeze_count())

    async def quick(ctx: EvalContext) -> None:
        await ctx.send("hello")

    slow = asyncio.create_task(
        Runner(LocalTarget(echo), RunOptions()).run([Case(id="slow", func=waits)])
    )
    await started.wait()
    await Runner(LocalTarget(echo), RunOptions()).run([Case(id="quick", func=quick)])
    still = gc.get_freeze_count()  # the slow run is still going
    release.set()
    await slow
    assert still > 0 and during and during[0] > 0
    assert gc.get_freeze_count() == 0


async def test_the_heap_stays_frozen_while_a_later_run_outlives_the_one_that_froze_it() -> None:
    during: list[int] = []

    def held(entered: asyncio.Event, leave: asyncio.Event) -> Any:
        async def case(ctx: EvalContext) -> None:
            await ctx.send("hello")
            entered.set()
            await leave.wait()
            during.append(gc.get_freeze_count())

        return case

    first_in, first_out, second_in, second_out = (asyncio.Event() for _ in range(4))
    first = asyncio.create_task(
        Runner(LocalTarget(echo), RunOptions()).run(
            [Case(id="first", func=held(first_in, first_out))]
        )
    )
    await first_in.wait()
    second = asyncio.create_task(
        Runner(LocalTarget(echo), RunOptions()).run(
            [Case(id="second", func=held(second_in, second_out))]
        )
    )
    await second_in.wait()
    first_out.set()
    await first  # the run that froze the heap ends first
    second_out.set()
    await second
    assert len(during) == 2 and during[1] > 0  # still frozen for the run still going
    assert gc.get_freeze_count() == 0


async def test_a_cancelled_run_gives_the_heap_back() -> None:
    started = asyncio.Event()

    async def forever(ctx: EvalContext) -> None:
        await ctx.send("hello")
        started.set()
        await asyncio.Event().wait()

    run = asyncio.create_task(
        Runner(LocalTarget(echo), RunOptions()).run([Case(id="forever", func=forever)])
    )
    await started.wait()
    assert gc.get_freeze_count() > 0
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert gc.get_freeze_count() == 0


async def test_a_process_that_froze_its_own_heap_keeps_it_frozen() -> None:
    mine = Node()
    gone = weakref.ref(mine)
    gc.freeze()
    del mine  # garbage now, but frozen by the process: kept until it thaws its heap

    async def one_turn(ctx: EvalContext) -> None:
        await ctx.send("hello")

    await Runner(LocalTarget(echo), RunOptions()).run([Case(id="one", func=one_turn)])
    gc.collect()
    assert gone() is not None and gc.get_freeze_count() > 0
