"""Through the adapter, every turn runs in its own task, never on the request's task.

(``httpx.ASGITransport`` runs the app on the caller's task, so the test's own task is the
request's task here.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import httpx
import pytest
from evalport.protocol.runtime import TurnContext
from evalport.server import Limits
from serverkit import Build, open_session


async def task_group_agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    parts: list[str] = []

    async def part(text: str) -> None:
        await anyio.sleep(0)
        parts.append(text)

    async with anyio.create_task_group() as group:
        group.start_soon(part, message)
        group.start_soon(part, message.upper())
    return "+".join(sorted(parts))


async def own_timeout_agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(5)
    except TimeoutError:
        return "gave up on my own"
    return "slept"


async def turn(client: httpx.AsyncClient, session_id: str, message: str) -> dict[str, Any]:
    response = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": message})
    assert response.status_code == 200, response.text
    run: dict[str, Any] = response.json()["run"]
    return run


async def test_an_anyio_task_group_in_an_agent_works_through_the_server(build: Build) -> None:
    _, client = build(task_group_agent)
    session_id = await open_session(client)
    run = await turn(client, session_id, "x")
    assert (run["status"], run["reply"]) == ("completed", "X+x"), run.get("errors")
    run = await turn(client, session_id, "y")
    assert (run["status"], run["reply"]) == ("completed", "Y+y"), run.get("errors")


async def test_a_timeout_inside_the_agent_does_not_cancel_the_request(build: Build) -> None:
    _, client = build(own_timeout_agent)
    session_id = await open_session(client)
    run = await turn(client, session_id, "go")
    assert (run["status"], run["reply"]) == ("completed", "gave up on my own")
    await asyncio.sleep(0.02)  # the request's task was not cancelled behind its back
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_the_agent_never_runs_on_the_request_task(build: Build) -> None:
    seen: list[asyncio.Task[Any] | None] = []

    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        seen.append(asyncio.current_task())
        return "ok"

    _, client = build(agent)
    session_id = await open_session(client)
    await turn(client, session_id, "one")
    await turn(client, session_id, "two")
    assert len(seen) == 2 and None not in seen
    assert asyncio.current_task() not in seen
    assert seen[0] is not seen[1]


class Gate:
    """An agent that waits for the test to let each turn finish."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.turns = 0

    async def __call__(self, message: str, history: list[Any], ctx: TurnContext) -> str:
        self.turns += 1
        self.started.set()
        await self.go.wait()
        return f"done {message}"


async def cancel_mid_turn(
    client: httpx.AsyncClient, gate: Gate, session_id: str, headers: dict[str, str]
) -> None:
    request = asyncio.create_task(
        client.post(
            f"/evals/sessions/{session_id}/turns", json={"message": "slow"}, headers=headers
        )
    )
    await asyncio.wait_for(gate.started.wait(), 1)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request


@pytest.mark.parametrize("key", [None, "k-1"])
async def test_a_cancelled_request_leaves_its_turn_running_and_recorded(
    build: Build, key: str | None
) -> None:
    gate = Gate()
    _, client = build(gate)
    session_id = await open_session(client)
    headers = {"Idempotency-Key": key} if key else {}
    await cancel_mid_turn(client, gate, session_id, headers)
    busy = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "other"})
    assert busy.status_code == 409  # the turn still holds the session
    if key:  # a repeat of the key waits for the running turn instead of running another
        repeat = asyncio.create_task(
            client.post(
                f"/evals/sessions/{session_id}/turns", json={"message": "slow"}, headers=headers
            )
        )
        await asyncio.sleep(0.01)
        assert not repeat.done()
    gate.go.set()
    if key:
        answer = await repeat
        assert answer.status_code == 200
        assert answer.json()["run"]["reply"] == "done slow"
    for _ in range(100):  # the request's job finishes in a task of its own
        run = (await client.get(f"/evals/sessions/{session_id}")).json()["run"]
        if run["status"] == "completed":
            break
        await asyncio.sleep(0.01)
    assert (run["status"], run["reply"], run["turns"]) == ("completed", "done slow", 1)
    after = await turn(client, session_id, "next")  # the lease was released
    assert (after["reply"], after["turns"], gate.turns) == ("done next", 2, 2)


async def test_a_cancelled_request_keeps_its_turn_timeout(build: Build) -> None:
    gate = Gate()
    _, client = build(gate, limits=Limits(turn_timeout=0.2))
    session_id = await open_session(client)
    await cancel_mid_turn(client, gate, session_id, {})
    for _ in range(200):
        run = (await client.get(f"/evals/sessions/{session_id}")).json()["run"]
        if run["status"] == "failed":  # stored by the job that followed the turn
            break
        await asyncio.sleep(0.01)
    assert run["status"] == "failed"
    assert run["stopSignal"]["reason"] == "time_limit"
    gate.go.set()
    after = await turn(client, session_id, "next")
    assert (after["status"], after["turns"]) == ("completed", 2)
