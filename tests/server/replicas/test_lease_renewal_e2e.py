"""Short turn leases, renewed by their holder, between real uvicorn replicas over a real
Redis: a live replica keeps its lease through a turn many times longer than the lease,
and one killed mid-turn frees its sessions within one lease."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from support.redis import RedisServer
from support.replicas import running_replicas

pytestmark = pytest.mark.e2e

TOKEN = "lease-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BUSY = "urn:evalport:problem:session-busy"
AGENT = str(Path(__file__).with_name("agents.py")) + ":agent"


def short_lease_replicas(store: str, lease_ttl: float, effects: Path) -> Any:
    """Two ``evalport serve`` replicas over ``store`` whose turn leases last ``lease_ttl`` s."""
    options = ["--lease-ttl", str(lease_ttl), "--turn-timeout", "10"]
    return running_replicas(
        AGENT, store=store, token=TOKEN, options=options, env={"EFFECTS": str(effects)}
    )


def database(redis_server: RedisServer, number: int) -> str:
    url = redis_server.url.rsplit("/", 1)[0] + f"/{number}"
    with redis.Redis.from_url(url) as plain:
        plain.flushdb()
    return url


def ran(effects: Path, session: str) -> list[str]:
    if not effects.exists():
        return []
    lines = effects.read_text().splitlines()
    return [line.split("\t", 1)[1] for line in lines if line.startswith(session + "\t")]


async def started(effects: Path, session: str, count: int, within: float = 5.0) -> float:
    """Wait until the agent has begun ``count`` turns of ``session``; when it did."""
    deadline = time.monotonic() + within
    while len(ran(effects, session)) < count:
        assert time.monotonic() < deadline, f"the agent did not start turn {count} in time"
        await asyncio.sleep(0.01)
    return time.monotonic()


async def open_session(http: httpx.AsyncClient) -> str:
    response = await http.post("/evals/sessions", json={"caseId": "lease"})
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


async def turn(
    http: httpx.AsyncClient, session: str, message: str, key: str | None = None
) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return await http.post(
        f"/evals/sessions/{session}/turns", json={"message": message}, headers=headers
    )


async def test_a_turn_longer_than_its_lease_keeps_it_on_a_live_replica(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.log"
    store = database(redis_server, 9)
    with short_lease_replicas(store, 0.6, effects) as (a, b):
        async with (
            httpx.AsyncClient(base_url=a.url, headers=AUTH, timeout=10) as on_a,
            httpx.AsyncClient(base_url=b.url, headers=AUTH, timeout=10) as on_b,
        ):
            session = await open_session(on_a)
            key = str(uuid.uuid4())
            first = asyncio.create_task(turn(on_a, session, "slow:2", key))
            await started(effects, session, 1)
            retry = asyncio.create_task(turn(on_b, session, "slow:2", key))
            refusals = 0
            while not first.done():  # over three leases: another key is refused throughout
                other = await turn(on_b, session, "other", str(uuid.uuid4()))
                if first.done() and other.status_code == 200:
                    break  # the turn ended between the check and this request
                assert other.status_code == 409, other.text
                assert other.json()["type"] == BUSY
                refusals += 1
                await asyncio.sleep(0.15)
            assert refusals >= 8
            original, replayed = await first, await retry
            assert original.status_code == 200, original.text
            assert replayed.status_code == 200, replayed.text
            assert replayed.content == original.content  # the first attempt's response
            assert original.json()["run"]["reply"] == "slow:2 #1 on A history=0"
            assert ran(effects, session)[0] == "slow:2"
            assert ran(effects, session).count("slow:2") == 1  # the agent ran it once
            with redis.Redis.from_url(store) as probe:
                assert probe.exists(f"evalport:l:{{{session}}}") == 0  # released at the end


async def test_a_replica_killed_mid_turn_frees_its_sessions_within_one_lease(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    lease_ttl = 1.0
    effects = tmp_path / "effects.log"
    with short_lease_replicas(database(redis_server, 10), lease_ttl, effects) as (a, b):
        async with (
            httpx.AsyncClient(base_url=a.url, headers=AUTH, timeout=10) as on_a,
            httpx.AsyncClient(base_url=b.url, headers=AUTH, timeout=10) as on_b,
        ):
            retried, other = await open_session(on_a), await open_session(on_a)
            key = str(uuid.uuid4())
            first = asyncio.create_task(turn(on_a, retried, "slow:1", key))
            doomed = asyncio.create_task(turn(on_a, other, "slow:5"))
            await started(effects, retried, 1)
            await started(effects, other, 1)
            retry = asyncio.create_task(turn(on_b, retried, "slow:1", key))
            await asyncio.sleep(0.5)
            assert not retry.done()  # waiting for A, whose renewed lease holds
            a.process.kill()  # SIGKILL mid-turn: no record, no release, no more renewals
            a.process.wait(10)
            killed = time.monotonic()
            for attempt in (first, doomed):
                with pytest.raises(httpx.TransportError):
                    await attempt
            # another key on the other session is accepted once the dead lease lapsed
            while (late := await turn(on_b, other, "next", str(uuid.uuid4()))).status_code == 409:
                assert time.monotonic() - killed < lease_ttl + 1.0, "the lease outlived A"
                await asyncio.sleep(0.05)
            assert late.status_code == 200, late.text
            assert late.json()["run"]["reply"] == "next #1 on B restored history=0"
            # the keyed retry learns, within the lease and a poll or two, that its first
            # attempt was lost; the turn is not run again
            answer = await retry
            assert time.monotonic() - killed < lease_ttl + 1.0
            assert answer.status_code == 409, answer.text
            assert answer.json()["type"] == "urn:evalport:problem:turn-lost"
            assert ran(effects, retried) == ["slow:1"]
