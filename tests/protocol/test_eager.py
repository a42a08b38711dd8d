"""``start_eagerly``: no task for a coroutine that never waits, a faithful task otherwise."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from evalport.protocol.eager import start_eagerly

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="outer")


async def immediate() -> str:
    var.set("inner")
    return "done"


async def waits(gate: asyncio.Event, log: list[str]) -> str:
    var.set("inner")
    log.append("before")
    await gate.wait()
    log.append(f"after {var.get()}")
    return "resumed"


async def test_a_coroutine_that_never_waits_finishes_without_a_task() -> None:
    tasks = len(asyncio.all_tasks())
    assert start_eagerly(immediate()) == (True, "done", None)
    assert len(asyncio.all_tasks()) == tasks
    assert var.get() == "outer"  # context changes stay inside


async def test_a_waiting_coroutine_continues_as_a_task_in_its_context() -> None:
    gate, log = asyncio.Event(), []
    finished, result, task = start_eagerly(waits(gate, log))
    assert (finished, result, log) == (False, None, ["before"])
    assert task is not None
    gate.set()
    assert await task == "resumed"
    assert log == ["before", "after inner"]
    assert var.get() == "outer"


async def test_errors_before_and_after_the_first_wait_propagate() -> None:
    async def fails_now() -> None:
        raise ValueError("now")

    async def fails_later() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    with pytest.raises(ValueError, match="now"):
        start_eagerly(fails_now())
    _, _, task = start_eagerly(fails_later())
    assert task is not None
    with pytest.raises(KeyError):
        await task


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    seen: list[str] = []

    async def sleeper() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    _, _, task = start_eagerly(sleeper())
    assert task is not None
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


async def test_a_failed_future_is_raised_inside_the_coroutine() -> None:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def reads() -> str:
        try:
            await future
        except RuntimeError as error:
            return f"caught {error}"
        return "no error"

    _, _, task = start_eagerly(reads())
    assert task is not None
    future.set_exception(RuntimeError("boom"))
    assert await task == "caught boom"
