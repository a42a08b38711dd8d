"""Eager start: run a coroutine on the caller's stack until it first waits.

Python 3.12 has eager tasks; 3.11 does not, so this does the same by hand. A coroutine
that finishes without ever waiting (a turn of an agent that does no I/O) costs no task and
no trip through the event loop; one that waits continues as an ordinary task from where
it stopped, with the same context, and cancelling that task cancels the coroutine where it
waits. Exceptions raised before the first wait propagate to the caller.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar, cast

__all__ = ["start_eagerly"]

T = TypeVar("T")


def start_eagerly(
    coroutine: Coroutine[Any, Any, T],
) -> tuple[bool, T | None, asyncio.Task[T] | None]:
    """Run ``coroutine`` until it first suspends, then continue it as a task.

    Returns ``(True, result, None)`` when it finished without suspending (no task was
    created: the common case of a turn that does no I/O), else ``(False, None, task)``.
    An exception raised before the first suspension propagates. The coroutine runs in a
    copy of the current context, so context variables it sets never leak to the caller.
    """
    context = contextvars.copy_context()
    try:
        yielded = context.run(coroutine.send, None)
    except StopIteration as stop:
        return True, stop.value, None
    task = asyncio.get_running_loop().create_task(_resume(coroutine, yielded), context=context)
    return False, None, task


class _Yield:
    """Hands a value the coroutine yielded (a future, or None) to the task running us."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, None]:
        yield self.value


async def _resume(coroutine: Coroutine[Any, Any, T], yielded: Any) -> T:
    while True:
        try:
            await _Yield(yielded)
        except BaseException as error:  # cancellation or the awaited future's error
            try:
                yielded = coroutine.throw(error)
            except StopIteration as stop:
                return cast(T, stop.value)
            continue
        try:
            yielded = coroutine.send(None)
        except StopIteration as stop:
            return cast(T, stop.value)
