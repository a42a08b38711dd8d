"""Every assertion family, the context and the approval loop against the example support
agent, through LocalTarget and through HttpTarget talking to the real adapter
(httpx.ASGITransport), redacted by default and verbatim on request."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.client import (
    ApprovalRequest,
    EvalContext,
    HttpTarget,
    LocalTarget,
    Target,
    Trajectory,
    TrialResult,
    Verdict,
    cases_from,
    decide_by_tool,
    eval_case,
    run_trial,
)
from evalport.client.assertions import (
    ContainsAny,
    EmbeddingSimilarity,
    HashingEmbedder,
    IsValidJson,
    at_least,
    between,
)
from evalport.protocol import TracePolicy
from evalport.server import EvalAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from support_agent import agent

TOKEN = "h4-token-0123456789abcdef"


@pytest.fixture(params=["local", "http"])
async def make_target(request) -> AsyncIterator[Callable[..., Target]]:
    opened: list[Any] = []

    def make(policy: TracePolicy | None = None) -> Target:
        if request.param == "local":
            local = LocalTarget(agent, policy=policy)
            opened.append(local)
            return local
        adapter = EvalAdapter(agent, token=TOKEN)
        http = HttpTarget(
            "http://support.test/evals-api",
            token=TOKEN,
            policy=policy,
            transport=httpx.ASGITransport(app=adapter.app("/evals-api")),
        )
        opened.extend([http, adapter])
        return http

    yield make
    for thing in opened:
        await thing.aclose()


async def trial(target: Target, func, **options) -> TrialResult:
    return await run_trial(cases_from(eval_case(**options)(func))[0], target)


def outcomes(result: TrialResult) -> dict[str, bool]:
    return {(a.label or a.name): a.passed for a in result.assertions}


async def test_status_question_every_text_tool_step_outcome_assertion(make_target) -> None:
    async def status(ctx: EvalContext) -> None:
        await ctx.send("Where is order A1049?")
        ctx.contains("shipped").label("contains")
        ctx.contains("SHIPPED", case_sensitive=False).label("contains, any case")
        ctx.contains_all(["A1049", "DHL"]).label("contains_all")
        ctx.contains_any(["UPS", "DHL"]).label("contains_any")
        ctx.starts_with("Order A1049").label("starts_with")
        ctx.ends_with("DHL.").label("ends_with")
        ctx.length_between(10, 80).label("length_between")
        ctx.equals("Order A1049 is shipped with DHL.").label("equals")
        ctx.matches_regex(r"^Order [A-Z]\d{4} is \w+").label("matches_regex")
        ctx.levenshtein("Order A1049 was shipped by DHL.", threshold=0.8).label("levenshtein")
        ctx.is_valid_json().label("is_valid_json")
        ctx.matches_json_schema({"type": "object"}).label("matches_json_schema")
        ctx.succeeded().label("succeeded")
        ctx.stopped().label("stopped")
        ctx.failed().label("failed")
        ctx.stop_reason("completed").label("stop_reason")
        ctx.called_tool("order_status", {"order_id": "A1049"}, count=1).label("called_tool")
        ctx.called_tool(
            "order_status", result={"order_id": "A1049", "status": "shipped", "carrier": "DHL"}
        ).label("called_tool result")
        ctx.called_tool("order_status", is_error=False).label("called_tool is_error")
        ctx.not_called_tool("refund_order").label("not_called_tool")
        ctx.used_no_tools().label("used_no_tools")
        ctx.max_tool_calls(1).label("max_tool_calls")
        ctx.no_failed_actions().label("no_failed_actions")
        ctx.tool_order(["order_status"], "strict").label("tool_order strict")
        ctx.step_count(between(1, 3)).label("step_count")
        ctx.max_steps(5).label("max_steps")
        # the agent's estimated usage: a tool step (48 in, 9 out) and the reply (64 in, 8 out)
        ctx.total_tokens_at_most(129).label("total_tokens_at_most")
        ctx.total_tokens_at_most(128).label("total_tokens_at_most, one short")
        ctx.tokens_at_most("output", 17).label("tokens_at_most")
        ctx.tokens_at_most("output", 16).label("tokens_at_most, one short")
        ctx.event_not_seen("refund.proposed").label("event_not_seen")

    result = await trial(make_target(), status)
    failing = {"is_valid_json", "matches_json_schema", "stopped", "failed", "used_no_tools"}
    failing |= {"total_tokens_at_most, one short", "tokens_at_most, one short"}
    assert outcomes(result) == {name: name not in failing for name in outcomes(result)}, (
        result.assertions
    )
    assert len(result.assertions) == 31 and result.verdict == Verdict.FAILED
    assert all(a.evaluated for a in result.assertions)


async def test_refund_conversation_events_order_and_redaction(make_target) -> None:
    async def refund(ctx: EvalContext) -> None:
        await ctx.send("I want a refund for order A1050")
        ctx.event_seen("refund.proposed", data={"order_id": "A1050", "amount": 24.5})
        ctx.not_called_tool("refund_order")
        turn = await ctx.send("yes")
        assert turn.index == 2 and ctx.run.turns == 2 and len(ctx.turns) == 2
        ctx.contains("refunded 24.50")
        ctx.called_tool("refund_order", {"order_id": "A1050", "amount": 24.5})
        ctx.tool_order(["search_orders", "refund_order"], "subset")
        ctx.tool_order(["search_orders", "refund_order", "order_status"], "superset")
        ctx.tool_order(["refund_order", "search_orders"], "unordered")
        ctx.events_in_order(["refund.proposed"])
        ctx.called_tool("search_orders", count=at_least(1))
        view = ctx.trajectory()
        assert [c.name for c in view.tool_calls()] == ["search_orders", "refund_order"]
        assert "User: yes" in view.transcript() and "sha256:" in view.transcript()

    result = await trial(make_target(), refund)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)
    tools = result.run["tools"]
    assert tools[1]["tool_call"]["arguments"]["order_id"]["hash"].startswith("sha256:")


async def test_predicates_need_a_verbatim_policy(make_target) -> None:
    async def predicate(ctx: EvalContext) -> None:
        await ctx.send("refund order A1050")
        await ctx.send("yes")
        ctx.called_tool("refund_order", lambda args: args["amount"] < 100).label("predicate")
        ctx.called_tool("refund_order", {"amount": lambda a: a < 100}).label("per-arg amount")
        ctx.called_tool("refund_order", {"reason": lambda r: "customer" in r}).label("per-arg")

    redacted = await trial(make_target(), predicate)
    assert [a.evaluated for a in redacted.assertions] == [False, False, False]
    assert redacted.verdict == Verdict.FAILED
    assert "TracePolicy.verbatim()" in redacted.assertions[0].message
    verbatim = await trial(make_target(TracePolicy.verbatim()), predicate)
    assert verbatim.verdict == Verdict.PASSED, verbatim.assertions
    allowed = await trial(make_target(TracePolicy.safe(allow_argument_keys=["amount"])), predicate)
    # the whole-map predicate still sees a digested "reason"; the "amount" matcher is served
    assert [a.evaluated for a in allowed.assertions] == [False, True, False]
    assert allowed.assertions[1].passed


async def test_gated_refund_without_a_policy_fails_loud_naming_the_call(make_target) -> None:
    async def no_policy(ctx: EvalContext) -> None:
        await ctx.send("refund order A1049")
        await ctx.send("yes")

    result = await trial(make_target(), no_policy)
    assert result.verdict == Verdict.ERROR and result.error_type == "ApprovalError"
    assert "(refund_order)" in (result.error or "") and "no approval policy" in (result.error or "")


async def test_argument_dependent_policy_rejects_and_the_agent_says_why(make_target) -> None:
    seen: list[ApprovalRequest] = []

    def policy(request: ApprovalRequest, so_far: Trajectory) -> dict:
        seen.append(request)
        assert so_far.tool_calls("refund_order")[-1].approval == "pending"
        return {
            call_id: ("reject", "refunds over 300 need a manager")
            if request.matches(call_id, order_id="A1049")
            else "approve"
            for call_id in request.ids
        }

    async def rejected(ctx: EvalContext) -> None:
        await ctx.converse(["refund order A1049", "yes"])
        ctx.contains("cannot refund order A1049: refunds over 300 need a manager")
        ctx.tool_was_rejected("refund_order", {"order_id": "A1049"})
        ctx.not_called_tool("order_status")
        ctx.succeeded()

    result = await trial(make_target(), rejected, approval_policy=policy)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)
    assert len(seen) == 1 and seen[0].pending[0].tool == "refund_order"


async def test_approved_gated_refund_and_a_sync_case(make_target) -> None:
    def approved(ctx) -> None:
        ctx.converse(["refund order A1049", "yes"])
        ctx.contains("Done: I refunded 349.00")
        ctx.tool_was_approved("refund_order")
        ctx.check(ContainsAny(["3-5 days"]), ctx.trajectory())

    policy = decide_by_tool({"refund_order": "approve"})
    result = await trial(make_target(), approved, approval_policy=policy)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)


async def test_attach_fresh_session_skip_require_log(make_target) -> None:
    target = make_target()

    async def sessions(ctx: EvalContext) -> None:
        await ctx.send("Where is order A1051?")
        first = ctx.session_id
        await ctx.new_session()
        await ctx.send("hello")
        ctx.used_no_tools()
        await ctx.attach(first)
        ctx.called_tool("order_status", {"order_id": "A1051"})
        ctx.log(f"attached to {first}")
        ctx.require(ctx.contains("processing"))
        ctx.skip("the rest needs staging data")

    result = await trial(target, sessions)
    assert result.verdict == Verdict.SKIPPED and result.logs[0].startswith("attached to ")
    assert [a.passed for a in result.assertions] == [True, True, True]


async def test_standalone_assertions_on_the_decoded_run_and_similarity(make_target) -> None:
    target = make_target()
    session = await target.open()
    turn = await session.send("hello")
    await session.close()
    assert not IsValidJson().evaluate(turn).passed
    similar = EmbeddingSimilarity("Hi! I can find your orders", HashingEmbedder(), threshold=0.5)
    assert (await similar.aevaluate(turn.run)).passed
