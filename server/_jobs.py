"""Jobs that outlive their request: a turn's job, a lease renewal, a lease given back.

Rules:

- A job is a task that the request which started it only watches: a client that goes
  away cancels its request, never the job, so a turn's bookkeeping is never cut in half.
- Jobs start as turns do (:func:`evalport.protocol.runtime.start_task`): eagerly where
  Python offers it (a job that never waits is done before :meth:`Jobs.start` returns),
  as plain tasks otherwise.
- :meth:`Jobs.wait` (the adapter's shutdown) gives the jobs still running a bounded time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from evalport.protocol.runtime import start_task

T = TypeVar("T")


class Jobs:
    """The jobs of one session manager that are still running."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a job (see the module's rules)."""
        job = start_task(work)
        if not job.done():
            self._running.add(job)
            job.add_done_callback(self._running.discard)
        return job

    def __len__(self) -> int:
        return len(self._running)

    async def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the running jobs."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)
