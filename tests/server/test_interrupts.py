"""Interrupts on the wire: a turn that asks a question suspends, the approvals call answers
it, and every wrong answer is a problem with the right status."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from evalport.protocol import INTERRUPTS_CAPABILITY, Message, TracePolicy, decode_run, digest
from evalport.protocol.runtime import TurnContext, tool
from serverkit import Build, open_session


@tool(approval=True)
async def refund(order_id: str) -> str:
    return f"refunded {order_id}"


async def shop(message: str, history: list[Message], ctx: TurnContext) -> str:
    """'shirt' asks for a size; 'both' asks for a size while a refund waits for approval;
    'sync' asks from a sync helper's thread."""
    if message == "both":
        size, done = await asyncio.gather(
            ctx.interrupt("choice", {"question": "Which size?"}), refund("A1")
        )
        return f"{done}; size {size}"
    if message == "sync":
        size = await asyncio.to_thread(ctx.interrupt_sync, "choice", ["S", "M"])
        return f"size {size}"
    size = await ctx.interrupt("choice", {"question": "Which size?", "options": ["S", "M"]})
    if size == "none":
        return "no shirt then"
    detail = await ctx.interrupt("form", {"fields": ["name"]})
    return f"size {size} for {detail['name']}"


def problem(response: httpx.Response) -> tuple[int, str]:
    assert response.headers["content-type"] == "application/problem+json"
    return response.status_code, str(response.json()["type"]).rsplit(":", 1)[1]


async def ask(client: httpx.AsyncClient, message: str = "shirt") -> tuple[str, Any]:
    session_id = await open_session(client)
    response = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": message})
    assert response.status_code == 200, response.text
    return session_id, decode_run(response.content)


def answer(value: Any) -> dict[str, Any]:
    return {"decision": "answer", "answer": value}


async def test_health_lists_the_capability(build: Build) -> None:
    _, client = build(shop)
    assert INTERRUPTS_CAPABILITY == "interrupts"
    assert INTERRUPTS_CAPABILITY in (await client.get("/health")).json()["capabilities"]
    _, client = build(shop, approvals=False)
    assert INTERRUPTS_CAPABILITY not in (await client.get("/health")).json()["capabilities"]


async def test_a_question_suspends_and_each_answer_reaches_the_agent(build: Build) -> None:
    _, client = build(shop)
    session_id, run = await ask(client)
    assert run.status == "in_progress" and run.pending_approvals == []
    (asked,) = run.pending_interrupts
    assert (asked.kind, asked.payload, asked.turn) == (
        "choice",
        {"question": "Which size?", "options": ["S", "M"]},
        1,
    )
    assert asked.id and asked.requested_at
    url = f"/evals/sessions/{session_id}/approvals"
    response = await client.post(url, json={"decisions": {asked.id: answer("M")}})
    assert response.status_code == 200, response.text
    run = decode_run(response.content)
    (form,) = run.pending_interrupts
    assert form.kind == "form" and form.id != asked.id
    response = await client.post(url, json={"decisions": {form.id: answer({"name": "Ada"})}})
    run = decode_run(response.content)
    assert (run.status, run.reply, run.pending_interrupts) == ("completed", "size M for Ada", [])
    assert [(i.kind, i.answer, i.turn) for i in run.interrupts] == [
        ("choice", "M", 1),
        ("form", {"name": "Ada"}, 1),
    ]
    assert all(i.answered_at for i in run.interrupts)
    # answering again: nothing is pending any more
    again = await client.post(url, json={"decisions": {form.id: answer({"name": "Ada"})}})
    assert problem(again) == (409, "not-suspended")


async def test_wrong_answers_are_problems_and_resume_nothing(build: Build) -> None:
    _, client = build(shop)
    session_id, run = await ask(client, "both")
    (asked,) = run.pending_interrupts
    (pending,) = run.pending_approvals
    url = f"/evals/sessions/{session_id}/approvals"
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({asked.id: answer("M")}, [f'$.decisions["{pending.call_id}"]']),  # approval left out
        (
            {asked.id: answer("M"), pending.call_id: {"decision": "approve"}, "nope": answer(1)},
            ['$.decisions["nope"]'],
        ),
        (
            {asked.id: {"decision": "approve"}, pending.call_id: {"decision": "approve"}},
            [f'$.decisions["{asked.id}"].decision'],
        ),
        (
            {asked.id: answer("M"), pending.call_id: answer("yes")},
            [f'$.decisions["{pending.call_id}"].decision'],
        ),
    ]
    for decisions, paths in cases:
        response = await client.post(url, json={"decisions": decisions})
        assert problem(response) == (422, "invalid-body"), decisions
        assert [e["path"] for e in response.json()["errors"]] == paths
    bad_shape = await client.post(url, json={"decisions": {asked.id: {"decision": "maybe"}}})
    assert problem(bad_shape) == (422, "invalid-body")
    # an answer decision needs its answer; an approval takes none
    approve = {"decision": "approve"}
    for decisions, at in (
        ({asked.id: {"decision": "answer"}, pending.call_id: approve}, asked.id),
        ({asked.id: answer("M"), pending.call_id: {**approve, "answer": "M"}}, pending.call_id),
    ):
        response = await client.post(url, json={"decisions": decisions})
        assert problem(response) == (422, "invalid-body"), decisions
        assert [e["path"] for e in response.json()["errors"]] == [f'$.decisions["{at}"]']
        assert "answer" in response.json()["errors"][0]["message"]
    turn = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "hi"})
    assert problem(turn) == (409, "session-suspended")
    assert asked.id in turn.json()["detail"]
    # still suspended on both: one call settles the approval and the answer together
    response = await client.post(
        url, json={"decisions": {asked.id: answer("S"), pending.call_id: {"decision": "approve"}}}
    )
    run = decode_run(response.content)
    assert (run.status, run.reply) == ("completed", "refunded A1; size S")


async def test_a_sync_agent_asks_from_its_thread(build: Build) -> None:
    _, client = build(shop)
    session_id, run = await ask(client, "sync")
    (asked,) = run.pending_interrupts
    assert asked.payload == ["S", "M"]
    response = await client.post(
        f"/evals/sessions/{session_id}/approvals", json={"decisions": {asked.id: answer("S")}}
    )
    assert decode_run(response.content).reply == "size S"


async def test_a_server_policy_digests_payloads_and_answers(build: Build) -> None:
    _, client = build(shop, policy=TracePolicy.safe())
    session_id, run = await ask(client)
    (asked,) = run.pending_interrupts
    assert asked.payload == {"question": digest("Which size?"), "options": digest(["S", "M"])}
    response = await client.post(
        f"/evals/sessions/{session_id}/approvals", json={"decisions": {asked.id: answer("none")}}
    )
    run = decode_run(response.content)
    assert run.reply == "no shirt then" and run.interrupts[0].answer == digest("none")
