"""``start_task``: a task of its own, in its own context, eager on 3.12+ (public API).

The hand-rolled eager start on 3.11 is gone: the tests of the rules that hold on every
version run everywhere; those of the eager first step run on 3.12+ only."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys
from typing import Any

import pytest
from evalport.protocol.runtime._tasks import start_task

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="outer")


async def test_the_coroutine_runs_as_the_new_task_in_its_own_context() -> None:
    seen: list[object] = []

    async def body() -> str:
        seen.append(asyncio.current_task())
        var.set("inner")
        return "done"

    caller = asyncio.current_task()
    task = start_task(body())
    assert asyncio.current_task() is caller
    assert await task == "done"
    assert seen == [task] and var.get() == "outer"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager start needs Python 3.12")
async def test_the_first_step_runs_at_once_on_3_12() -> None:  # pragma: no cover - 3.12+
    seen: list[object] = []

    async def body() -> str:
        seen.append(asyncio.current_task())
        var.set("inner")
        return "done"

    caller = asyncio.current_task()
    task = start_task(body())
    assert seen == [task]  # ran before start_task returned, as the task
    assert asyncio.current_task() is caller and var.get() == "outer"
    assert task.done() and task.result() == "done"


async def test_a_waiting_coroutine_continues_in_the_task_with_its_context() -> None:
    gate, log = asyncio.Event(), []

    async def body() -> str:
        var.set("inner")
        log.append("before")
        await gate.wait()
        log.append(f"after {var.get()} {asyncio.current_task() is task}")
        return "resumed"

    task = start_task(body())
    await asyncio.sleep(0)  # (3.11: the first step runs at the loop's next pass)
    assert log == ["before"] and not task.done()
    gate.set()
    assert await task == "resumed"
    assert log == ["before", "after inner True"]


async def test_errors_of_the_first_step_and_later_end_the_task_not_the_caller() -> None:
    async def fails_now() -> None:
        raise ValueError("now")

    async def fails_later() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    now = start_task(fails_now())  # does not raise here
    with pytest.raises(ValueError, match="now"):
        await now
    with pytest.raises(KeyError):
        await start_task(fails_later())


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    seen: list[str] = []

    async def sleeper() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    task = start_task(sleeper())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


async def test_a_task_cancelled_at_once_ends_cancelled() -> None:
    """Before the loop's next pass: on 3.12+ the coroutine already waits and gets the
    cancellation there; on 3.11 it never starts."""
    seen: list[str] = []

    async def sleeper() -> None:
        seen.append("started")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    task = start_task(sleeper())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == (["started", "cancelled"] if sys.version_info >= (3, 12) else [])


async def test_a_timeout_entered_in_the_first_step_cancels_the_task_not_the_caller() -> None:
    async def body() -> str:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out inside"
        return "slept"

    assert await start_task(body()) == "timed out inside"
    await asyncio.sleep(0.02)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_failed_future_is_raised_inside_the_coroutine() -> None:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def reads() -> str:
        try:
            await future
        except RuntimeError as error:
            return f"caught {error}"
        return "no error"

    task = start_task(reads())
    future.set_exception(RuntimeError("boom"))
    assert await task == "caught boom"


async def test_introspection_sees_the_coroutine() -> None:
    gate = asyncio.Event()

    async def waiting() -> None:
        await gate.wait()

    task = start_task(waiting())
    coroutine = task.get_coro()
    assert "waiting" in repr(coroutine) and "waiting" in repr(task)
    await asyncio.sleep(0)
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_SUSPENDED  # type: ignore[arg-type]
    gate.set()
    await task
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED  # type: ignore[arg-type]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 starts eager tasks itself")
async def test_a_loop_task_factory_makes_the_task() -> None:
    loop = asyncio.get_running_loop()
    made: list[asyncio.Task[Any]] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        made.append(task)
        return task

    async def answer() -> int:
        return 42

    loop.set_task_factory(factory)
    try:
        task = start_task(answer())
    finally:
        loop.set_task_factory(None)
    assert made == [task]
    assert await task == 42


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 starts eager tasks itself")
def test_a_loop_that_overrides_create_task_makes_the_task() -> None:
    made: list[asyncio.Task[Any]] = []

    class Loop(asyncio.SelectorEventLoop):
        def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:  # type: ignore[override]
            task = super().create_task(coro, **kwargs)
            made.append(task)
            return task

    async def main() -> int:
        async def answer() -> int:
            return 42

        task = start_task(answer())
        assert made[-1] is task  # (the runner's own task came first)
        return await task

    with asyncio.Runner(loop_factory=Loop) as runner:
        assert runner.run(main()) == 42
