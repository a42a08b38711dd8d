"""A request watches its turn's job as ``asyncio.shield`` would (``server/_jobs.py``):
the job's result or error comes through, and cancelling the watcher leaves the job
running. (No timing here: the collector's figures are in ``docs/performance.md``.)"""

from __future__ import annotations

import asyncio
import gc

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


async def test_an_abandoned_failing_job_leaves_no_unretrieved_error() -> None:
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


async def _await(future: asyncio.Future[str]) -> str:
    return await future
