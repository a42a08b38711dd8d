"""How a turn's code runs: async steps on the event loop, timed; sync code in worker threads.

A thread cannot be stopped: its session stays busy until it returns. Rules: see
ARCHITECTURE.md, "The agent runtime: sessions and turns".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Final, Protocol, TypeVar

T = TypeVar("T")

DEFAULT_WORKERS: Final = 16
"""Threads of the pool that sync turns share when their session names none."""

_default: concurrent.futures.ThreadPoolExecutor | None = None
_default_lock = threading.Lock()


def default_workers() -> concurrent.futures.ThreadPoolExecutor:
    """The process-wide pool for sync turns (:data:`DEFAULT_WORKERS` threads)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = concurrent.futures.ThreadPoolExecutor(
                DEFAULT_WORKERS, thread_name_prefix="evalport-turn"
            )
        return _default


class StepClock(Protocol):
    """Told when each step of a turn starts and ends (on the event loop's thread)."""

    def step_started(self, session_id: str, turn: int) -> None: ...

    def step_ended(self) -> None: ...


class Timed:
    """An awaitable running ``coroutine`` step by step, each step told to ``clock``."""

    __slots__ = ("_clock", "_coroutine", "_session_id", "_turn")

    def __init__(
        self,
        coroutine: Coroutine[Any, Any, Any],
        clock: StepClock,
        session_id: str,
        turn: int,
    ) -> None:
        self._coroutine = coroutine
        self._clock = clock
        self._session_id = session_id
        self._turn = turn

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, clock = self._coroutine, self._clock
        value: Any = None
        error: BaseException | None = None
        while True:
            clock.step_started(self._session_id, self._turn)
            try:
                waiting = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                clock.step_ended()
            try:
                value, error = (yield waiting), None
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as thrown:  # a cancellation, delivered where it waits
                value, error = None, thrown


class Worker:
    """Runs a session's sync code in a pool's thread and remembers whether it still runs."""

    __slots__ = ("_future", "_pool")

    def __init__(self, pool: concurrent.futures.Executor | None) -> None:
        self._pool = pool
        self._future: concurrent.futures.Future[Any] | None = None

    @property
    def running(self) -> bool:
        """A thread of this session has not returned yet (a timed-out turn's included)."""
        future = self._future
        return future is not None and not future.done()

    async def __call__(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread, in a copy of the current context."""
        pool = self._pool or default_workers()
        context = contextvars.copy_context()
        future = self._future = pool.submit(context.run, function, *args)
        return await asyncio.wrap_future(future)
