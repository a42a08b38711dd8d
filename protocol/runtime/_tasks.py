"""Eager tasks: a new task whose first step runs at once, as that task.

Python 3.12 can start a task eagerly (``eager_start=True``): its coroutine runs until it
first waits before ``create_task`` returns, but already as the new task. A turn that never
waits is then finished without a trip through the event loop, and its caller need not
suspend. :func:`start_task` does that on 3.12 and later, and by hand on 3.11.

Rules (the same on every version):

- The first step runs in the task's own context, with the task as
  ``asyncio.current_task()``: cancel scopes, ``asyncio.timeout`` and anyio task groups
  entered there belong to the task, never to the caller, and context variables set there
  stay in the task. The caller's task is current again when :func:`start_task` returns.
- Whatever the first step ends with (a result, an exception, a future to wait for), the
  task carries on from there: its result or exception is the coroutine's, and cancelling
  the task at any time is delivered to the coroutine where it waits.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

_enter_task = asyncio.tasks._enter_task
_leave_task = asyncio.tasks._leave_task
_current_task = asyncio.current_task
_PLAIN_CREATE_TASK = asyncio.BaseEventLoop.create_task


def start_task(
    coroutine: Coroutine[Any, Any, T], context: contextvars.Context | None = None
) -> asyncio.Task[T]:
    """A task running ``coroutine`` (in a copy of the current context by default),
    whose first step has already run."""
    loop = asyncio.get_running_loop()
    if context is None:
        context = contextvars.copy_context()
    if sys.version_info >= (3, 12):  # pragma: no cover - the interpreter does it
        return asyncio.Task(coroutine, loop=loop, context=context, eager_start=True)
    first = _FirstStep(coroutine)
    task: asyncio.Task[T]
    if type(loop).create_task is _PLAIN_CREATE_TASK and loop.get_task_factory() is None:
        task = asyncio.Task(first, loop=loop, context=context)  # what create_task would do
    else:
        task = loop.create_task(first, context=context)
    caller = _current_task(loop)
    if caller is not None:
        _leave_task(loop, caller)
    _enter_task(loop, task)
    try:
        context.run(first.run)
    finally:
        _leave_task(loop, task)
        if caller is not None:
            _enter_task(loop, caller)
    return task


class _FirstStep(Coroutine[Any, Any, T]):
    """The coroutine a 3.11 eager task runs: the first step's outcome, then the rest."""

    __slots__ = ("_coroutine", "_error", "_finished", "_pending", "_result", "_started")

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._started = False  # whether the task has taken the first step's outcome
        self._finished = False
        self._pending: Any = None
        self._result: Any = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """Run the first step (by :func:`start_task`, as the task, in its context)."""
        try:
            self._pending = self._coroutine.send(None)
        except StopIteration as stop:
            self._finished, self._result = True, stop.value
        except BaseException as error:  # the task's outcome, not the caller's
            self._finished, self._error = True, error

    def send(self, value: Any) -> Any:
        if self._started:
            return self._coroutine.send(value)
        self._started = True  # the task takes the first step's outcome
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._finished:
            raise StopIteration(self._result)
        return self._pending  # the future the coroutine waits for: the task waits too

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        error = typ if val is None else val
        if not self._started:
            self._started = True
            if self._finished or self._error is not None:
                raise error  # it ended already: the task ends with what it was sent
        return self._coroutine.throw(error)

    def close(self) -> None:
        self._coroutine.close()

    def __getattr__(self, name: str) -> Any:
        # Introspection (``cr_frame``, ``cr_running``, ``__qualname__``...) sees the coroutine.
        return getattr(self._coroutine, name)

    def __repr__(self) -> str:
        return repr(self._coroutine)

    def __await__(self) -> Generator[Any, None, T]:
        raise TypeError("an eager task's coroutine is driven by its task only")
