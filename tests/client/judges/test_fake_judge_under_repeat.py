"""A FakeJudge whose script runs out under --repeat says why and what to write, in the
judged assertion's message, instead of a bare "no answer left" that reads as a flaky case."""

from __future__ import annotations

from evalport.client import Case, LocalTarget, Runner, RunOptions
from evalport.client.judges import FakeJudge


async def agent(message: str) -> str:
    return "Your order shipped."


async def judged(ctx) -> None:
    await ctx.send("where is my order?")
    ctx.judge().custom("Does the reply say where the order is?").gate()


async def test_one_scripted_answer_under_repeat_names_the_fix() -> None:
    async with LocalTarget(agent) as target:
        report = await Runner(target, RunOptions(repeat=2), judge=FakeJudge([0.9])).run(
            [Case(id="judged", func=judged)]
        )
    first, second = report.results[0].trials
    assert first.verdict == "passed"
    assert second.verdict == "error"
    (check,) = second.assertions  # a judge that could not run: the trial is an error
    assert "each trial's (--repeat) included" in check.message
    assert "default=" in check.message
    async with LocalTarget(agent) as target:  # the fix the message gives
        fixed = await Runner(target, RunOptions(repeat=2), judge=FakeJudge(default=0.9)).run(
            [Case(id="judged", func=judged)]
        )
    assert [t.verdict for t in fixed.results[0].trials] == ["passed", "passed"]
