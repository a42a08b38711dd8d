"""Approval policies and simulated users in the context loop (issue 8, client part)."""

from __future__ import annotations

import pytest
from evalport.client import (
    ApprovalRequest,
    EvalContext,
    LocalTarget,
    Trajectory,
    Verdict,
    approve_all,
    cases_from,
    decide_by_tool,
    eval_case,
    reject_all,
    run_trial,
)
from evalport.client._core._conversation import to_decision
from evalport.protocol import ApprovalDecision, TracePolicy
from fake_target import FakeTarget, shop_agent


def case_of(func, **options):
    return cases_from(eval_case(**options)(func))[0]


@pytest.fixture
async def target():
    fake = FakeTarget(shop_agent)
    yield fake
    await fake.aclose()


@pytest.fixture
async def verbatim_target():
    fake = FakeTarget(shop_agent, TracePolicy.verbatim())
    yield fake
    await fake.aclose()


async def test_a_suspension_without_a_policy_is_a_loud_case_error(target) -> None:
    async def no_policy(ctx: EvalContext) -> None:
        await ctx.send("refund B2 300")

    result = await run_trial(case_of(no_policy), target)
    assert result.verdict == Verdict.ERROR and result.error_type == "ApprovalError"
    pending = target.sessions["s1"].pending
    assert pending and pending[0].call_id in (result.error or "")
    assert "(refund)" in (result.error or "") and "silence is never consent" in (result.error or "")


async def test_ungated_calls_need_no_policy(target) -> None:
    async def small(ctx: EvalContext) -> None:
        await ctx.send("refund A1 40")
        ctx.called_tool("refund")

    assert (await run_trial(case_of(small), target)).verdict == Verdict.PASSED


async def test_approve_all_from_run_trial_and_tool_was_approved(target) -> None:
    async def approved(ctx: EvalContext) -> None:
        turn = await ctx.send("refund B2 300")
        assert turn.reply == "refunded 300 on B2" and not turn.run.pending_approvals
        ctx.tool_was_approved("refund", {"order_id": "B2"})
        ctx.succeeded()

    result = await run_trial(case_of(approved), target, approval_policy=approve_all())
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)
    assert any(line.startswith("decide s1 ") and line.endswith("=approve") for line in target.log)


async def test_rejection_reason_reaches_the_agent(target) -> None:
    async def rejected(ctx: EvalContext) -> None:
        await ctx.send("refund B2 300")
        ctx.contains("above the limit")
        ctx.tool_was_rejected("refund")

    case = case_of(rejected, approval_policy=reject_all("above the limit"))
    result = await run_trial(case, target, approval_policy=approve_all())  # the case's wins
    assert result.verdict == Verdict.PASSED, result.assertions


async def test_decisions_per_call_id_depend_on_arguments(verbatim_target) -> None:
    requests: list[ApprovalRequest] = []

    def by_amount(request: ApprovalRequest, so_far: Trajectory) -> dict:
        requests.append(request)
        assert isinstance(so_far, Trajectory)
        return {
            call_id: "approve"
            if request.arguments(call_id)["amount"] <= 200
            else ("reject", "too much")
            for call_id in request.ids
        }

    async def both(ctx: EvalContext) -> None:
        turn = await ctx.send("refund both")
        assert turn.reply == "refunded 150 on A1; cannot refund B2: too much"
        ctx.tool_was_approved("refund", {"order_id": "A1"})
        ctx.tool_was_rejected("refund", {"order_id": "B2", "amount": 300})
        ctx.tool_was_rejected("refund", lambda a: a["amount"] > 200)

    result = await run_trial(case_of(both, approval_policy=by_amount), verbatim_target)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)
    assert len(requests) == 1 and len(requests[0].pending) == 2  # both pending at once


async def test_redacted_requests_compare_arguments_by_digest(target) -> None:
    def by_order(request: ApprovalRequest, so_far: Trajectory) -> dict:
        return {
            call_id: "reject" if request.matches(call_id, order_id="B2") else "approve"
            for call_id in request.ids
        }

    async def both(ctx: EvalContext) -> None:
        await ctx.send("refund both")
        ctx.tool_was_approved("refund", {"order_id": "A1"})
        ctx.tool_was_rejected("refund", {"order_id": "B2"})

    result = await run_trial(case_of(both, approval_policy=by_order), target)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)


async def test_a_policy_that_leaves_an_id_undecided_fails_loud(target) -> None:
    def half(request: ApprovalRequest, so_far: Trajectory) -> dict:
        return {request.ids[0]: "approve"}

    async def both(ctx: EvalContext) -> None:
        await ctx.send("refund both")

    result = await run_trial(case_of(both, approval_policy=half), target)
    assert result.verdict == Verdict.ERROR and result.error_type == "ApprovalError"
    assert "left pending call(s) undecided" in (result.error or "")
    undecided = [p.call_id for p in target.sessions["s1"].pending][1]
    assert undecided in (result.error or "")


async def test_a_policy_that_invents_ids_or_answers_nonsense_fails_loud(target) -> None:
    def extra(request: ApprovalRequest, so_far: Trajectory) -> dict:
        return {**dict.fromkeys(request.ids, "approve"), "ghost": "approve"}

    async def one(ctx: EvalContext) -> None:
        await ctx.send("refund B2 300")

    result = await run_trial(case_of(one, approval_policy=extra), target)
    assert result.verdict == Verdict.ERROR and "not pending: ghost" in (result.error or "")

    def maybe(request: ApprovalRequest, so_far: Trajectory) -> dict:
        return dict.fromkeys(request.ids, "maybe")

    result = await run_trial(case_of(one, approval_policy=maybe), target)
    assert result.verdict == Verdict.ERROR and "'maybe'" in (result.error or "")

    result = await run_trial(case_of(one, approval_policy=lambda r, t: None), target)
    assert result.verdict == Verdict.ERROR and "mapping" in (result.error or "")


async def test_async_policies_and_decide_by_tool(target) -> None:
    async def async_policy(request: ApprovalRequest, so_far: Trajectory) -> dict:
        return dict.fromkeys(request.ids, True)

    async def one(ctx: EvalContext) -> None:
        await ctx.send("refund B2 300")
        ctx.tool_was_approved("refund")

    assert (await run_trial(case_of(one, approval_policy=async_policy), target)).verdict == "passed"
    by_tool = decide_by_tool({"refund": {"decision": "reject", "reason": "policy"}})

    async def rejected(ctx: EvalContext) -> None:
        await ctx.send("refund B2 300")
        ctx.contains("policy")

    assert (await run_trial(case_of(rejected, approval_policy=by_tool), target)).verdict == "passed"
    unlisted = decide_by_tool({"delete_account": "reject"})
    result = await run_trial(case_of(one, approval_policy=unlisted), target)
    assert result.verdict == Verdict.ERROR and "undecided" in (result.error or "")


async def test_the_policy_can_be_set_inside_the_case(target) -> None:
    async def inside(ctx: EvalContext) -> None:
        ctx.approval_policy = approve_all()
        await ctx.send("refund B2 300")
        ctx.tool_was_approved("refund")

    assert (await run_trial(case_of(inside), target)).verdict == Verdict.PASSED


async def test_sync_cases_settle_approvals_too(target) -> None:
    def sync_case(ctx) -> None:
        ctx.approval_policy = approve_all()
        ctx.converse(["hello", "refund B2 300"])
        ctx.tool_was_approved("refund")

    result = await run_trial(case_of(sync_case), target)
    assert result.verdict == Verdict.PASSED, result.error


def test_decision_spellings() -> None:
    assert to_decision("approve", "c") == ApprovalDecision(decision="approve")
    assert to_decision(False, "c") == ApprovalDecision(decision="reject")
    assert to_decision(("reject", "no"), "c") == ApprovalDecision(decision="reject", reason="no")
    assert to_decision({"decision": "approve"}, "c").decision == "approve"
    same = ApprovalDecision(decision="reject", reason="x")
    assert to_decision(same, "c") is same
    # One parser for policies and Session.decide: the union of what both accepted.
    assert to_decision(True, "c") == ApprovalDecision(decision="approve")
    assert to_decision(("reject", None), "c") == ApprovalDecision(decision="reject")
    assert to_decision(("approve", "ok"), "c") == ApprovalDecision(decision="approve", reason="ok")
    assert to_decision({"decision": "reject", "reason": "r"}, "c").reason == "r"
    assert to_decision(["reject", "why"], "c") == ApprovalDecision(decision="reject", reason="why")
    for bad in ("maybe", ("maybe", "x"), {"decision": "yes"}, 1, None, ("reject",)):
        with pytest.raises(ValueError, match="the decision for call 'c'"):
            to_decision(bad, "c")  # type: ignore[arg-type]


async def test_decide_takes_every_spelling_a_policy_may_answer() -> None:
    spellings = [True, "approve", ("approve", None), {"decision": "approve"}]
    async with LocalTarget(shop_agent) as target:
        for spelling in spellings:
            session = await target.open()
            turn = await session.send("refund B2 300")
            [pending] = turn.run.pending_approvals
            resumed = await session.decide({pending.call_id: spelling})
            assert not resumed.run.pending_approvals, spelling
            await session.close()


class ScriptUser:
    """A minimal simulated user: fixed lines, records the transcripts it saw."""

    def __init__(self, lines: list[str | None], max_turns: int = 10) -> None:
        self.lines = lines
        self.max_turns = max_turns
        self.seen: list[list[tuple[str, str]]] = []

    async def next_message(self, transcript: list[tuple[str, str]]) -> str | None:
        self.seen.append(transcript)
        return self.lines[len(self.seen) - 1] if len(self.seen) <= len(self.lines) else None


async def test_simulated_users_drive_turns_and_never_answer_approvals(target) -> None:
    user = ScriptUser(["hello", "refund B2 300", None, "never sent"])

    async def simulated(ctx: EvalContext) -> None:
        turns = await ctx.simulate(user)
        assert [t.index for t in turns] == [1, 2]
        ctx.tool_was_rejected("refund")

    case = case_of(simulated, approval_policy=reject_all("no"))
    result = await run_trial(case, target)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)
    assert user.seen[2] == [
        ("user", "hello"),
        ("assistant", "Hello! How can I help?"),
        ("user", "refund B2 300"),
        ("assistant", "cannot refund B2: no"),
    ]


async def test_simulation_stops_at_the_turn_cap_and_needs_one(target) -> None:
    chatty = ScriptUser(["hello"] * 10, max_turns=3)

    async def capped(ctx: EvalContext) -> None:
        assert len(await ctx.simulate(chatty)) == 3
        assert len(await ctx.simulate(ScriptUser(["hi"] * 5), max_turns=1)) == 1

    assert (await run_trial(case_of(capped), target)).verdict == Verdict.PASSED

    class NoCap(ScriptUser):
        max_turns = 0  # type: ignore[assignment]

    async def uncapped(ctx: EvalContext) -> None:
        user = NoCap(["hi"])
        user.max_turns = 0
        await ctx.simulate(user)

    result = await run_trial(case_of(uncapped), target)
    assert result.verdict == Verdict.ERROR and "turn cap" in (result.error or "")


async def test_a_simulated_user_without_a_policy_still_fails_loud(target) -> None:
    async def simulated(ctx: EvalContext) -> None:
        await ctx.simulate(ScriptUser(["refund B2 300"]))

    result = await run_trial(case_of(simulated), target)
    assert result.verdict == Verdict.ERROR and result.error_type == "ApprovalError"


async def test_the_turn_send_returns_spans_its_suspensions(target) -> None:
    async def spans(ctx: EvalContext) -> None:
        turn = await ctx.send("refund B2 300")
        assert turn.message == "refund B2 300" and turn.index == 1
        names = [e.name for step in turn.steps for e in step.tool_executions]
        assert names == ["lookup", "refund"]
        assert ctx.turns == [turn]

    result = await run_trial(case_of(spans, approval_policy=approve_all()), target)
    assert result.verdict == Verdict.PASSED, result.error


async def test_the_simulated_users_of_the_judges_package_plug_in(target) -> None:
    from evalport.client import ScriptedUser

    user = ScriptedUser(["hello", "refund B2 300", "hello"], max_turns=2)

    async def scripted(ctx: EvalContext) -> None:
        turns = await ctx.simulate(user)
        assert [t.message for t in turns] == ["hello", "refund B2 300"]
        ctx.tool_was_approved("refund")

    result = await run_trial(case_of(scripted, approval_policy=approve_all()), target)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)
