"""A real ``redis-server`` that fails while a turn is being stored (issue 39 item 1).

Killed (SIGKILL) with the turn's lease saved, as an AOF keeps it, and restarted: the
turn answered 503, so it was never acknowledged, and the lease that came back with Redis
is given back as never taken (the failed finish fences its token). The same key's retry
runs the turn and is stored once; it was a 409 ``session-busy`` for the lease's length,
then a 409 ``turn-lost`` for a turn that was never stored. Stopped (SIGSTOP) instead:
whichever of the queued finish and the fence Redis runs first, the retry answers the
turn, stored once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from evalport.protocol import ProblemType
from evalport.server import EvalAdapter, Limits
from evalport.server.stores import RedisStore
from serverkit import AUTH, TOKEN
from support.redis import RedisServer, running_redis, save_snapshot

pytestmark = pytest.mark.e2e


class Gate:
    """Holds the turn ``hi`` inside its agent until the test has broken Redis."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def agent(self, message: str, history: list[Any], ctx: Any) -> str:
        self.ran.append(message)
        if message == "hi" and not self.go.is_set():
            self.entered.set()
            await self.go.wait()
        return f"ok {message}"


@contextlib.asynccontextmanager
async def served(gate: Gate, server: RedisServer) -> AsyncIterator[httpx.AsyncClient]:
    store = RedisStore(server.url, timeout=1.0)
    # a lease far longer than Redis is away: it comes back with Redis, as in the issue
    limits = Limits(lease_ttl=30, turn_timeout=5)
    adapter = EvalAdapter(gate.agent, token=TOKEN, store=store, limits=limits)
    transport = httpx.ASGITransport(app=adapter.app())
    async with (
        contextlib.aclosing(adapter),
        httpx.AsyncClient(transport=transport, base_url="http://a.test", headers=AUTH) as client,
    ):
        yield client


@pytest.mark.parametrize("retried_on", ["the same replica", "another replica"])
async def test_a_retry_after_redis_died_during_the_finish_runs_the_turn_once(
    retried_on: str,
) -> None:
    gate = Gate()
    with running_redis() as server:
        async with served(gate, server) as client, served(gate, server) as elsewhere:
            session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
            turns = f"/evals/sessions/{session}/turns"
            keyed = {"Idempotency-Key": "k1"}
            assert (await client.post(turns, json={"message": "warm"})).status_code == 200
            first = asyncio.create_task(client.post(turns, json={"message": "hi"}, headers=keyed))
            await gate.entered.wait()
            save_snapshot(server)  # Redis comes back with this: the turn's lease taken
            assert server.process is not None
            server.process.kill()
            server.stop()
            gate.go.set()  # the turn ends and its finish finds Redis gone
            failed = await first
            assert failed.status_code == 503, failed.text
            assert failed.json()["type"] == ProblemType.STORE_UNAVAILABLE
            server.start()

            # here the retry fences the failed finish first; elsewhere it waits for the
            # key's holder until the fence gives the lease back
            retrying = client if retried_on == "the same replica" else elsewhere
            retried = await retrying.post(turns, json={"message": "hi"}, headers=keyed)
            assert retried.status_code == 200, retried.text
            assert retried.json()["run"]["reply"] == "ok hi"
            other = await client.post(turns, json={"message": "more"})
            assert other.status_code == 200, other.text
            stored = (await client.get(f"/evals/sessions/{session}")).json()["run"]
    assert stored["userMessages"] == ["warm", "hi", "more"]
    assert gate.ran == ["warm", "hi", "hi", "more"]  # the retry ran the unacknowledged turn


async def test_a_retry_after_redis_stalled_during_the_finish_answers_the_turn_stored_once() -> None:
    gate = Gate()
    with running_redis() as server:
        async with served(gate, server) as client:
            session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
            turns = f"/evals/sessions/{session}/turns"
            keyed = {"Idempotency-Key": "k1"}
            assert (await client.post(turns, json={"message": "warm"})).status_code == 200
            first = asyncio.create_task(client.post(turns, json={"message": "hi"}, headers=keyed))
            await gate.entered.wait()
            assert server.process is not None
            os.kill(server.process.pid, signal.SIGSTOP)
            try:
                gate.go.set()  # the turn ends and its finish waits for Redis, in vain
                failed = await first
            finally:
                os.kill(server.process.pid, signal.SIGCONT)
            assert failed.status_code == 503, failed.text

            retried = await client.post(turns, json={"message": "hi"}, headers=keyed)
            assert retried.status_code == 200, retried.text
            assert retried.json()["run"]["reply"] == "ok hi"
            other = await client.post(turns, json={"message": "more"})
            assert other.status_code == 200, other.text
            stored = (await client.get(f"/evals/sessions/{session}")).json()["run"]
    assert stored["userMessages"] == ["warm", "hi", "more"]  # the turn stored once
