"""A turn the agent failed fails the trial, unless the case says it expects a failure
(``ctx.failed()``): a run of negative or soft checks is never green over a broken agent."""

from __future__ import annotations

import pytest
from evalport.client import EvalContext, Verdict, cases_from, eval_case, run_trial
from fake_target import FakeTarget


async def broken(message: str) -> str:
    raise ValueError("the model client is misconfigured")


@pytest.fixture
async def target():
    fake = FakeTarget(broken)
    yield fake
    await fake.aclose()


async def test_negative_checks_over_a_failing_agent_fail_the_trial_naming_the_error(
    target,
) -> None:
    @eval_case(id="negative")
    async def negative(ctx: EvalContext) -> None:
        await ctx.send("refund my order")
        ctx.not_called_tool("refund")
        ctx.event_not_seen("escalated").soft()

    result = await run_trial(cases_from(negative)[0], target)
    assert result.verdict == Verdict.FAILED, result.assertions
    failed = [a for a in result.assertions if not a.passed]
    assert [a.name for a in failed] == ["turn_failed"]
    assert "turn 1" in failed[0].message and "ValueError" in failed[0].message


async def test_a_case_that_expects_the_failure_says_so_with_ctx_failed(target) -> None:
    @eval_case(id="expected")
    async def expected(ctx: EvalContext) -> None:
        await ctx.send("do something forbidden")
        ctx.failed()

    result = await run_trial(cases_from(expected)[0], target)
    assert result.verdict == Verdict.PASSED, result.assertions
    assert [a.name for a in result.assertions] == ["failed"]


async def test_a_case_asserting_nothing_over_a_failing_agent_stays_asserted_nothing(
    target,
) -> None:
    @eval_case(id="vacuous")
    async def vacuous(ctx: EvalContext) -> None:
        await ctx.send("hello")

    result = await run_trial(cases_from(vacuous)[0], target)
    assert result.verdict == Verdict.ERROR
    assert result.error_type == "AssertedNothing"


async def test_a_failed_check_of_the_outcome_says_it_once(target) -> None:
    @eval_case(id="succeeds")
    async def succeeds(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.succeeded()

    result = await run_trial(cases_from(succeeds)[0], target)
    assert result.verdict == Verdict.FAILED
    assert [a.name for a in result.assertions] == ["succeeded"]  # no second turn_failed
    assert "ValueError" in result.assertions[0].message
