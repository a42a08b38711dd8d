"""Turn tasks: each turn in an asyncio task of its own, started eagerly where Python can.

Rules: see ARCHITECTURE.md, "The agent runtime: sessions and turns".
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
    """A task running ``coroutine`` in a copy of the current context by default (when its
    first step runs: ARCHITECTURE.md, "The agent runtime: sessions and turns")."""
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
