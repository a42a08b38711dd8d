"""A real ``redis-server`` stopped (SIGSTOP) while a turn asks for its lease: the turn
answers 503, and when Redis resumes and runs the queued call for a request that is gone,
no lease is left behind: the same key's retry runs the turn (it was a 409 session-busy,
then a 409 turn-lost, for a turn that never ran)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import httpx
from evalport.protocol import ProblemType
from evalport.server import EvalAdapter, Limits
from evalport.server.stores import RedisStore
from serverkit import AUTH, TOKEN
from support.redis import running_redis

RAN: list[str] = []


def counting_agent(message: str, history: list[object], ctx: object) -> str:
    RAN.append(message)
    return f"ok {message}"


async def test_a_turn_refused_while_redis_stalled_leaves_no_lease_when_it_resumes() -> None:
    RAN.clear()
    with running_redis() as server:
        assert server.process is not None
        store = RedisStore(server.url, timeout=1.0)  # (its scripts loaded by the first turn)
        adapter = EvalAdapter(counting_agent, token=TOKEN, store=store, limits=Limits(lease_ttl=10))
        transport = httpx.ASGITransport(app=adapter.app())
        async with (
            contextlib.aclosing(adapter),
            httpx.AsyncClient(
                transport=transport, base_url="http://a.test", headers=AUTH
            ) as client,
        ):
            session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
            turns = f"/evals/sessions/{session}/turns"
            keyed = {"Idempotency-Key": "k1"}
            assert (await client.post(turns, json={"message": "warm"})).status_code == 200
            os.kill(server.process.pid, signal.SIGSTOP)
            try:
                refused = await client.post(turns, json={"message": "hi"}, headers=keyed)
            finally:
                os.kill(server.process.pid, signal.SIGCONT)
            assert refused.status_code == 503, refused.text
            assert refused.json()["type"] == ProblemType.STORE_UNAVAILABLE
            await asyncio.sleep(1.0)  # Redis runs the queued call; the fence follows it
            retried = await client.post(turns, json={"message": "hi"}, headers=keyed)
            assert retried.status_code == 200, retried.text
            assert retried.json()["run"]["reply"] == "ok hi" and RAN == ["warm", "hi"]
            again = await client.post(turns, json={"message": "more"})
            assert again.status_code == 200, again.text
