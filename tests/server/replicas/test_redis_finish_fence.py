"""A real ``redis-server`` that fails while a turn is being stored (issue 39 item 1).

Killed (SIGKILL) with the turn's lease saved, as an AOF keeps it, and restarted: the
turn answered 503, so it was never acknowledged, and the lease that came back with Redis
is given back as never taken (the failed finish fences its token). The same key's retry
runs the turn and is stored once; it was a 409 ``session-busy`` for the lease's length,
then a 409 ``turn-lost`` for a turn that was never stored. Stopped (SIGSTOP) instead:
whichever of the queued finish and the fence Redis runs first, the retry answers the
turn, stored once. A retry waiting for its key's first attempt on another replica whose
poll took the lease unseen (its answer lost) fences it too, so the next retry runs the
turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from evalport.protocol import CreateSessionRequest, ProblemType
from evalport.protocol.runtime import SessionInfo, TurnContext
from evalport.server import EvalAdapter, Limits
from evalport.server._sessions import SessionManager
from evalport.server.stores import (
    BeginTurn,
    Finish,
    FinishTurn,
    Lease,
    RedisStore,
    StoreUnavailable,
    TurnStart,
)
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


# -- a retry's poll whose answer was lost ---------------------------------------------------


class Agent:
    """Counts the turns it really runs; ``slow:S`` takes S seconds."""

    ran: list[str] = []

    def __init__(self, info: SessionInfo) -> None:
        self.info = info

    async def turn(self, message: str, ctx: TurnContext) -> str:
        Agent.ran.append(message)
        if message.startswith("slow:"):
            await asyncio.sleep(float(message.split(":", 1)[1]))
        return f"ran {message}"


class Faulty(RedisStore):
    """A replica's Redis client that can fail one way: a finish that never reached Redis
    (``refuse_finish``), or a lease Redis gave whose answer was lost (``lose_lease``)."""

    refuse_finish = False
    lose_lease = False

    async def finish_turn(self, finish: FinishTurn) -> Finish:
        if self.refuse_finish:
            raise StoreUnavailable("Redis refused the connection (on purpose)")
        return await super().finish_turn(finish)

    async def begin_turn(self, begin: BeginTurn) -> TurnStart:
        start = await super().begin_turn(begin)
        if self.lose_lease and start.lease is Lease.ACQUIRED:
            raise StoreUnavailable("Redis ran the call, and its answer was lost (on purpose)")
        return start


async def test_a_waiting_retry_whose_poll_took_the_lease_unseen_fences_it(
    redis_server: RedisServer,
) -> None:
    Agent.ran = []
    prefix = f"w{uuid.uuid4().hex[:8]}:"
    limits = Limits(turn_timeout=5, lease_ttl=30)  # a lease that never lapses in the test
    a, b, c = (
        SessionManager(Agent, limits=limits, store=Faulty(redis_server.url, prefix=prefix))
        for _ in range(3)
    )
    try:
        session, _ = await a.create(CreateSessionRequest())
        first = asyncio.create_task(a.turns.turn(session, "slow:0.3", "K"))
        while "slow:0.3" not in Agent.ran:
            await asyncio.sleep(0.01)
        retry = asyncio.create_task(b.turns.turn(session, "slow:0.3", "K"))  # waits for A
        a.store.refuse_finish = True  # type: ignore[attr-defined]
        b.store.lose_lease = True  # type: ignore[attr-defined]
        with pytest.raises(StoreUnavailable):
            await first  # A's finish failed: it gives its lease back, no record
        with pytest.raises(StoreUnavailable):
            await retry  # B's poll took the lease, and B never heard it: B fences it
        again = await c.turns.turn(session, "slow:0.3", "K")  # was 409 turn-lost
        assert again.status == 200, again.body
        assert Agent.ran == ["slow:0.3", "slow:0.3"]
        assert json.loads(await c.attach(session))["run"]["userMessages"] == ["slow:0.3"]
    finally:
        for manager in (a, b, c):
            await manager.aclose()
