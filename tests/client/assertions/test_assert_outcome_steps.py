"""Outcome, step and token assertions."""

from __future__ import annotations

import pytest
from evalport.client.assertions import (
    AssertionTypeError,
    Failed,
    MaxSteps,
    StepCount,
    Stopped,
    StopReasonIs,
    Succeeded,
    TokensAtMost,
    TotalTokensAtMost,
    at_least,
    between,
)
from evalport.protocol import AgentRun, Usage
from runbuild import both, call, make_run


@pytest.mark.parametrize("run", both(make_run([call("a")])), ids=["verbatim", "redacted"])
def test_status_assertions(run: AgentRun) -> None:
    assert Succeeded().evaluate(run).passed
    stopped = Stopped().evaluate(run)
    assert not stopped.passed and "status is 'completed', expected 'stopped'" in stopped.message
    assert not Failed().evaluate(run).passed


def test_failed_and_stopped_runs() -> None:
    failed = make_run(status="failed", stop="error")
    failed.errors = "RuntimeError: boom"
    assert Failed().evaluate(failed).passed
    message = Succeeded().evaluate(failed).message
    assert "expected 'completed'" in message and "boom" in message
    assert Stopped().evaluate(make_run(status="stopped", stop="steps_limit")).passed


def test_stop_reason() -> None:
    run = make_run(stop="steps_limit")
    assert StopReasonIs("steps_limit").evaluate(run).passed
    assert StopReasonIs("completed", "steps_limit").evaluate(run).passed
    result = StopReasonIs("completed").evaluate(run)
    assert not result.passed and "'steps_limit'" in result.message
    assert not StopReasonIs("completed").evaluate(make_run(stop=None)).passed
    with pytest.raises(ValueError):
        StopReasonIs()


def test_step_count_and_max_steps() -> None:
    run = make_run([call("a"), call("b")])  # two tool steps and a final one
    assert StepCount(3).evaluate(run).passed
    assert not StepCount(2).evaluate(run).passed
    assert StepCount(at_least(2)).evaluate(run).passed
    assert StepCount(between(1, 2)).evaluate(run).passed is False
    assert MaxSteps(3).evaluate(run).passed
    over = MaxSteps(2).evaluate(run)
    assert not over.passed and over.score == pytest.approx(2 / 3)
    assert "3 steps exceed the limit of 2" in over.message


def test_token_budgets_sum_every_kind_over_steps() -> None:
    usage = Usage(input=100, output=20, cache_write=5, cache_read=10, reasoning=15)
    run = make_run([call("a")], usage=usage)  # two steps
    assert TotalTokensAtMost(300).evaluate(run).passed
    over = TotalTokensAtMost(150).evaluate(run)
    assert not over.passed and over.context["tokens"] == 300 and over.score == 0.5
    assert TokensAtMost("output", 40).evaluate(run).passed
    assert not TokensAtMost("reasoning", 29).evaluate(run).passed
    assert TokensAtMost("cache_read", 20).evaluate(run).passed
    with pytest.raises(ValueError, match="unknown token kind"):
        TokensAtMost("prompt", 1)


def test_token_budget_falls_back_to_run_usage_without_steps() -> None:
    run = AgentRun(reply="x", status="completed", usage=Usage(input=7, output=3))
    assert TotalTokensAtMost(10).evaluate(run).passed
    assert not TotalTokensAtMost(9).evaluate(run).passed


def test_wrong_subject() -> None:
    with pytest.raises(AssertionTypeError):
        MaxSteps(1).evaluate(["step"])
