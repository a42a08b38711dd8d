"""Jobs that outlive their request: a turn's job, a lease renewal, a lease given back.

Rules:

- A job is a task that the request which started it only watches: a client that goes
  away cancels its request, never the job, so a turn's bookkeeping is never cut in half.
- Jobs start eagerly where Python offers it (3.12+: a job that never waits is done
  before :meth:`Jobs.start` returns), as plain tasks otherwise.
- :meth:`Jobs.wait` (the adapter's shutdown) gives the jobs still running a bounded time.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Jobs:
    """The jobs of one session manager that are still running."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a job (see the module's rules)."""
        loop = asyncio.get_running_loop()
        job: asyncio.Task[T]
        if sys.version_info >= (3, 12):  # pragma: no cover - depends on the interpreter
            job = asyncio.Task(work, loop=loop, eager_start=True)
        else:
            job = loop.create_task(work)
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
