"""A request watches its turn's job as ``asyncio.shield`` would (``server/_jobs.py``):
the job's result or error comes through, and cancelling the watcher leaves the job
running. (No timing here: the collector's figures are in ``docs/performance.md``.)"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading

import pytest
from evalport.server._jobs import Jobs, watched


async def test_the_result_and_the_error_come_through() -> None:
    async def ok() -> str:
        await asyncio.sleep(0)
        return "done"

    async def failing() -> str:
        await asyncio.sleep(0)
        raise ValueError("boom")

    jobs = Jobs()
    assert await watched(jobs.start(ok())) == "done"
    with pytest.raises(ValueError, match="boom"):
        await watched(jobs.start(failing()))
    assert len(jobs) == 0


async def test_a_job_done_already_is_awaited_as_it_is() -> None:
    async def instant() -> int:
        return 7

    job = asyncio.get_running_loop().create_task(instant())
    await asyncio.sleep(0)
    assert job.done()
    assert await watched(job) == 7


async def test_cancelling_the_watcher_leaves_the_job_running() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    async def work() -> str:
        await release.wait()
        finished.append("stored")
        return "done"

    jobs = Jobs()
    job = jobs.start(work())
    request = asyncio.get_running_loop().create_task(_await(watched(job)))
    await asyncio.sleep(0)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    assert not job.cancelled() and not job.done()
    release.set()
    assert await job == "done"
    assert finished == ["stored"]
    assert len(jobs) == 0


async def test_a_cancelled_job_cancels_its_watcher() -> None:
    async def work() -> str:
        await asyncio.sleep(5)
        return "never"

    job = Jobs().start(work())
    outer = watched(job)
    await asyncio.sleep(0)
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer


async def test_an_abandoned_failing_job_is_logged_once_not_left_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="evalport.agent.details")
    release = asyncio.Event()
    reported: list[object] = []

    async def failing() -> str:
        await release.wait()
        raise ValueError("boom")

    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        job = Jobs().start(failing())
        outer = watched(job)
        outer.cancel()
        release.set()
        with pytest.raises(ValueError):
            await job
        del job, outer
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert reported == []
    warnings = [r for r in caplog.records if r.name == "evalport.server"]
    assert [r.getMessage() for r in warnings] == [
        "a job whose request went away failed: ValueError (DEBUG on logger "
        "evalport.agent.details shows its message and traceback)"
    ]
    assert warnings[0].exc_info is None  # the message, which may carry a payload, is not there
    (details,) = [r for r in caplog.records if r.name == "evalport.agent.details"]
    assert details.exc_info is not None and str(details.exc_info[1]) == "boom"


def test_watchers_on_loops_in_two_threads_at_once_each_get_their_outcome() -> None:
    """Each loop runs the jobs' callbacks in its own thread, in a context of that thread's
    (one context shared by all would refuse a second thread's entry while one ran)."""
    rounds = 3000
    both = threading.Barrier(2)

    async def many(tag: str) -> list[str]:
        jobs = Jobs()

        async def work(i: int) -> str:
            await asyncio.sleep(0)
            return f"{tag}{i}"

        return list(await asyncio.gather(*(watched(jobs.start(work(i))) for i in range(rounds))))

    results: dict[str, list[str]] = {}

    def run(tag: str) -> None:
        both.wait()
        results[tag] = asyncio.run(asyncio.wait_for(many(tag), timeout=10))

    threads = [threading.Thread(target=run, args=(tag,)) for tag in "ab"]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns inside callbacks, not only between
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert results == {tag: [f"{tag}{i}" for i in range(rounds)] for tag in "ab"}


async def _await(future: asyncio.Future[str]) -> str:
    return await future
