"""The eval context through run_trial, on the real agent runtime behind a tiny target."""

from __future__ import annotations

import pytest
from evalport.client import Case, EvalContext, Verdict, cases_from, eval_case, run_trial
from evalport.client.assertions import CalledTool
from fake_target import FakeTarget, shop_agent


def case_of(func, **options) -> Case:
    return cases_from(eval_case(**options)(func))[0]


@pytest.fixture
async def target():
    fake = FakeTarget(shop_agent)
    yield fake
    await fake.aclose()


async def test_send_accumulates_and_assertions_read_the_run_so_far(target) -> None:
    seen: dict[str, object] = {}

    async def two_turns(ctx: EvalContext) -> None:
        await ctx.send("hello")
        seen["after_one"] = ctx.contains("Hello").passed
        ctx.not_called_tool("lookup")  # true after turn one, evaluated now
        turn = await ctx.send("refund A1 40")
        seen["turn"] = (turn.index, turn.reply, len(ctx.turns), ctx.run.turns)
        ctx.called_tool("lookup", {"order_id": "A1"})
        ctx.called_tool("refund", {"order_id": "A1", "amount": 40}, result="refunded 40 on A1")
        ctx.event_seen("greeted")
        ctx.succeeded()
        ctx.step_count(3)  # a greeting, a tool step and the final answer
        ctx.total_tokens_at_most(120)

    result = await run_trial(case_of(two_turns), target)
    assert result.verdict == Verdict.PASSED, result.assertions
    assert seen["after_one"] is True
    assert seen["turn"] == (2, "refunded 40 on A1", 2, 2)
    assert [a.name for a in result.assertions][1:3] == [
        "not_called_tool(lookup)",
        'called_tool(lookup, args ⊆ {order_id="A1"})',
    ]
    assert result.session_id == "s1"
    assert result.run["turns"] == 2 and result.run["userMessages"] == ["hello", "refund A1 40"]
    assert target.log[-1] == "close s1"


async def test_failed_gate_soft_and_thresholds(target) -> None:
    async def graded(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.contains("Goodbye").soft()
        ctx.contains_all(["Hello", "help", "refund", "order"]).at_least(0.5).label("half the words")

    result = await run_trial(case_of(graded), target)
    assert result.verdict == Verdict.SCORED
    soft, partial = result.assertions
    assert soft.severity == "soft" and not soft.passed
    assert partial.passed and partial.label == "half the words" and partial.threshold == 0.5

    async def gated(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.contains("Goodbye")

    assert (await run_trial(case_of(gated), target)).verdict == Verdict.FAILED


async def test_redacted_runs_still_match_arguments_but_predicates_are_not_evaluable(target) -> None:
    async def predicate(ctx: EvalContext) -> None:
        await ctx.send("refund A1 40")
        ctx.called_tool("refund", {"amount": 40})
        ctx.called_tool("refund", lambda args: args["amount"] < 100)

    result = await run_trial(case_of(predicate), target)
    by_digest, by_predicate = result.assertions
    assert by_digest.passed
    assert not by_predicate.evaluated and "verbatim" in by_predicate.message
    assert result.verdict == Verdict.FAILED  # not evaluable never counts as passed


async def test_log_skip_and_require(target) -> None:
    async def skipping(ctx: EvalContext) -> None:
        ctx.log("about to skip")
        ctx.skip("no staging data today")

    skipped = await run_trial(case_of(skipping), target)
    assert skipped.verdict == Verdict.SKIPPED
    assert skipped.skip_reason == "no staging data today" and skipped.logs == ["about to skip"]

    reached: list[str] = []

    async def requiring(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.require(ctx.contains("Hello").soft())
        reached.append("first")
        ctx.require(ctx.called_tool("refund"), "the agent must refund")
        reached.append("second")

    failed = await run_trial(case_of(requiring), target)
    assert reached == ["first"]
    assert failed.verdict == Verdict.FAILED and failed.error is None
    assert failed.assertions[0].severity == "gate"  # require() made it a gate

    async def requiring_truth(ctx: EvalContext) -> None:
        ctx.require(1 + 1 == 3, "arithmetic is broken")

    truth = await run_trial(case_of(requiring_truth), target)
    assert truth.verdict == Verdict.FAILED
    assert truth.assertions[0].message == "arithmetic is broken"


async def test_skip_after_a_failed_gate_is_still_failed(target) -> None:
    async def case(ctx: EvalContext) -> None:
        await ctx.send("refund A1 40")
        ctx.used_no_tools()
        ctx.skip("too late")

    assert (await run_trial(case_of(case), target)).verdict == Verdict.FAILED


async def test_exceptions_are_case_errors_with_type_and_message(target) -> None:
    async def broken(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.check(CalledTool("x"), subject="a reply, not a run")

    result = await run_trial(case_of(broken), target)
    assert result.verdict == Verdict.ERROR
    assert result.error_type == "AssertionTypeError"
    assert "called_tool evaluates an AgentRun" in (result.error or "")
    assert target.log[-1].startswith("close")


async def test_an_agent_crash_is_agent_behaviour_not_a_case_error(target) -> None:
    async def crash(ctx: EvalContext) -> None:
        await ctx.send("boom")
        ctx.failed()

    result = await run_trial(case_of(crash), target)
    assert result.verdict == Verdict.PASSED


async def test_stop_reason_through_the_context(target) -> None:
    async def stops(ctx: EvalContext) -> None:
        await ctx.send("stop")
        ctx.stopped()
        ctx.stop_reason("steps_limit")

    assert (await run_trial(case_of(stops), target)).verdict == Verdict.PASSED


async def test_timeout_is_an_error(target) -> None:
    async def slow(ctx: EvalContext) -> None:
        await ctx.send("slow")

    result = await run_trial(case_of(slow, timeout=0.2), target)
    assert result.verdict == Verdict.ERROR and result.error_type == "TimeoutError"
    assert "timed out after 0.2s" in (result.error or "")


async def test_new_session_and_attach(target) -> None:
    async def sessions(ctx: EvalContext) -> None:
        await ctx.send("hello")
        first = ctx.session_id
        await ctx.new_session()
        assert ctx.turns == [] and ctx.run.turns == 0
        await ctx.send("refund A1 40")
        ctx.called_tool("refund")
        run = await ctx.attach(first)
        assert run.turns == 1 and ctx.session_id == first
        ctx.not_called_tool("refund")
        await ctx.send("hello")
        assert ctx.run.turns == 2

    result = await run_trial(case_of(sessions), target)
    assert result.verdict == Verdict.PASSED, result.error
    assert result.session_id == "s1"
    closes = [line for line in target.log if line.startswith("close")]
    assert closes == ["close s1", "close s2"]  # the attached copy of s1 is not closed twice


async def test_sync_case_functions_run_in_a_worker_thread(target) -> None:
    import threading

    threads: list[str] = []

    def sync_case(ctx) -> None:
        threads.append(threading.current_thread().name)
        turn = ctx.send("hello")
        ctx.log(turn.reply)
        ctx.contains("Hello")
        ctx.converse(["refund A1 40", "hello"])
        ctx.called_tool("refund", count=1)
        assert len(ctx.turns) == 3

    result = await run_trial(case_of(sync_case), target)
    assert result.verdict == Verdict.PASSED, result.error
    assert threads and threads[0] != threading.current_thread().name
    assert result.logs == ["Hello! How can I help?"]


async def test_a_sync_case_that_times_out_is_cancelled(target) -> None:
    def sync_slow(ctx) -> None:
        ctx.send("slow")

    result = await run_trial(case_of(sync_slow, timeout=0.2), target)
    assert result.verdict == Verdict.ERROR and result.error_type == "TimeoutError"


async def test_per_case_judge_wins_and_judge_seam(target) -> None:
    from evalport.client.judges import FakeJudge, JudgeAssertions

    suite_judge, case_judge = FakeJudge(default=0.2), FakeJudge(default=0.9)

    async def judged(ctx: EvalContext) -> None:
        await ctx.send("hello")
        assert isinstance(ctx.judge(), JudgeAssertions)
        assert ctx.case_judge is case_judge
        ctx.judge().closed_qa("Does it greet the user?")

    result = await run_trial(case_of(judged, judge=case_judge), target, judge=suite_judge)
    assert result.verdict == Verdict.PASSED, result.assertions
    assert case_judge.calls == 1 and suite_judge.calls == 0
    assert len(result.judges) == 1


async def test_judges_do_not_run_for_errored_cases(target) -> None:
    from evalport.client.judges import FakeJudge

    judge = FakeJudge(default=1.0)

    async def errs(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.judge().closed_qa("?")
        raise ValueError("bug in the eval")

    result = await run_trial(case_of(errs), target, judge=judge)
    assert result.verdict == Verdict.ERROR and judge.calls == 0
    assert result.error_type == "ValueError"
    assert result.error.startswith("bug in the eval (at tests/client/cases/test_context.py:")
    assert result.error.endswith('in errs: raise ValueError("bug in the eval"))')


async def test_similar_to_is_deferred_and_resolved_at_case_end(target) -> None:
    from evalport.client.assertions import HashingEmbedder

    async def similar(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.similar_to("Hello, how can I help you?", HashingEmbedder(), threshold=0.6)
        await ctx.send("something else")  # the deferred check keeps the first reply
        ctx.similar_to("Hello, how can I help you?", HashingEmbedder(), threshold=0.6).soft()

    result = await run_trial(case_of(similar), target)
    first, second = result.assertions
    assert first.passed and not second.passed and second.severity == "soft"
    assert result.verdict == Verdict.SCORED


async def test_opening_a_session_can_fail_without_raising() -> None:
    class Down(FakeTarget):
        async def open(self, **kwargs):
            raise ConnectionError("connection refused")

    result = await run_trial(case_of(lambda ctx: None), Down(shop_agent))
    assert result.verdict == Verdict.ERROR and "connection refused" in (result.error or "")


async def test_judges_from_a_sync_case(target) -> None:
    from evalport.client.judges import FakeJudge

    judge = FakeJudge(default=0.9)

    def sync_judged(ctx) -> None:
        ctx.send("hello")
        ctx.judge().closed_qa("Does it greet the user?").gate()

    result = await run_trial(case_of(sync_judged), target, judge=judge)
    assert result.verdict == Verdict.PASSED, result.assertions
    assert judge.calls == 1 and len(result.judges) == 1


async def test_async_partials_and_callables_run_on_the_loop(target) -> None:
    import functools

    async def with_greeting(ctx: EvalContext, greeting: str) -> None:
        await ctx.send(greeting)
        ctx.contains("Hello")

    class Callable:
        async def __call__(self, ctx: EvalContext) -> None:
            await ctx.send("hello")
            ctx.event_seen("greeted")

    for func in (functools.partial(with_greeting, greeting="hello"), Callable()):
        case = Case(id="c", func=func)
        assert case.is_async
        assert (await run_trial(case, target)).verdict == Verdict.PASSED


async def test_exact_counts_say_when_there_were_too_many(target) -> None:
    async def twice(ctx: EvalContext) -> None:
        await ctx.converse(["refund A1 40", "refund A1 40", "refund A1 40"])
        ctx.called_tool("refund", count=2)

    (result,) = (await run_trial(case_of(twice), target)).assertions
    assert not result.passed and "more than 2 matching" in result.message
