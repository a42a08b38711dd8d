"""A write lost in Redis (a failover without WAIT, a snapshot restored) while two replicas
serve one session: the replica whose write was lost never continues its live agent on the
other replica's run (versions are unique write ids, never counts that can meet again)."""

from __future__ import annotations

import uuid

import httpx
import redis.asyncio as aioredis
from evalport.protocol import decode_run
from evalport.server import EvalAdapter
from evalport.server.stores import RedisStore
from serverkit import AUTH, TOKEN, echo_agent, open_session
from support.redis import RedisServer


async def test_a_lost_write_never_leaves_a_replica_on_a_stale_agent(
    redis_server: RedisServer,
) -> None:
    prefix = f"lw{uuid.uuid4().hex[:8]}:"
    adapters = [
        EvalAdapter(echo_agent, token=TOKEN, store=RedisStore(redis_server.url, prefix=prefix))
        for _ in "ab"
    ]
    a, b = (
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=adapter.app("")), base_url="http://t", headers=AUTH
        )
        for adapter in adapters
    )
    probe = aioredis.from_url(redis_server.url)
    try:
        s = await open_session(a)
        for message in ("t1", "t2"):
            turn = await a.post(f"/evals/sessions/{s}/turns?since=0", json={"message": message})
            assert turn.status_code == 200
        key = f"{prefix}s:{{{s}}}"
        snapshot, ttl = await probe.dump(key), await probe.pttl(key)
        lost = await a.post(f"/evals/sessions/{s}/turns?since=2", json={"message": "t3-on-A"})
        assert lost.status_code == 200
        await probe.restore(key, ttl, snapshot, replace=True)  # A's write is lost
        other = await b.post(f"/evals/sessions/{s}/turns?since=2", json={"message": "t3-on-B"})
        assert other.status_code == 200
        next_on_a = await a.post(f"/evals/sessions/{s}/turns?since=3", json={"message": "t4"})
        assert next_on_a.status_code == 200
        for client in (a, b):
            attached = await client.get(f"/evals/sessions/{s}")
            assert attached.status_code == 200, attached.text
            assert decode_run(attached.content).user_messages == ["t1", "t2", "t3-on-B", "t4"]
    finally:
        await probe.aclose()
        for client, adapter in zip((a, b), adapters, strict=True):
            await client.aclose()
            await adapter.aclose()
