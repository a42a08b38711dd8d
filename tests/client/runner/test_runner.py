import asyncio
import random
import time

import pytest
from evalport.client import Runner, RunOptions, TrialResult, Verdict
from evalport.client.reports import Reporter
from runner_memory import MemoryTarget, SimpleCase, simple_trial


def runner(target, **options):
    return Runner(target, RunOptions(**options), trial_function=simple_trial)


async def test_every_trial_gets_a_fresh_session_that_is_closed(memory_target):
    cases = [SimpleCase(id=f"c{i}", messages=["hi", "again"]) for i in range(5)]
    report = await runner(memory_target, repeat=3, concurrency=4).run(cases)
    assert report.summary.counts[Verdict.PASSED] == 5
    assert len(memory_target.opened) == 15
    assert len({s.id for s in memory_target.opened}) == 15
    assert all(session.closed for session in memory_target.opened)
    assert [t.trial for t in report.results[0].trials] == [0, 1, 2]
    assert report.results[0].trials[0].run["turns"] == 2


async def test_concurrency_is_bounded():
    target = MemoryTarget(delay=0.02)
    cases = [SimpleCase(id=f"c{i}", messages=["hi"]) for i in range(20)]
    started = time.perf_counter()
    await runner(target, concurrency=5).run(cases)
    assert target.peak == 5
    assert time.perf_counter() - started < 20 * 0.02  # really concurrent


async def test_errors_and_crashes_stay_in_their_case(memory_target):
    async def crashing(case, target, **kwargs):
        if case.id == "crash":
            raise ZeroDivisionError("bug in the case")
        return await simple_trial(case, target, **kwargs)

    cases = [
        SimpleCase(id="ok", messages=["hi"]),
        SimpleCase(id="target-error", messages=["boom"]),
        SimpleCase(id="crash", messages=["hi"]),
        SimpleCase(id="fails", messages=["hi"], expect="nope"),
    ]
    report = await Runner(memory_target, trial_function=crashing).run(cases)
    verdicts = {case.case_id: case.verdict for case in report.summary.cases}
    assert verdicts == {
        "ok": Verdict.PASSED,
        "target-error": Verdict.ERROR,
        "crash": Verdict.ERROR,
        "fails": Verdict.FAILED,
    }
    target_error = report.results[1].trials[0]
    assert target_error.error_type == "ConnectionError" and "boom" in target_error.error
    assert report.results[2].trials[0].error_type == "ZeroDivisionError"
    assert all(session.closed for session in memory_target.opened)


async def test_timeout_cancels_the_trial_and_closes_its_session():
    target = MemoryTarget(delay=5.0)
    cancelled = asyncio.Event()

    async def slow(case, target, **kwargs):
        session = await target.open(case_id=case.id)  # never closed by the case itself
        try:
            await session.send("hi")
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("not reached")

    cases = [SimpleCase(id="slow", messages=["hi"], timeout=0.05)]
    started = time.perf_counter()
    report = await Runner(target, RunOptions(timeout=30), trial_function=slow).run(cases)
    assert time.perf_counter() - started < 2
    trial = report.results[0].trials[0]
    assert trial.verdict == Verdict.ERROR and "timed out after 0.05s" in trial.error
    assert cancelled.is_set()
    assert target.opened[0].closed and target.active == 0


async def test_rate_limit_spaces_requests():
    target = MemoryTarget()
    cases = [SimpleCase(id=f"c{i}", messages=["hi"]) for i in range(5)]
    started = time.perf_counter()
    await runner(target, concurrency=5, rps=50).run(cases)
    # 10 requests (5 opens, 5 sends) at 50 per second: at least 9 intervals of 20 ms
    assert time.perf_counter() - started >= 0.17


async def test_repetition_verdicts_and_statistics(memory_target):
    outcomes = iter([True, False, True, True, True, False, False, False, True, True])

    async def sometimes(case, target, **kwargs):
        result = await simple_trial(case, target, **kwargs)
        if not next(outcomes):
            result.verdict = Verdict.FAILED
        return result

    cases = [SimpleCase(id="a", messages=["hi"]), SimpleCase(id="b", messages=["hi"])]
    options = RunOptions(repeat=5, pass_rate=0.8, concurrency=1)
    report = await Runner(memory_target, options, trial_function=sometimes).run(cases)
    a, b = report.summary.cases
    assert (a.passes, a.samples, a.required, a.verdict) == (4, 5, 4, Verdict.PASSED)
    assert (b.passes, b.verdict) == (2, Verdict.FAILED)
    assert a.flaky and b.flaky
    assert a.pass_at_k["1"] == pytest.approx(0.8) and a.pass_hat_k["5"] == 0.0
    assert a.pass_at_k["5"] == 1.0
    assert 0.37 < a.wilson_low < 0.38


async def test_lower_bound_gate_fails_a_passing_case(memory_target):
    cases = [SimpleCase(id="a", messages=["hi"])]
    options = RunOptions(repeat=4, pass_rate=0.5, min_lower_bound=0.6)
    report = await Runner(memory_target, options, trial_function=simple_trial).run(cases)
    case = report.summary.cases[0]
    assert case.passes == 4 and case.verdict == Verdict.FAILED
    assert report.results[0].verdict == Verdict.FAILED
    assert "Wilson lower bound" in case.failures[0]


def test_the_lower_bound_gate_is_part_of_the_cores_case_verdict():
    from evalport.client._core import case_verdict, lower_bound_miss

    passed, skipped = [Verdict.PASSED] * 4, [Verdict.SKIPPED]
    assert case_verdict(passed, 0.5, min_lower_bound=0.6) == Verdict.FAILED
    assert case_verdict(passed, 0.5, min_lower_bound=0.5) == Verdict.PASSED
    assert case_verdict(passed, 0.5) == Verdict.PASSED
    assert case_verdict([Verdict.ERROR] * 4, 0.5, min_lower_bound=0.6) == Verdict.ERROR
    assert case_verdict(skipped, 0.5, min_lower_bound=0.6) == Verdict.SKIPPED
    assert lower_bound_miss(passed + skipped, 0.6) == (
        "Wilson lower bound 0.510 is below the required 0.600"
    )
    assert lower_bound_miss(skipped, 0.6) is None and lower_bound_miss(passed, None) is None


async def test_attach_inspects_one_existing_session_without_deleting_it(memory_target):
    existing = await memory_target.open()
    await existing.send("opened elsewhere")

    async def inspect(case, target, **kwargs):
        session = await target.open(case_id=case.id)
        passed = session.run.reply == "echo: opened elsewhere"
        await session.close()
        verdict = Verdict.PASSED if passed else Verdict.FAILED
        return TrialResult(case_id=case.id, verdict=verdict, session_id=session.id)

    report = await Runner(
        memory_target, RunOptions(attach=existing.id), trial_function=inspect
    ).run([SimpleCase(id="a", messages=[])])
    assert report.summary.cases[0].verdict == Verdict.PASSED
    assert report.results[0].trials[0].session_id == existing.id
    assert not existing.closed and len(memory_target.opened) == 1


async def test_reporters_hear_everything_and_a_broken_one_does_not_stop_the_run(memory_target):
    heard: list[str] = []

    class Recorder(Reporter):
        def start(self, plan):
            heard.append(f"start {plan.cases}/{plan.trials}")

        def trial_done(self, trial):
            heard.append("trial")

        def case_done(self, result, summary):
            heard.append(f"case {summary.case_id}")

        def finish(self, report):
            heard.append(f"finish {report.summary.total}")

    class Broken(Reporter):
        def trial_done(self, trial):
            raise RuntimeError("disk full")

    cases = [SimpleCase(id="a", messages=["hi"]), SimpleCase(id="b", messages=["hi"])]
    run = Runner(
        memory_target,
        RunOptions(repeat=2, concurrency=1),
        trial_function=simple_trial,
        reporters=[Broken(), Recorder()],
    )
    await run.run(cases)
    assert heard == [
        "start 2/4",
        "trial",
        "trial",
        "case a",
        "trial",
        "trial",
        "case b",
        "finish 2",
    ]
    assert run.reporters.errors[0] == "reporter Broken.trial_done failed: RuntimeError: disk full"


async def test_outcomes_stay_distinct_in_the_summary(memory_target):
    verdicts = [Verdict.PASSED, Verdict.FAILED, Verdict.ERROR, Verdict.SKIPPED, Verdict.SCORED]
    random.shuffle(verdicts)

    async def fixed(case, target, **kwargs):
        return TrialResult(case_id=case.id, verdict=case.expect)

    cases = [SimpleCase(id=v, messages=[], expect=v) for v in verdicts]
    report = await Runner(memory_target, trial_function=fixed).run(cases)
    assert report.summary.counts == dict.fromkeys(Verdict.ALL, 1)
    assert {c.case_id: c.verdict for c in report.summary.cases} == {v: v for v in verdicts}


async def test_a_trial_function_that_returns_nonsense_is_an_error(memory_target):
    async def broken(case, target, **kwargs):
        return {"verdict": "passed"}

    report = await Runner(memory_target, trial_function=broken).run(
        [SimpleCase(id="a", messages=[])]
    )
    trial = report.results[0].trials[0]
    assert trial.verdict == Verdict.ERROR and trial.error_type == "TypeError"
    assert "returned dict, not a TrialResult" in trial.error


async def test_cancelling_the_run_closes_open_sessions():
    async def careless(case, target, **kwargs):
        session = await target.open(case_id=case.id)  # never closed by the case itself
        await session.send("hi")

    target = MemoryTarget(delay=10.0)
    cases = [SimpleCase(id=f"c{i}", messages=["hi"]) for i in range(4)]
    run = Runner(target, RunOptions(concurrency=4), trial_function=careless)
    task = asyncio.create_task(run.run(cases))
    while len(target.opened) < 4:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(session.closed for session in target.opened)
