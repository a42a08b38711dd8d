"""Interrupts in the context loop: ``ctx.resume``, interrupt policies and ``ctx.interrupted``,
the same on LocalTarget and on HttpTarget (in process, through the real adapter)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from evalport.client import (
    ApprovalError,
    EvalContext,
    HttpTarget,
    LocalTarget,
    SyncEvalContext,
    Target,
    Verdict,
    answer_by_kind,
    approve_all,
    cases_from,
    eval_case,
    run_trial,
)
from evalport.client.assertions import Interrupted
from evalport.protocol import AgentRun, Interrupt, Message, PendingInterrupt
from evalport.protocol.runtime import TurnContext, tool
from evalport.server import EvalAdapter

TOKEN = "interrupts-token-0123456789"


@tool(approval=True)
async def refund(order_id: str) -> str:
    return f"refunded {order_id}"


async def shop(message: str, history: list[Message], ctx: TurnContext) -> str:
    if message == "two":
        a, b = await asyncio.gather(ctx.interrupt("choice", "colour?"), ctx.interrupt("form", 1))
        return f"{a} {b}"
    if message == "both":
        size, done = await asyncio.gather(ctx.interrupt("choice", "size?"), refund("A1"))
        return f"{done}, size {size}"
    if message == "plain":
        return "nothing to ask"
    size = await ctx.interrupt("choice", {"question": "size?"})
    return f"size {size}"


@pytest.fixture(params=["local", "http"])
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    if request.param == "local":
        yield LocalTarget(shop)
        return
    adapter = EvalAdapter(shop, token=TOKEN)
    http = HttpTarget(
        "http://agent.test/evals",
        token=TOKEN,
        transport=httpx.ASGITransport(app=adapter.app("/evals")),
    )
    try:
        yield http
    finally:
        await http.aclose()
        await adapter.aclose()


async def trial(target: Target, case: Any, **options: Any) -> Any:
    return await run_trial(cases_from(eval_case(**options)(case))[0], target)


def passed(result: Any) -> None:
    failing = [(a.name, a.message) for a in result.assertions if not a.passed]
    assert result.verdict == Verdict.PASSED, (result.error, failing)


async def test_send_returns_the_suspended_turn_and_resume_finishes_it(target: Target) -> None:
    async def case(ctx: EvalContext) -> None:
        turn = await ctx.send("shirt")
        assert turn.run.status == "in_progress" and turn.own.pending_interrupts
        turn = await ctx.resume("M")
        assert turn.reply == "size M" and len(ctx.turns) == 1 and turn.message == "shirt"
        assert [i.kind for i in turn.own.interrupts] == ["choice"]
        ctx.interrupted("choice", payload={"question": "size?"}, answer="M")
        ctx.interrupted("form", count=0)
        await ctx.send("plain")
        assert len(ctx.turns) == 2

    passed(await trial(target, case))


async def test_several_pending_need_answers_by_id(target: Target) -> None:
    async def case(ctx: EvalContext) -> None:
        turn = await ctx.send("two")
        ids = {asked.kind: asked.id for asked in turn.run.pending_interrupts}
        with pytest.raises(ApprovalError, match="2 interrupts are pending"):
            await ctx.resume("red")
        turn = await ctx.resume(answers={ids["choice"]: "red", ids["form"]: 7})
        assert turn.reply == "red 7"
        with pytest.raises(ApprovalError, match="not waiting"):
            await ctx.resume("again")

    passed(await trial(target, case))


async def test_a_send_while_interrupts_wait_and_an_unknown_id_are_clear_errors(
    target: Target,
) -> None:
    async def case(ctx: EvalContext) -> None:
        turn = await ctx.send("shirt")
        (asked,) = turn.run.pending_interrupts
        with pytest.raises(ApprovalError, match=rf"{asked.id}.*ctx\.resume.*interrupt_policy"):
            await ctx.send("plain")
        with pytest.raises(ApprovalError, match=rf"'nope' is not a pending.*ids are {asked.id}"):
            await ctx.resume(answers={"nope": "M"})
        with pytest.raises(ApprovalError, match="interrupt_policy"):
            await ctx.converse(["plain"])
        turn = await ctx.resume(answers={asked.id: "M"})
        assert turn.reply == "size M" and len(ctx.turns) == 1

    passed(await trial(target, case))


async def test_one_resume_settles_an_approval_of_the_same_suspension(target: Target) -> None:
    async def case(ctx: EvalContext) -> None:
        turn = await ctx.send("both")
        assert turn.run.pending_approvals and turn.run.pending_interrupts
        turn = await ctx.resume("L")
        assert turn.reply == "refunded A1, size L"
        ctx.tool_was_approved("refund")

    passed(await trial(target, case, approval_policy=approve_all()))


async def test_an_interrupt_policy_answers_by_kind(target: Target) -> None:
    async def case(ctx: EvalContext) -> None:
        ctx.interrupt_policy = answer_by_kind({"choice": lambda asked: "S", "form": 2})
        assert (await ctx.send("shirt")).reply == "size S"
        assert (await ctx.send("two")).reply == "S 2"
        ctx.interrupted("choice", count=2)

    passed(await trial(target, case))

    async def unknown_kind(ctx: EvalContext) -> None:
        ctx.interrupt_policy = answer_by_kind({"form": 2})
        await ctx.send("shirt")

    result = await trial(target, unknown_kind)
    assert result.verdict == Verdict.ERROR and "'choice' interrupt" in (result.error or "")


async def test_a_sync_case_resumes_too(target: Target) -> None:
    def case(ctx: SyncEvalContext) -> None:
        ctx.send("shirt")
        assert ctx.resume("XL").reply == "size XL"
        ctx.interrupted("choice")

    passed(await trial(target, case))


def test_interrupted_reads_answered_and_pending_interrupts() -> None:
    run = AgentRun(
        interrupts=[Interrupt(id="1", kind="choice", payload={"q": "size?"}, answer="M")],
        pending_interrupts=[PendingInterrupt(id="2", kind="form", payload=[1])],
    )
    assert Interrupted("choice", payload={"q": "size?"}).evaluate(run).passed
    assert Interrupted("form").evaluate(run).passed
    assert not Interrupted("form", answer=1).evaluate(run).passed  # not answered yet
    missing = Interrupted("clarification").evaluate(run)
    assert not missing.passed and "kinds raised: ['choice', 'form']" in missing.message


async def test_a_case_declares_its_interrupt_policy(target: Target) -> None:
    async def case(ctx: EvalContext) -> None:
        assert [turn.reply for turn in ctx.turns] == ["size S", "nothing to ask"]
        ctx.interrupted("choice", answer="S")

    policy = answer_by_kind({"choice": "S"})
    passed(await trial(target, case, interrupt_policy=policy, messages=["shirt", "plain"]))


@pytest.mark.parametrize(
    ("message", "pending"), [("shirt", "interrupt choice"), ("both", "approval of refund")]
)
async def test_a_case_that_leaves_a_question_unanswered_is_an_error(
    target: Target, message: str, pending: str
) -> None:
    """Silence is never consent: an interrupt or an approval nothing answered is an error
    naming it, even when every assertion passed (it passed with the run suspended)."""

    async def case(ctx: EvalContext) -> None:
        await ctx.send(message)
        ctx.contains("")  # an assertion that holds

    result = await trial(target, case)
    assert result.verdict == Verdict.ERROR, result.verdict
    assert result.error_type == "LeftPending"
    assert pending in (result.error or "") and "silence is never consent" in (result.error or "")
