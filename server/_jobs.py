"""Jobs that outlive their request (the rest of a turn, lease renewals and give-backs): a
request only watches its job, so a client that goes away cancels nothing, and a job whose
watcher went away is logged if it fails, never dropped in silence.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Coroutine
from functools import partial
from typing import Any, Final, TypeVar

from evalport.protocol.runtime import start_task

T = TypeVar("T")

_logger = logging.getLogger("evalport.server")
_details = logging.getLogger("evalport.agent.details")


class _Callbacks(threading.local):
    """The context the jobs' done callbacks run in, one per thread (they read no
    context variable)."""

    def __init__(self) -> None:
        self.context = contextvars.Context()


_CALLBACKS: Final = _Callbacks()


class Jobs:
    """The jobs of one session manager that are still running."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a job, started as turns are (:func:`start_task`: eagerly where
        Python offers it, so a job that never waits is done when this returns)."""
        job = start_task(work)
        if not job.done():
            self._running.add(job)
            job.add_done_callback(self._running.discard, context=_CALLBACKS.context)
        return job

    def __len__(self) -> int:
        return len(self._running)

    async def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the running jobs."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)


def watched(job: asyncio.Task[T]) -> asyncio.Future[T]:
    """What ``asyncio.shield(job)`` gives: an awaitable with the job's outcome, whose
    cancellation (the request's) leaves the job running.

    With a third of shield's objects: every object a request holds while its turn runs
    counts towards the collector's next young collection, and with many requests in flight
    a few dozen each make it run over and over, promoting what is in flight towards the
    full collections that walk every live session (``docs/performance.md``). Callbacks run
    in an empty context of their thread's, not a copy of the request's: they read no
    context variable."""
    if job.done():
        return job  # (awaiting it returns or raises at once: nothing left to cancel)
    outer: asyncio.Future[T] = job.get_loop().create_future()
    job.add_done_callback(partial(_pass_on, outer), context=_CALLBACKS.context)
    return outer


def _pass_on(outer: asyncio.Future[T], job: asyncio.Task[T]) -> None:
    if outer.cancelled():  # the request went away: the outcome is nobody's
        if not job.cancelled() and (error := job.exception()) is not None:
            kind = type(error).__name__  # its text may carry a payload: at DEBUG only
            _logger.warning(
                "a job whose request went away failed: %s (DEBUG on logger "
                "evalport.agent.details shows its message and traceback)",
                kind,
            )
            _details.debug("a job whose request went away failed", exc_info=error)
    elif job.cancelled():
        outer.cancel()
    elif (error := job.exception()) is not None:
        outer.set_exception(error)
    else:
        outer.set_result(job.result())
