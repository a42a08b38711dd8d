"""An approval policy that reads a digested argument says what happened (issue 40 item 3).

The seed's policy rejects refunds above 100 by reading the call's ``amount``. Under the
default safe trace policy the arguments a policy sees are digests, so ``amount > 100``
compares a digest with a number: the case error names the digests and both ways out.
The policy sees the run as the target's trace policy left it, in-process or over HTTP.
"""

from __future__ import annotations

import pytest
from evalport.client import (
    ApprovalRequest,
    EvalContext,
    Trajectory,
    Verdict,
    cases_from,
    eval_case,
    run_trial,
)
from evalport.protocol import TracePolicy
from fake_target import FakeTarget, shop_agent


def seed_policy(request: ApprovalRequest, so_far: Trajectory) -> dict[str, object]:
    """The seed's policy, ported: reject refunds above the auto-approve threshold."""
    payload: dict[str, object] = {}
    for action in request.actions:
        call = so_far.last_tool_call(action.tool)
        args = call.inputs if call is not None else {}
        payload[action.call_id] = (
            ("reject", "above the auto-approve threshold")
            if args.get("amount", 0) > 100
            else "approve"
        )
    return payload


async def large_refund(ctx: EvalContext) -> None:
    await ctx.send("refund B2 300")
    ctx.tool_was_rejected("refund")


CASE = cases_from(eval_case(approval_policy=seed_policy)(large_refund))[0]


@pytest.mark.parametrize(
    ("policy", "verdict"),
    [(TracePolicy.safe(), Verdict.ERROR), (TracePolicy.verbatim(), Verdict.PASSED)],
)
async def test_a_policy_reading_a_digest_is_told_what_to_do(policy, verdict) -> None:
    target = FakeTarget(shop_agent, policy)
    result = await run_trial(CASE, target)
    await target.aclose()
    assert result.verdict == verdict, result.error
    if verdict == Verdict.ERROR:
        assert result.error_type == "ApprovalError"
        error = result.error or ""
        assert "TypeError" in error and "'>' not supported" in error
        assert "digest" in error and "amount" in error
        assert "request.matches(" in error and "--trace-policy verbatim" in error


async def test_a_policy_that_raises_on_verbatim_arguments_keeps_its_own_error() -> None:
    def broken(request: ApprovalRequest, so_far: Trajectory) -> dict[str, object]:
        raise KeyError("no such decision table")

    target = FakeTarget(shop_agent, TracePolicy.verbatim())
    case = cases_from(eval_case(approval_policy=broken)(large_refund))[0]
    result = await run_trial(case, target)
    await target.aclose()
    assert result.verdict == Verdict.ERROR and result.error_type == "KeyError"
