"""A real ``redis-server`` out of memory (``maxmemory`` under ``noeviction``): whatever adds
data answers 503 ``store-unavailable`` and leaves nothing half written; attach and delete
still work, so a full Redis can be drained."""

from __future__ import annotations

import contextlib

import httpx
import pytest
import redis.asyncio
from evalport.protocol import ProblemType
from evalport.server import EvalAdapter
from evalport.server.stores import BeginTurn, RedisStore, StoreUnavailable
from serverkit import AUTH, TOKEN, echo_agent
from storekit import new
from support.redis import RedisServer, running_redis


async def _fill(server: RedisServer) -> None:
    """Make Redis out of memory: a limit below what it already uses, and no eviction."""
    async with redis.asyncio.Redis(port=server.port) as admin:
        await admin.config_set("maxmemory-policy", "noeviction")
        await admin.config_set("maxmemory", "1mb")  # an empty Redis uses about 1 MB already


async def test_a_full_redis_refuses_new_data_whole_and_still_reads_and_deletes() -> None:
    with running_redis() as server:
        store = RedisStore(server.url)
        try:
            assert await store.create(new("s1", run=b"run-0", ttl=30, limit=10))
            await _fill(server)
            for adding in (
                lambda: store.create(new("s2", run=b"run-0", ttl=30, limit=10)),
                lambda: store.begin_turn(
                    BeginTurn("s1", "t1", lease=5, ttl=30, key="k1", lost=b"x", keep=4)
                ),
            ):
                with pytest.raises(StoreUnavailable, match="out of memory"):
                    await adding()
            stored = await store.read("s1")
            assert stored is not None and stored.run == b"run-0" and stored.state == "idle"
            assert await store.read("s2") is None  # nothing of the refused create was kept
            assert await store.get_result("s1", "k1") is None  # nor of the refused turn
            assert await store.delete("s1")
        finally:
            await store.aclose()


async def test_the_service_answers_503_not_500_when_redis_is_full() -> None:
    with running_redis() as server:
        adapter = EvalAdapter(echo_agent, token=TOKEN, store=server.url)
        transport = httpx.ASGITransport(app=adapter.app())
        async with (
            contextlib.aclosing(adapter),
            httpx.AsyncClient(
                transport=transport, base_url="http://adapter.test", headers=AUTH
            ) as client,
        ):
            session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
            await _fill(server)
            for response in (
                await client.post("/evals/sessions", json={}),
                await client.post(f"/evals/sessions/{session}/turns", json={"message": "hi"}),
            ):
                assert response.status_code == 503, response.text
                assert response.json()["type"] == ProblemType.STORE_UNAVAILABLE
                assert "out of memory" in response.json()["detail"]
                assert "retry-after" in response.headers and "Traceback" not in response.text
            assert (await client.get(f"/evals/sessions/{session}")).status_code == 200
            assert (await client.delete(f"/evals/sessions/{session}")).status_code == 204
