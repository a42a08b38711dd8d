"""The runner's per-trial deadline keeps ``asyncio.timeout``'s contract: an expiry is the
trial's timeout, a cancellation from outside stays a cancellation, and a cancellation the
trial swallowed leaves the worker task uncancelled."""

import asyncio
import contextlib

import pytest
from evalport.client.results import TrialResult, Verdict
from evalport.client.runner import Runner, RunOptions
from runner_memory import MemoryTarget, SimpleCase


async def test_a_swallowed_expiry_leaves_no_cancellation_behind():
    seen: list[int] = []

    async def stubborn(case, target, **kwargs):
        with contextlib.suppress(asyncio.CancelledError):  # swallowed: the trial ends normally
            await asyncio.sleep(5)
        task = asyncio.current_task()
        assert task is not None
        seen.append(task.cancelling())
        return TrialResult(case_id=case.id)

    cases = [SimpleCase(id=f"c{i}", messages=[], timeout=0.02) for i in range(3)]
    report = await Runner(MemoryTarget(), RunOptions(concurrency=1), trial_function=stubborn).run(
        cases
    )
    assert [case.verdict for case in report.results] == [Verdict.PASSED] * 3
    assert seen == [1, 1, 1]  # the worker did not accumulate cancellation requests


async def test_cancelling_the_run_is_not_a_timeout():
    started = asyncio.Event()

    async def waits(case, target, **kwargs):
        await target.open(case_id=case.id)
        started.set()
        await asyncio.sleep(5)
        raise AssertionError("not reached")

    target = MemoryTarget()
    runner = Runner(target, RunOptions(timeout=30), trial_function=waits)
    run = asyncio.create_task(runner.run([SimpleCase(id="c", messages=[])]))
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert target.opened[0].closed  # closed on the way out


async def test_an_expiry_after_errors_is_still_reported_once():
    async def fails_late(case, target, **kwargs):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise ValueError("cleanup failed") from None

    report = await Runner(MemoryTarget(), RunOptions(timeout=0.02), trial_function=fails_late).run(
        [SimpleCase(id="c", messages=[])]
    )
    trial = report.results[0].trials[0]
    assert trial.verdict == Verdict.ERROR
    assert (trial.error_type, trial.error) == ("ValueError", "cleanup failed")
