"""A classifier judge's answer distribution scripted offline with the fake judge, and the
judge record keeping the classifier's question and reference (issue 40 item 10).

The seed's own example: ``FakeClassifier([['judgment' => [0.0, 0.5, 0.5]]])`` on a
three-level score with threshold 0.75 scores 0.75 and passes.
"""

from __future__ import annotations

from typing import Any

import pytest
from card_agent import card_agent
from evalport.client import Case, LocalTarget, Verdict, run_trial
from evalport.client.judges import ClassifierJudge, FakeJudge, JudgeError, criteria


async def trial(func: Any, judge: Any):
    async with LocalTarget(card_agent) as target:
        return await run_trial(Case(id="c", func=func), target, judge=judge)


async def test_a_scripted_distribution_scores_as_the_expected_level() -> None:
    judge = FakeJudge([[0.0, 0.5, 0.5]])

    async def case(ctx: Any) -> None:
        await ctx.send("pay please")
        ctx.check(
            ClassifierJudge(
                "How complete is actual?",
                ["None.", "Partial.", "Full."],
                reference="the card is charged",
                threshold=0.75,
            )
        ).gate()

    result = await trial(case, judge)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)
    (check,) = result.assertions
    assert check.score == pytest.approx(0.75)
    assert check.context["details"]["probabilities"] == [0.0, 0.5, 0.5]
    assert judge.calls == 1
    (record,) = result.judges
    assert record.question == "How complete is actual?"
    assert record.reference == "the card is charged"
    assert record.levels == ["None.", "Partial.", "Full."]
    assert record.probabilities == [0.0, 0.5, 0.5]


async def test_a_boolean_distribution_is_the_probability_of_yes() -> None:
    verdict = await FakeJudge([[0.2, 0.8]]).judge(_request(criteria.classify("Relevant?")))
    assert verdict.score == pytest.approx(0.8) and verdict.details["level"] == "yes"


async def test_a_distribution_that_does_not_fit_the_levels_is_a_judge_error() -> None:
    with pytest.raises(JudgeError, match="3 levels"):
        await FakeJudge([[0.5, 0.5]]).judge(_request(criteria.classify("q", ["a", "b", "c"])))
    with pytest.raises(JudgeError, match="classifier"):
        await FakeJudge([[0.5, 0.5]]).judge(_request(criteria.closed_qa("q")))


def _request(criterion: Any) -> Any:
    from evalport.client.judges import JudgeRequest

    return JudgeRequest(criterion=criterion, output="Some output")
