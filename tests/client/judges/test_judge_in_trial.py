"""Judges and simulated users through the real eval context and ``run_trial``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalport.client import Case, ScriptedUser, TargetIdentity, Turn, Verdict, run_trial
from evalport.client.judges import FakeJudge
from evalport.protocol import AgentRun, Approval, ApprovalDecision, Step, ToolExecution, Usage


class EchoSession:
    """Answers 'you said: <message>'; 'refund' meets a rejected approval."""

    def __init__(self) -> None:
        self._run = AgentRun(session_id="s1")

    @property
    def id(self) -> str:
        return "s1"

    @property
    def run(self) -> AgentRun:
        return self._run

    async def send(self, message: str) -> Turn:
        number = self._run.turns + 1
        steps = list(self._run.steps)
        step = Step(turn=number, usage=Usage(input=30, output=5))
        if message.startswith("refund"):
            step = Step(
                turn=number,
                type="tool_execution",
                usage=Usage(input=30, output=5),
                tool_executions=[
                    ToolExecution(
                        name="refund",
                        arguments={"order": "A1"},
                        approval=Approval(state="rejected", reason="needs a manager"),
                    )
                ],
            )
        steps.append(step)
        self._run = AgentRun(
            reply=f"you said: {message}",
            status="completed",
            turns=number,
            steps=steps,
            user_messages=[*self._run.user_messages, message],
            session_id="s1",
        )
        self._run.sync_usage()
        return Turn(index=number, message=message, run=self._run, steps=[step])

    async def decide(self, decisions: Mapping[str, ApprovalDecision]) -> Turn:
        raise AssertionError("no approvals are pending in these tests")

    async def refresh(self) -> AgentRun:
        return self._run

    async def close(self) -> None:
        return None


class EchoTarget:
    @property
    def identity(self) -> TargetIdentity:
        return TargetIdentity(kind="local", location="tests:echo")

    async def open(self, **_: Any) -> EchoSession:
        return EchoSession()

    async def attach(self, session_id: str) -> EchoSession:
        raise LookupError(session_id)

    async def aclose(self) -> None:
        return None


async def _case(t: Any) -> None:
    await t.send("refund order A1")
    t.judge().task_completion("get order A1 refunded").at_least(0.5)
    await t.simulate(ScriptedUser(["any news?", "thanks"], max_turns=5))
    t.judge().closed_qa("Is the last reply polite?").label("polite")


async def test_judged_trial_records_judges_apart() -> None:
    judge = FakeJudge([0.9, 0.4], tokens=(120, 8))
    result = await run_trial(Case(id="refund", func=_case), EchoTarget(), judge=judge)
    assert result.verdict == Verdict.SCORED  # the soft 'polite' judge scored 0.4
    task, polite = result.assertions
    assert task.passed and task.name == "judge.task_completion"
    assert not polite.passed and polite.label == "polite" and polite.severity == "soft"
    # what each judge saw was captured when it was written
    first, second = judge.requests
    assert "approval rejected: needs a manager" in (first.transcript or "")
    assert "any news?" not in (first.transcript or "")
    assert (second.output, second.input) == ("you said: thanks", "thanks")
    # judge tokens stay out of the run's usage
    assert [(r.criterion, r.input_tokens) for r in result.judges] == [
        ("task_completion", 120),
        ("closed_qa", 120),
    ]
    assert result.run["usage"]["input"] == 90


async def test_no_judge_never_passes_and_is_an_error_strict_or_not() -> None:
    relaxed = await run_trial(Case(id="c", func=_case), EchoTarget(), judge=None)
    assert relaxed.verdict == Verdict.ERROR
    assert all(not a.evaluated and "no judge configured" in a.message for a in relaxed.assertions)
    strict = await run_trial(Case(id="c", func=_case), EchoTarget(), judge=None, strict=True)
    assert strict.verdict == Verdict.ERROR


async def test_case_judge_wins_over_the_suite_judge() -> None:
    suite, own = FakeJudge(default=0.0), FakeJudge(default=1.0)
    result = await run_trial(Case(id="c", func=_case, judge=own), EchoTarget(), judge=suite)
    assert result.verdict == Verdict.PASSED and suite.calls == 0 and own.calls == 2
