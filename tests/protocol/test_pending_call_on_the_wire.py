"""A call waiting for approval is requested, never executed, on the wire: a client that
knows nothing of approvals (Instructor PHP's, as ../shared/reference/instructor-wire.md
says it decodes a run) never reads it as run; evalport's own client still sees it pending."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import msgspec
from evalport.client import HttpTarget
from evalport.client._core._trajectory import Trajectory
from evalport.protocol import ApprovalDecision, decode_run
from evalport.server import EvalAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from support_agent import agent


def instructor_executions(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The executions Instructor's decoder builds from ``tools[]`` (its only source for tool
    assertions): every entry is an execution, failed when ``error`` is non-empty, else
    successful, even with no result and ``completedAt: null``."""
    return [
        {"name": entry["tool_call"]["name"], "failed": bool(entry.get("error"))}
        for entry in run.get("tools") or []
    ]


def called_tool(run: dict[str, Any], name: str) -> bool:  # Instructor's calledTool()
    return any(item["name"] == name for item in instructor_executions(run))


def no_failed_actions(run: dict[str, Any]) -> bool:  # Instructor's noFailedActions()
    return not any(item["failed"] for item in instructor_executions(run))


async def test_a_refund_waiting_for_approval_is_never_read_as_run() -> None:
    adapter = EvalAdapter(agent, token=None)
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as client:
        session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
        turns = f"/evals/sessions/{session}/turns"
        await client.post(turns, json={"message": "I want a refund for order A1049"})
        waiting = (await client.post(turns, json={"message": "yes"})).json()["run"]
        assert waiting["status"] == "in_progress"
        (pending,) = waiting["pendingApprovals"]
        assert pending["tool"] == "refund_order"
        assert not called_tool(waiting, "refund_order")  # requested, not executed
        for step in waiting["steps"]:
            assert all(e["name"] != "refund_order" for e in step["toolExecutions"])
        assert any(
            call["name"] == "refund_order"
            for step in waiting["steps"]
            for call in step["requestedToolCalls"]
        )
        # evalport's own client still sees the call, pending
        calls = Trajectory.of(decode_run(msgspec.json.encode(waiting))).calls_of("refund_order")
        assert [(call.executed, call.approval) for call in calls] == [(False, "pending")]

        decided = await client.post(
            f"/evals/sessions/{session}/approvals",
            json={"decisions": {pending["callId"]: {"decision": "approve"}}},
        )
        assert decided.status_code == 200, decided.text
        done = decided.json()["run"]
        assert done["status"] == "completed"
        assert called_tool(done, "refund_order") and no_failed_actions(done)
        (record,) = [t for t in done["tools"] if t["tool_call"]["name"] == "refund_order"]
        assert record["approval"]["state"] == "approved" and record["completedAt"]
    await adapter.aclose()


async def test_a_rejected_call_is_recorded_as_failed_once_decided() -> None:
    adapter = EvalAdapter(agent, token=None)
    transport = httpx.ASGITransport(app=adapter.app())
    async with HttpTarget("http://agent.test", transport=transport) as target:
        session = await target.open()
        await session.send("I want a refund for order A1049")
        waiting = await session.send("yes")
        (pending,) = waiting.run.pending_approvals
        turn = await session.decide({pending.call_id: ApprovalDecision(decision="reject")})
        run = msgspec.to_builtins(turn.run)
        assert called_tool(run, "refund_order") and not no_failed_actions(run)
        await session.close()
    await adapter.aclose()
