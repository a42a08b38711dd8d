"""Judge expectations in a case: lazy, once, snapshot, verdict rules, strict mode."""

from __future__ import annotations

import pytest
from evalport.client import Expectation, Verdict
from evalport.client._core._results import trial_verdict
from evalport.client.judges import (
    FakeJudge,
    JudgeAssertions,
    JudgeError,
    JudgeUsage,
    JudgeVerdict,
)
from evalport.protocol import AgentRun, Approval, Step, ToolExecution, digest
from judge_host import Host


def _run(reply: str, *messages: str) -> AgentRun:
    return AgentRun(reply=reply, user_messages=list(messages), turns=len(messages))


async def test_lazy_and_at_most_once() -> None:
    judge = FakeJudge([0.9])
    host = Host(judge)
    host.add_turn("What is 2+2?", _run("4", "What is 2+2?"))
    expectation = JudgeAssertions(host).closed_qa("Is the answer 4?").at_least(0.75)
    assert isinstance(expectation, Expectation)
    assert host.registered == [expectation]
    assert judge.calls == 0 and expectation.result is None
    first = await expectation.resolve()
    second = await expectation.resolve()
    assert first is second and judge.calls == 1
    assert first.passed and first.evaluated and first.severity == "soft"
    assert first.name == "judge.closed_qa" and first.threshold == 0.75
    assert first.message.startswith("score 0.90 >= 0.75")
    request = judge.requests[0]
    assert (request.output, request.input) == ("4", "What is 2+2?")


async def test_unused_chain_spends_nothing() -> None:
    judge = FakeJudge()
    host = Host(judge)
    JudgeAssertions(host).helpfulness()
    assert judge.calls == 0  # nothing read it, nothing was asked


async def test_captures_what_to_judge_when_made() -> None:
    judge = FakeJudge(default=1.0)
    host = Host(judge)
    host.add_turn("hi", _run("first reply", "hi"))
    early = JudgeAssertions(host).helpfulness()
    host.add_turn("more", _run("second reply", "hi", "more"))
    late = JudgeAssertions(host).helpfulness()
    await early.resolve()
    await late.resolve()
    assert [r.output for r in judge.requests] == ["first reply", "second reply"]
    assert [r.input for r in judge.requests] == ["hi", "more"]


async def test_on_judges_another_text_or_turn() -> None:
    judge = FakeJudge(default=0.5)
    host = Host(judge)
    turn = host.add_turn("q1", _run("a1", "q1"))
    host.add_turn("q2", _run("a2", "q1", "q2"))
    expectation = JudgeAssertions(host).relevance().on("some summary")
    await expectation.resolve()
    await JudgeAssertions(host).relevance().on(turn).resolve()
    assert judge.requests[0].output == "some summary"
    assert (judge.requests[1].output, judge.requests[1].input) == ("a1", "q1")
    with pytest.raises(RuntimeError, match="already"):
        expectation.on("late")
    with pytest.raises(TypeError):
        JudgeAssertions(host).relevance().on(3)  # type: ignore[arg-type]


async def test_threshold_severity_and_label_regrade_after_resolution() -> None:
    host = Host(FakeJudge([0.6]))
    expectation = JudgeAssertions(host).helpfulness()
    result = await expectation.resolve()
    assert not result.passed and result.threshold == 0.7
    assert trial_verdict([result]) == Verdict.SCORED
    expectation.at_least(0.5).label("helpful")
    assert result.passed and result.label == "helpful"
    expectation.at_least(0.9).gate()
    assert not result.passed and trial_verdict([result]) == Verdict.FAILED
    with pytest.raises(ValueError):
        expectation.at_least(1.5)


async def test_no_judge_is_not_a_pass() -> None:
    host = Host(None)
    result = await JudgeAssertions(host).closed_qa("ok?").resolve()
    assert not result.evaluated and not result.passed
    assert result.message.startswith("judge could not run: no judge configured")
    assert "no judge configured" in result.context["judge_error"]
    assert result.severity == "soft"
    assert trial_verdict([result]) == Verdict.ERROR  # never "passed", never hidden


async def test_no_judge_under_strict_is_an_error_too() -> None:
    host = Host(None, strict=True)
    result = await JudgeAssertions(host).closed_qa("ok?").soft().resolve()
    assert result.severity == "gate" and not result.passed
    assert trial_verdict([result]) == Verdict.ERROR


async def test_judge_error_is_reported_not_passed() -> None:
    judge = FakeJudge([JudgeError("server answered 503")])
    host = Host(judge)
    result = await JudgeAssertions(host).helpfulness().at_least(0.0).resolve()
    assert not result.evaluated and not result.passed  # even with threshold 0
    assert "server answered 503" in result.context["judge_error"]
    assert host.judge_records[0].error is not None and host.judge_records[0].score is None


async def test_fake_judge_never_passes_when_out_of_script() -> None:
    host = Host(FakeJudge())
    result = await JudgeAssertions(host).helpfulness().resolve()
    assert not result.evaluated and "no scripted answer" in result.message


async def test_explicit_judge_wins_over_case_judge() -> None:
    case_judge, chosen = FakeJudge(default=0.0), FakeJudge(default=1.0)
    host = Host(case_judge)
    result = await JudgeAssertions(host, chosen).helpfulness().resolve()
    assert result.passed and chosen.calls == 1 and case_judge.calls == 0


async def test_judge_tokens_are_recorded_apart() -> None:
    verdict = JudgeVerdict(
        score=0.8, reason="r", usage=JudgeUsage(input_tokens=100, output_tokens=9), model="jm"
    )
    host = Host(FakeJudge([verdict]))
    host.add_turn("q", _run("a", "q"))
    await JudgeAssertions(host).correctness("a").resolve()
    (record,) = host.judge_records
    assert (record.criterion, record.score, record.model) == ("correctness", 0.8, "jm")
    assert (record.input_tokens, record.output_tokens) == (100, 9)
    assert host.run.usage.total == 0  # the target's usage is untouched


@pytest.mark.parametrize(
    ("scores", "mode", "expected", "passed"),
    [
        ([0.9, 0.3, 0.9], "mean", 0.7, True),
        ([1.0, 0.0, 0.0], "mean", 1 / 3, False),
        ([1.0, 1.0, 0.0], "majority", 1.0, True),
        ([1.0, 0.0, 0.0], "majority", 0.0, False),
        ([1.0, 1.0, 0.0, 0.0], "majority", 0.0, False),  # a tie is not a majority
    ],
)
async def test_samples(scores: list[float], mode: str, expected: float, passed: bool) -> None:
    judge = FakeJudge(scores)
    host = Host(judge)
    expectation = JudgeAssertions(host).helpfulness().samples(len(scores), mode)  # type: ignore[arg-type]
    result = await expectation.resolve()
    assert result.score == pytest.approx(expected) and result.passed is passed
    assert sorted(r.sample for r in judge.requests) == list(range(len(scores)))
    assert len(host.judge_records) == len(scores)
    with pytest.raises(ValueError):
        JudgeAssertions(host).helpfulness().samples(0)


async def test_one_failed_sample_means_not_evaluated() -> None:
    host = Host(FakeJudge([1.0, JudgeError("boom"), 1.0]))
    result = await JudgeAssertions(host).helpfulness().samples(3).resolve()
    assert not result.evaluated and not result.passed


async def test_task_completion_reads_the_trajectory_with_rejection_and_digests() -> None:
    judge = FakeJudge(default=1.0)
    host = Host(judge)
    step = Step(
        turn=1,
        type="tool_execution",
        tool_executions=[
            ToolExecution(
                name="refund",
                arguments={"order_id": digest("A1")},
                approval=Approval(state="rejected", reason="over the limit"),
            )
        ],
    )
    run = AgentRun(
        reply="I could not refund it; a manager must approve.",
        user_messages=["refund A1"],
        turns=1,
        steps=[step],
        status="completed",
    )
    host.add_turn("refund A1", run)
    expectation = JudgeAssertions(host).task_completion("get order A1 refunded")
    await expectation.resolve()
    request = judge.requests[0]
    transcript = request.transcript or ""
    assert "USER: refund A1" in transcript
    assert "TOOL CALL refund({order_id: <redacted <string:" in transcript
    assert "<redacted <string:2> #" in transcript
    assert "approval rejected: over the limit" in transcript
    assert "ASSISTANT: I could not refund it" in transcript
    assert "not count the rejection against the assistant" in request.criterion.instructions
    assert request.reference == "get order A1 refunded"


def test_custom_and_classify_methods_build_their_criteria() -> None:
    host = Host(FakeJudge())
    custom = JudgeAssertions(host).custom(
        "Is it polite?", examples=[{"output": "Thanks!", "score": 1.0}], name="polite"
    )
    assert custom.criterion.name == "polite" and custom.criterion.examples[0].score == 1.0
    graded = JudgeAssertions(host).classify("How correct?", ["no", "partly", "yes"])
    assert graded.criterion.levels == ("no", "partly", "yes")
    for build in (
        lambda t: t.factuality("ref"),
        lambda t: t.summarizes("source"),
        lambda t: t.sql("select 1"),
        lambda t: t.faithfulness("ctx"),
    ):
        assert build(JudgeAssertions(host)).criterion.reference is not None
    assert len(host.registered) == 6


def test_customs_old_keyword_still_works_for_a_release_and_says_so() -> None:
    host = Host(FakeJudge())
    with pytest.warns(DeprecationWarning, match=r"custom\(criteria_text=\.\.\.\).*criteria="):
        old = JudgeAssertions(host).custom(criteria_text="Is it polite?")  # type: ignore[call-arg]
    new = JudgeAssertions(host).custom(criteria="Is it polite?")
    assert old.criterion.instructions == new.criterion.instructions
