"""Judges as objects passed to ``ctx.check`` (issue 19, item 2) and a trajectory for every
criterion (item 3), in real trials on a local agent under the trace policy."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest
from card_agent import CARD, card_agent
from evalport.client import (
    Case,
    Evaluator,
    LocalTarget,
    TrialResult,
    Verdict,
    evaluator_cases,
    run_trial,
)
from evalport.client.assertions import neuron
from evalport.client.judges import (
    ClassifierJudge,
    ClosedQA,
    Correctness,
    Custom,
    Factuality,
    Faithfulness,
    FakeJudge,
    Helpfulness,
    JudgeCheck,
    OpenAIJudge,
    Relevance,
    SqlEquivalent,
    Summarizes,
    TaskCompletion,
    criteria,
)
from evalport.protocol import TracePolicy


async def trial(
    func: Callable[[Any], Any], judge: Any, policy: TracePolicy | None = None
) -> TrialResult:
    async with LocalTarget(card_agent, policy=policy) as target:
        return await run_trial(Case(id="c", func=func), target, judge=judge)


# -- item 2: objects --------------------------------------------------------------------

# Neuron's evaluator classes, each with the ctx.judge() criterion it stands for
NEURON = [
    (
        neuron.AgentJudge("Is it polite?", reference="r"),
        criteria.custom("Is it polite?", reference="r"),
    ),
    (neuron.ClassifierJudge("Polite?"), criteria.classify("Polite?")),
    (neuron.CorrectnessJudge("paid 20"), criteria.correctness("paid 20")),
    (neuron.FaithfulnessJudge("card on file"), criteria.faithfulness("card on file")),
    (neuron.HelpfulnessJudge(), criteria.helpfulness()),
    (neuron.RelevanceJudge("pay?"), criteria.relevance("pay?")),
    (neuron.TaskCompletionJudge("pay"), criteria.task_completion("pay")),
]


@pytest.mark.parametrize(("made", "criterion"), NEURON, ids=lambda v: type(v).__name__)
async def test_each_neuron_judge_is_the_chain_criterion(made: JudgeCheck, criterion: Any) -> None:
    judge = FakeJudge(default=0.9)

    async def case(ctx: Any) -> None:
        await ctx.send("pay please")
        ctx.check(made)

    result = await trial(case, judge)
    assert result.verdict == Verdict.PASSED, result.error
    assert judge.requests[0].criterion == criterion


def test_every_neuron_judge_name_is_an_object() -> None:
    names = [name for name in neuron.__all__ if name.endswith("Judge")]
    assert len(names) == len(NEURON)
    assert all(issubclass(getattr(neuron, name), JudgeCheck) for name in names)


async def test_an_object_and_the_chain_give_the_same_result() -> None:
    async def case(ctx: Any) -> None:
        await ctx.send("pay please")
        ctx.check(Correctness("paid 20", threshold=0.8)).label("same")
        ctx.judge().correctness("paid 20").at_least(0.8).label("same")

    result = await trial(case, FakeJudge(default=0.75))
    by_object, by_chain = result.assertions
    line = inspect.getsourcelines(case)[1] + 2  # the ctx.check line
    where = {"location": f"tests/client/judges/test_judge_objects.py:{line}"}
    assert msgspec_dict(by_object) == {**msgspec_dict(by_chain), **where}
    assert not by_object.passed and by_object.severity == "soft" and by_object.threshold == 0.8
    assert result.verdict == Verdict.SCORED  # soft by default, as the chain


def msgspec_dict(value: Any) -> dict[str, Any]:
    return msgspec.to_builtins(value)  # type: ignore[no-any-return]


async def test_gate_and_could_not_run_follow_the_chain_rules() -> None:
    async def gated(ctx: Any) -> None:
        await ctx.send("pay please")
        ctx.check(Helpfulness(threshold=0.9)).gate()

    assert (await trial(gated, FakeJudge(default=0.5))).verdict == Verdict.FAILED
    unjudged = await trial(gated, None)  # no judge anywhere: an error, never a pass
    assert unjudged.verdict == Verdict.ERROR
    assert unjudged.assertions[0].message.startswith("judge could not run: no judge configured")


async def test_the_object_judge_wins_and_subjects_choose_what_is_judged() -> None:
    own, suite = FakeJudge(default=1.0), FakeJudge(default=0.0)

    async def case(ctx: Any) -> None:
        first = await ctx.send("hello")
        await ctx.send("pay please")
        ctx.check(ClosedQA("Is it a greeting?", judge=own), first)
        ctx.check(Factuality("a greeting", judge=own), "Hi there")
        ctx.check(Summarizes("src", judge=own), ctx.trajectory())
        ctx.check(SqlEquivalent("select 1", judge=own), ctx.run)

    result = await trial(case, suite)
    assert result.verdict == Verdict.PASSED and suite.calls == 0
    turn, text, whole, run = own.requests
    assert (turn.output, turn.input, turn.transcript) == ("Hello!", "hello", None)
    assert text.output == "Hi there" and text.transcript is None
    for request in (whole, run):
        assert request.criterion.scope == "trajectory"
        assert "TOOL CALL charge(" in (request.transcript or "")
        assert "USER: hello" in (request.transcript or "")


async def test_a_subject_of_another_type_is_a_clear_error() -> None:
    async def case(ctx: Any) -> None:
        await ctx.send("hello")
        ctx.check(Correctness("x"), 42)

    result = await trial(case, FakeJudge(default=1.0))
    assert result.verdict == Verdict.ERROR and "a judge checks a str, a Turn" in (
        result.error or ""
    )


def test_objects_validate_like_the_criteria() -> None:
    with pytest.raises(ValueError, match="non-empty context"):
        Faithfulness("")
    with pytest.raises(ValueError, match="threshold"):
        Relevance(threshold=1.5)
    with pytest.raises(ValueError, match="2 to 10 levels"):
        ClassifierJudge("q", ["only"])
    made = Custom("Rate it", examples=[{"output": "x", "score": 1.0}], threshold=0.6)
    assert made.threshold == 0.6 and made.criterion.examples[0].output == "x"
    assert TaskCompletion("pay").criterion.scope == "trajectory"


# -- item 3: every criterion accepts a trajectory ----------------------------------------

BUILDERS: dict[str, Callable[..., Any]] = {
    "closed_qa": lambda t: t.closed_qa("Was the payment made?", trajectory=True),
    "factuality": lambda t: t.factuality("20 was paid", trajectory=True),
    "summarizes": lambda t: t.summarizes("the payment", trajectory=True),
    "sql": lambda t: t.sql("select 1", trajectory=True),
    "faithfulness": lambda t: t.faithfulness("the card on file", trajectory=True),
    "correctness": lambda t: t.correctness("paid 20", trajectory=True),
    "relevance": lambda t: t.relevance(trajectory=True),
    "helpfulness": lambda t: t.helpfulness(trajectory=True),
    "task_completion": lambda t: t.task_completion("pay"),
    "custom": lambda t: t.custom("Is it right?", trajectory=True),
    "classify": lambda t: t.classify("Is it right?", trajectory=True),
}


def test_every_builtin_criterion_has_a_trajectory_case() -> None:
    assert set(BUILDERS) == set(criteria.BUILTIN)


def chat_server(bodies: list[dict[str, Any]]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        content = (
            "1"
            if "single digit" in body["messages"][0]["content"]
            else json.dumps({"reason": "ok", "evidence": [], "score": 1.0})
        )
        completion = {
            "choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        }
        return httpx.Response(200, json=completion)

    return httpx.MockTransport(answer)


@pytest.mark.parametrize("name", list(BUILDERS))
async def test_every_criterion_reads_the_trajectory_and_never_a_digested_argument(
    name: str,
) -> None:
    async def case(ctx: Any) -> None:
        await ctx.send("pay now")
        BUILDERS[name](ctx.judge())

    for safe, policy in ((True, TracePolicy.safe()), (False, TracePolicy.verbatim())):
        bodies: list[dict[str, Any]] = []
        judge = OpenAIJudge("m", api_key_env=None, transport=chat_server(bodies))
        result = await trial(case, judge, policy)
        await judge.aclose()
        assert result.verdict == Verdict.PASSED, result.assertions
        (body,) = bodies
        text = "\n".join(message["content"] for message in body["messages"])
        assert "TOOL CALL charge(" in text  # the judge sees the tool call
        if safe:
            assert CARD not in text and "<redacted <string:" in text
        else:
            assert CARD in text  # the same prompt under verbatim shows it: the test can fail


class PaymentEvaluator(Evaluator):
    """A Neuron-style evaluator using Neuron's judge names on a trajectory and a text."""

    def dataset(self) -> list[dict[str, Any]]:
        return [{"message": "pay for it", "expected": "paid 20"}]

    async def run(self, item: Any) -> Any:
        await self.ctx.send(item["message"])
        return self.ctx.trajectory()

    def evaluate(self, output: Any, item: Any) -> None:
        self.check(neuron.CorrectnessJudge(item["expected"], threshold=0.8), output.final_answer)
        self.check(neuron.TaskCompletionJudge("pay"), output)


async def test_an_evaluator_checks_neuron_judges_on_its_output() -> None:
    judge = FakeJudge([0.9, 0.6])
    (case,) = evaluator_cases(PaymentEvaluator)
    async with LocalTarget(card_agent) as target:
        result = await run_trial(case, target, judge=judge)
    assert result.verdict == Verdict.SCORED  # task completion 0.6 < 0.7, soft
    text, whole = judge.requests
    assert text.output == "Paid 20 with the card on file." and text.transcript is None
    assert "TOOL CALL charge(" in (whole.transcript or "")
    assert [a.threshold for a in result.assertions] == [0.8, 0.7]


async def test_a_sync_case_checks_judge_objects_too() -> None:
    def case(ctx: Any) -> None:
        ctx.send("pay please")
        ctx.check(Correctness("paid 20", threshold=0.95)).gate()

    result = await trial(case, FakeJudge(default=0.9))
    assert result.verdict == Verdict.FAILED, result.error
    assert result.assertions[0].threshold == 0.95


def test_agent_judge_is_a_deprecated_name_of_custom() -> None:
    import evalport.client.judges as judges

    with pytest.warns(DeprecationWarning, match="use Custom"):
        old = judges.AgentJudge
    assert old is Custom is neuron.AgentJudge
    with pytest.raises(AttributeError):
        _ = judges.NoSuchJudge
