"""The approvals route: suspended turns, decisions, and every error it answers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.protocol import Message, decode_run
from evalport.protocol.runtime import ApprovalRejected, TurnContext, tool
from evalport.server import Limits
from evalport.server.stores import MemoryStore
from serverkit import Build, open_session

EXAMPLES = Path(__file__).parents[2] / "examples"


@tool(approval=lambda order_id, amount: amount > 100)
async def refund_order(order_id: str, amount: int) -> str:
    return f"refunded {amount} on {order_id}"


async def refunds(message: str, history: list[Message], ctx: TurnContext) -> str:
    """'refund A1 500' refunds; 'two' asks for two gated refunds at once."""
    if message == "two":
        done = await asyncio.gather(refund_order("A1", 200), refund_order("A2", 300))
        return " & ".join(done)
    _, order_id, amount = message.split()
    try:
        return await refund_order(order_id, int(amount))
    except ApprovalRejected as rejected:
        return f"I cannot refund {order_id}: {rejected.reason}"


def problem_type(response: httpx.Response) -> str:
    assert response.headers["content-type"] == "application/problem+json"
    return str(response.json()["type"]).rsplit(":", 1)[1]


async def suspend(client: httpx.AsyncClient, message: str = "refund A1 500") -> tuple[str, Any]:
    session_id = await open_session(client)
    response = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": message})
    assert response.status_code == 200
    return session_id, decode_run(response.content)


async def test_a_gated_tool_suspends_the_turn_with_pending_approvals(build: Build) -> None:
    _, client = build(refunds)
    session_id, run = await suspend(client)
    assert run.status == "in_progress"  # a status Instructor's client decodes
    (pending,) = run.pending_approvals
    assert (pending.tool, pending.arguments, pending.turn) == (
        "refund_order",
        {"order_id": "A1", "amount": 500},
        1,
    )
    assert run.tools == []  # requested, not executed, until decided
    assert pending.call_id in [c.id for step in run.steps for c in step.requested_tool_calls]
    attached = decode_run((await client.get(f"/evals/sessions/{session_id}")).content)
    assert attached.pending_approvals == run.pending_approvals


async def test_reject_with_a_reason_the_agent_receives(build: Build) -> None:
    _, client = build(refunds)
    session_id, run = await suspend(client)
    call_id = run.pending_approvals[0].call_id
    response = await client.post(
        f"/evals/sessions/{session_id}/approvals",
        json={"decisions": {call_id: {"decision": "reject", "reason": "above the limit"}}},
    )
    assert response.status_code == 200
    run = decode_run(response.content)
    assert (run.status, run.reply) == ("completed", "I cannot refund A1: above the limit")
    assert run.pending_approvals == []
    approval = run.steps[0].tool_executions[0].approval
    assert approval is not None
    assert (approval.state, approval.reason) == ("rejected", "above the limit")
    assert approval.decided_at is not None


async def test_approve_runs_the_tool_and_the_session_goes_on(build: Build) -> None:
    _, client = build(refunds)
    session_id, run = await suspend(client)
    response = await client.post(
        f"/evals/sessions/{session_id}/approvals",
        json={"decisions": {run.pending_approvals[0].call_id: {"decision": "approve"}}},
    )
    run = decode_run(response.content)
    assert run.reply == "refunded 500 on A1"
    assert run.tools[0].result == "refunded 500 on A1"
    assert run.tools[0].approval is not None and run.tools[0].approval.state == "approved"
    after = await client.post(
        f"/evals/sessions/{session_id}/turns", json={"message": "refund A2 5"}
    )
    assert decode_run(after.content).turns == 2


async def test_every_pending_id_needs_a_decision_and_unknown_ids_are_refused(build: Build) -> None:
    _, client = build(refunds)
    session_id, run = await suspend(client, "two")
    first, second = (p.call_id for p in run.pending_approvals)
    url = f"/evals/sessions/{session_id}/approvals"
    missing = await client.post(url, json={"decisions": {first: {"decision": "approve"}}})
    assert missing.status_code == 422 and problem_type(missing) == "invalid-body"
    assert second in missing.json()["detail"]
    assert [e["path"] for e in missing.json()["errors"]] == [f'$.decisions["{second}"]']
    unknown = await client.post(
        url,
        json={
            "decisions": {
                first: {"decision": "approve"},
                second: {"decision": "approve"},
                "call_nope": {"decision": "reject"},
            }
        },
    )
    assert unknown.status_code == 422 and "call_nope" in unknown.json()["detail"]
    # Nothing was resumed by the refused requests.
    still = decode_run((await client.get(f"/evals/sessions/{session_id}")).content)
    assert len(still.pending_approvals) == 2
    both = {first: {"decision": "approve"}, second: {"decision": "approve"}}
    done = decode_run((await client.post(url, json={"decisions": both})).content)
    assert done.reply == "refunded 200 on A1 & refunded 300 on A2"


async def test_a_new_turn_while_suspended_is_409(build: Build) -> None:
    _, client = build(refunds)
    session_id, run = await suspend(client)
    response = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "hello"})
    assert response.status_code == 409 and problem_type(response) == "session-suspended"
    assert run.pending_approvals[0].call_id in response.json()["detail"]


async def test_decisions_without_a_suspension_are_409(build: Build) -> None:
    _, client = build(refunds)
    session_id = await open_session(client)
    response = await client.post(
        f"/evals/sessions/{session_id}/approvals",
        json={"decisions": {"x": {"decision": "approve"}}},
    )
    assert response.status_code == 409 and problem_type(response) == "not-suspended"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({}, "$.decisions"),
        ({"decisions": {"c": {"decision": "maybe"}}}, '$.decisions["c"].decision'),
        ({"decisions": {"c": {"decision": "approve", "why": "x"}}}, '$.decisions["c"].why'),
    ],
)
async def test_decision_bodies_are_decoded_strictly(
    build: Build, body: dict[str, Any], path: str
) -> None:
    _, client = build(refunds)
    session_id, _ = await suspend(client)
    response = await client.post(f"/evals/sessions/{session_id}/approvals", json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == path


async def test_a_suspended_session_still_expires_and_its_turn_is_cancelled(build: Build) -> None:
    cancelled = asyncio.Event()

    @tool(approval=True)
    async def wipe_account(user: str) -> str:
        return "wiped"

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        try:
            return await wipe_account(message)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    clock = [0.0]
    adapter, client = build(
        agent, store=MemoryStore(clock=lambda: clock[0]), limits=Limits(session_ttl=30)
    )
    session_id, run = await suspend(client, "u-1")
    assert run.status == "in_progress"
    clock[0] += 31
    expired = await client.post(
        f"/evals/sessions/{session_id}/approvals",
        json={"decisions": {run.pending_approvals[0].call_id: {"decision": "approve"}}},
    )
    assert expired.status_code == 404 and problem_type(expired) == "session-not-found"
    await asyncio.wait_for(cancelled.wait(), 1)
    assert adapter.sessions.live_count == 0


async def test_the_example_agent_refund_conversation(
    build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("support_agent", None)
    from support_agent import REFUND_LIMIT, agent

    _, client = build(agent)
    session_id = await open_session(client, caseId="refunds/123")
    turns = f"/evals/sessions/{session_id}/turns"
    first = decode_run(
        (await client.post(turns, json={"message": "Hi, I want a refund for order #123"})).content
    )
    assert [t.tool_call.name for t in first.tools] == ["search_orders"]
    assert "180.00" in first.reply and REFUND_LIMIT < 180.0
    second = decode_run(
        (await client.post(turns, json={"message": "Yes, please proceed."})).content
    )
    (pending,) = second.pending_approvals
    assert pending.arguments == {"order_id": "123", "amount": 180.0, "reason": "customer request"}
    decided = await client.post(
        f"/evals/sessions/{session_id}/approvals",
        json={
            "decisions": {
                pending.call_id: {
                    "decision": "reject",
                    "reason": "above the auto-approve threshold",
                }
            }
        },
    )
    run = decode_run(decided.content)
    assert run.reply == "I'm sorry, I cannot refund order 123: above the auto-approve threshold"
    assert [t.tool_call.name for t in run.tools] == ["search_orders", "refund_order"]
    refund = run.tools[1]
    assert refund.approval is not None and refund.approval.state == "rejected"
    # A small refund needs no approval.
    small = await client.post(turns, json={"message": "refund A1050 please"})
    assert "24.50" in decode_run(small.content).reply
    done = decode_run((await client.post(turns, json={"message": "yes"})).content)
    assert done.status == "completed" and done.reply.startswith("Done: I refunded 24.50")
    assert done.tools[-1].approval is None
    # Another session still sees the seeded order: refunds never leak across sessions.
    other = await open_session(client)
    fresh = await client.post(
        f"/evals/sessions/{other}/turns", json={"message": "refund A1050 please"}
    )
    assert "came to 24.50" in decode_run(fresh.content).reply


async def test_a_server_policy_digests_payloads_before_they_leave(build: Build) -> None:
    from evalport.protocol import TracePolicy, matches_digest

    _, client = build(refunds, policy=TracePolicy.safe())
    health = (await client.get("/health")).json()
    assert "redaction" in health["capabilities"]
    session_id, run = await suspend(client, "refund A7 900")
    (pending,) = run.pending_approvals
    assert set(pending.arguments) == {"order_id", "amount"}  # keys stay in clear
    assert matches_digest("A7", pending.arguments["order_id"])
    attached = (await client.get(f"/evals/sessions/{session_id}")).text
    # (the random session id may hold "A7" by chance: about 1 run in 130)
    assert "A7" not in attached.replace("refund A7 900", "").replace(session_id, "")
    decided = await client.post(
        f"/evals/sessions/{session_id}/approvals",
        json={"decisions": {pending.call_id: {"decision": "approve"}}},
    )
    done = decode_run(decided.content)
    assert done.reply == "refunded 900 on A7"  # the reply stays in clear
    assert matches_digest("refunded 900 on A7", done.tools[0].result)


async def test_deleting_a_suspended_session_cancels_its_turn(build: Build) -> None:
    cancelled = asyncio.Event()

    @tool(approval=True)
    async def close_account(user: str) -> str:
        return "closed"

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        try:
            return await close_account(message)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    adapter, client = build(agent)
    session_id, _ = await suspend(client, "u-2")
    assert (await client.delete(f"/evals/sessions/{session_id}")).status_code == 204
    await asyncio.wait_for(cancelled.wait(), 1)
    assert adapter.sessions.live_count == 0


async def test_draining_refuses_new_work_and_lets_suspended_turns_finish(build: Build) -> None:
    adapter, client = build(refunds)
    session_id, run = await suspend(client)
    adapter.drain()
    assert adapter.draining
    for response in (
        await client.get("/health"),
        await client.post("/evals/sessions", json={}),
        await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "refund A2 5"}),
    ):
        assert response.status_code == 503 and problem_type(response) == "draining"
        assert response.headers["retry-after"] == "5"
    assert (await client.get(f"/evals/sessions/{session_id}")).status_code == 200
    decided = await client.post(
        f"/evals/sessions/{session_id}/approvals",
        json={"decisions": {run.pending_approvals[0].call_id: {"decision": "approve"}}},
    )
    assert decode_run(decided.content).reply == "refunded 500 on A1"
    assert (await client.delete(f"/evals/sessions/{session_id}")).status_code == 204


@pytest.mark.parametrize("query", ["?view=full", "?since=0", "?since=0&view=full"])
async def test_a_query_parameter_is_a_422_as_on_a_turn(build: Build, query: str) -> None:
    """The route takes no query parameters; each is named as an unknown one on a turn."""
    _, client = build(refunds)
    session_id, run = await suspend(client)
    call_id = run.pending_approvals[0].call_id
    response = await client.post(
        f"/evals/sessions/{session_id}/approvals{query}",
        json={"decisions": {call_id: {"decision": "approve"}}},
    )
    assert response.status_code == 422
    assert problem_type(response) == "invalid-body"
    names = sorted(part.split("=")[0] for part in query[1:].split("&"))
    assert response.json()["errors"] == [
        {"path": f"query:{name}", "message": "unknown"} for name in names
    ]
    turn = await client.post(f"/evals/sessions/{session_id}/turns?view=full", json={"message": "x"})
    assert turn.json()["type"] == response.json()["type"]
    attached = decode_run((await client.get(f"/evals/sessions/{session_id}")).content)
    assert attached.pending_approvals == run.pending_approvals  # nothing was decided
