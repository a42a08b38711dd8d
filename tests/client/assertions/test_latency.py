"""Latency budgets on a real agent with controlled sleeps (issue 19, item 11)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from evalport.client import EvalContext, LocalTarget, Verdict, cases_from, eval_case, run_trial
from evalport.client.assertions import FirstToolCallWithin, TrialWithin, TurnWithin
from evalport.protocol import AgentRun
from evalport.protocol.runtime import TurnContext, tool


@tool
async def lookup(order_id: str) -> str:
    await asyncio.sleep(0.05)
    return f"{order_id}: shipped"


async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    """'think N lookup' sleeps N seconds, then calls a tool; 'wait N' only sleeps."""
    _verb, seconds, *rest = message.split()
    await asyncio.sleep(float(seconds))
    if rest:
        return await lookup("A1")
    return "done"


async def conversation(*messages: str) -> tuple[AgentRun, list[Any]]:
    async with LocalTarget(agent) as target:
        session = await target.open()
        turns = [await session.send(message) for message in messages]
        await session.close()
    return turns[-1].run, turns


async def test_turn_budgets_check_every_turn_or_one() -> None:
    run, turns = await conversation("wait 0", "wait 0.5")
    slowest = TurnWithin(0.25).evaluate(run)
    assert not slowest.passed and slowest.context["turn"] == 2
    assert 0 < slowest.score <= 0.25 / 0.5 + 0.01  # partial credit: budget / actual
    assert "turn 2 took" in slowest.message and "over the budget of 0.25s" in slowest.message
    assert TurnWithin(0.25, turn=1).evaluate(run).passed
    assert TurnWithin(0.25).evaluate(turns[0]).passed  # a Turn subject: that turn only
    assert not TurnWithin(0.25).evaluate(turns[1]).passed
    assert TurnWithin(10).evaluate(run).passed


async def test_trial_budget_spans_every_turn() -> None:
    run, _ = await conversation("wait 0.2", "wait 0.2")
    assert not TrialWithin(0.35).evaluate(run).passed  # over both turns
    result = TrialWithin(10).evaluate(run)
    assert result.passed and result.context["seconds"] >= 0.39
    slowest = TurnWithin(10).evaluate(run).context["seconds"]
    assert 0.19 <= slowest < result.context["seconds"]


async def test_time_until_the_first_tool_call() -> None:
    run, turns = await conversation("wait 0.01", "think 0.3 lookup")
    late = FirstToolCallWithin(0.1).evaluate(run)
    assert not late.passed and late.context["turn"] == 2 and late.context["tool"] == "lookup"
    assert late.context["seconds"] >= 0.29
    assert FirstToolCallWithin(10).evaluate(run).passed
    quick, _ = await conversation("think 0.01 lookup")
    assert FirstToolCallWithin(2).evaluate(quick).passed
    none = FirstToolCallWithin(10).evaluate(turns[0])
    assert not none.passed and none.evaluated and none.message == "no tool was called"
    assert not FirstToolCallWithin(10, turn=1).evaluate(run).passed


def test_budgets_are_positive_and_missing_timestamps_are_not_evaluable() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        TurnWithin(0)
    bare = AgentRun(turns=1, steps=[])
    assert TrialWithin(1).evaluate(bare).evaluated is False
    assert TurnWithin(1).evaluate(bare).evaluated is False


async def test_latency_gates_and_scores_through_the_context() -> None:
    @eval_case
    async def slow(ctx: EvalContext) -> None:
        await ctx.send("think 0.3 lookup")
        ctx.turn_within(10)
        ctx.trial_within(10)
        ctx.first_tool_call_within(0.2).at_least(0.1)  # over budget, partial credit
        ctx.turn_within(0.1).soft()  # reported, not gating

    @eval_case
    async def gated(ctx: EvalContext) -> None:
        await ctx.send("wait 0.3")
        ctx.turn_within(0.1)

    async with LocalTarget(agent) as target:
        passed = await run_trial(cases_from(slow)[0], target)
        failed = await run_trial(cases_from(gated)[0], target)
    assert passed.verdict == Verdict.SCORED, passed.assertions  # only a soft one failed
    names = [a.name for a in passed.assertions]
    assert names[:3] == ["turn_within(10s)", "trial_within(10s)", "first_tool_call_within(0.2s)"]
    assert passed.assertions[2].passed and 0.1 <= passed.assertions[2].score < 1.0
    assert not passed.assertions[3].passed
    assert failed.verdict == Verdict.FAILED
