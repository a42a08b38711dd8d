"""Turn tasks: each turn runs in an asyncio task of its own, started eagerly where Python
offers it.

Rules:

- :func:`start_task` makes a task running a coroutine in a copy of the current context
  (or the one given): context variables set in the task stay in it, and cancel scopes,
  ``asyncio.timeout`` and anyio task groups entered there belong to the task, never to
  the caller.
- On Python 3.12 and later, unless the loop has a task factory (which then makes every
  task, as the host wants), the task starts eagerly (``eager_start=True``, public API):
  its coroutine runs until it first waits before :func:`start_task` returns, already
  as the new task, so a turn that never waits is over without a trip through the event
  loop. On 3.11 it is a plain task, whose first step runs at the loop's next pass.
- Either way the task's result or exception is the coroutine's, and cancelling the task
  is delivered to the coroutine where it waits (a task cancelled before its first step
  never runs it).
- A call that would start a turn but answers at once (the turn is over already, or
  cannot start) returns :func:`ready` or :func:`raising`, awaited as the turn would be;
  a turn's checkpoint future is settled with :func:`resolve` (only once).
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def start_task(
    coroutine: Coroutine[Any, Any, T], context: contextvars.Context | None = None
) -> asyncio.Task[T]:
    """A task running ``coroutine`` in a copy of the current context by default (see the
    module's rules for when its first step runs)."""
    loop = asyncio.get_running_loop()
    if context is None:
        context = contextvars.copy_context()
    if sys.version_info >= (3, 12) and loop.get_task_factory() is None:  # pragma: no cover
        return asyncio.Task(coroutine, loop=loop, context=context, eager_start=True)
    return loop.create_task(coroutine, context=context)


async def raising(error: Exception) -> Any:
    """An awaitable that raises ``error``."""
    raise error


async def ready(value: T) -> T:
    """An awaitable of ``value``."""
    return value


def resolve(future: asyncio.Future[T], outcome: T) -> None:
    """Settle ``future`` with ``outcome`` unless it is done already."""
    if not future.done():
        future.set_result(outcome)
