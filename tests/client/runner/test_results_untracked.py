"""A finished result costs the garbage collector next to nothing (issue 36): its Structs
are ``gc=False`` and its final sequences are tuples, which CPython stops tracking once
their items are untracked. A run of tens of thousands of cases keeps its collections
cheap only while this holds."""

from __future__ import annotations

import gc
from typing import Any

from evalport.client import Case, EvalContext, LocalTarget, Runner, RunOptions, Verdict


async def echo(message: str, history: list[Any], ctx: Any) -> str:
    return f"echo: {message}"


async def one_turn(ctx: EvalContext) -> None:
    await ctx.send("hello")
    ctx.contains("echo: hello")


async def test_a_finished_result_leaves_nothing_for_the_collector_but_its_lists() -> None:
    cases = [Case(id=f"case{i}", func=one_turn, tags=("smoke",)) for i in range(3)]
    report = await Runner(LocalTarget(echo), RunOptions(repeat=2)).run(cases)
    gc.collect()  # a tuple is untracked when a collection first meets it
    for result in report.results:
        assert result.verdict == Verdict.PASSED and len(result.trials) == 2
        assert [trial.trial for trial in result.trials] == [0, 1]
        assert result.tags == ("smoke",) and not gc.is_tracked(result)
        for trial in result.trials:
            assert trial.assertions and trial.timings and not gc.is_tracked(trial)
            for sequence in (trial.assertions, trial.judges, trial.timings):
                assert isinstance(sequence, tuple) and not gc.is_tracked(sequence)
            assert not any(gc.is_tracked(item) for item in trial.assertions)
    # What stays a list, on purpose: a trial's logs and a case's trials.
    assert isinstance(report.results[0].trials, list)
    assert isinstance(report.results[0].trials[0].logs, list)
