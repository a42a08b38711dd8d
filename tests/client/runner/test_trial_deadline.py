"""The runner's per-trial deadline keeps ``asyncio.timeout``'s contract: an expiry is the
trial's timeout, a cancellation from outside stays a cancellation, and a cancellation the
trial swallowed leaves the worker task uncancelled."""

import asyncio
import contextlib

import pytest
from evalport.client import Runner, RunOptions, TrialResult, Verdict
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


async def test_one_worker_timer_serves_trials_with_different_timeouts():
    """One worker: a long-timeout trial, then a short one that hangs (its earlier
    deadline must still fire), then trials whose deadline lies past the pending timer
    (it must wait for theirs, not cancel them early)."""

    async def naps(case, target, **kwargs):
        await asyncio.sleep(float(case.messages[0]))
        return TrialResult(case_id=case.id)

    cases = [
        SimpleCase(id="quick", messages=["0"], timeout=30),
        SimpleCase(id="hangs", messages=["5"], timeout=0.05),
        SimpleCase(id="first", messages=["0.06"], timeout=0.1),
        SimpleCase(id="second", messages=["0.06"], timeout=0.1),
        SimpleCase(id="late", messages=["5"], timeout=0.1),
    ]
    loop = asyncio.get_running_loop()
    started = loop.time()
    report = await Runner(MemoryTarget(), RunOptions(concurrency=1), trial_function=naps).run(cases)
    assert loop.time() - started < 2
    trials = {result.case_id: result.trials[0] for result in report.results}
    assert [trials[name].verdict for name in ("quick", "first", "second")] == [Verdict.PASSED] * 3
    assert trials["hangs"].verdict == trials["late"].verdict == Verdict.ERROR
    assert "timed out after 0.05s" in (trials["hangs"].error or "")
    assert "timed out after 0.1s" in (trials["late"].error or "")
    assert trials["late"].duration >= 0.09  # its own deadline, not the earlier trials'


async def test_run_trial_alone_has_its_deadline():
    async def hangs(case, target, **kwargs):
        await asyncio.sleep(5)

    runner = Runner(MemoryTarget(), RunOptions(timeout=0.05), trial_function=hangs)
    result = await runner.run_trial(SimpleCase(id="c", messages=[]), 0)
    assert result.verdict == Verdict.ERROR and "timed out after 0.05s" in (result.error or "")
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
