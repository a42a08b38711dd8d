"""A keyed turn retried on another replica while its first attempt still runs: the retry
waits for that attempt's outcome (two real ``evalport serve`` processes over one real
Redis), a different key is refused at once, and a retry whose holder died is turn-lost."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import redis
from support.redis import RedisServer
from support.replicas import Replica, running_replicas

pytestmark = pytest.mark.e2e

TOKEN = "replica-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT = str(Path(__file__).with_name("agents.py")) + ":agent"
BUSY = "urn:evalport:problem:session-busy"
SLOW = "slow:1.0"  # long enough for a retry to meet it on the other replica


def database(redis_server: RedisServer, number: int) -> str:
    # Databases of their own, so that other modules' sessions never count here.
    return redis_server.url.rsplit("/", 1)[0] + f"/{number}"


class Cluster:
    """Replicas A and B and the file their agent appends each turn it runs to."""

    def __init__(self, replicas: list[Replica], effects: Path, store: str) -> None:
        self.a, self.b = replicas
        self.effects = effects
        self.store = store

    def ran(self, session: str) -> list[str]:
        """The messages the agent really ran for ``session`` (on any replica)."""
        if not self.effects.exists():
            return []
        lines = self.effects.read_text().splitlines()
        return [line.split("\t", 1)[1] for line in lines if line.startswith(session + "\t")]

    async def started(self, session: str, count: int = 1) -> None:
        """Wait until the agent has begun ``count`` turns of ``session``."""
        deadline = time.monotonic() + 5
        while len(self.ran(session)) < count:
            assert time.monotonic() < deadline, "the agent never started the turn"
            await asyncio.sleep(0.01)


@contextlib.contextmanager
def cluster(redis_server: RedisServer, folder: Path, number: int) -> Iterator[Cluster]:
    effects = folder / "effects.log"
    store = database(redis_server, number)
    options = ["--turn-timeout", "5", "--session-ttl", "30"]
    with running_replicas(
        AGENT, store=store, token=TOKEN, options=options, env={"EFFECTS": str(effects)}
    ) as started:
        yield Cluster(started, effects, store)


@pytest.fixture(scope="module")
def replicas(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster(redis_server, tmp_path_factory.mktemp("same-key"), 7) as started:
        yield started


@contextlib.asynccontextmanager
async def clients(replicas: Cluster) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    async with (
        httpx.AsyncClient(base_url=replicas.a.url, headers=AUTH, timeout=10) as on_a,
        httpx.AsyncClient(base_url=replicas.b.url, headers=AUTH, timeout=10) as on_b,
    ):
        yield on_a, on_b


async def open_session(http: httpx.AsyncClient) -> str:
    response = await http.post("/evals/sessions", json={"caseId": "same-key"})
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


async def turn(
    http: httpx.AsyncClient, session: str, message: str, key: str | None = None
) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return await http.post(
        f"/evals/sessions/{session}/turns", json={"message": message}, headers=headers
    )


async def test_a_retry_on_b_answers_the_first_attempts_outcome_from_a(replicas: Cluster) -> None:
    async with clients(replicas) as (on_a, on_b):
        session = await open_session(on_a)
        key = str(uuid.uuid4())
        first = asyncio.create_task(turn(on_a, session, SLOW, key))
        await replicas.started(session)
        retry = await turn(on_b, session, SLOW, key)
        original = await first
        assert original.status_code == 200, original.text
        assert retry.status_code == 200, retry.text
        assert retry.content == original.content
        assert retry.json()["run"]["reply"] == f"{SLOW} #1 on A history=0"
        assert replicas.ran(session) == [SLOW]  # the agent ran once
        # the session moves on normally from there, on either replica
        after = await turn(on_b, session, "next", str(uuid.uuid4()))
        assert after.json()["run"]["reply"] == "next #2 on B restored history=2"


async def test_another_key_on_b_is_refused_at_once_while_the_same_key_waits(
    replicas: Cluster,
) -> None:
    async with clients(replicas) as (on_a, on_b):
        session = await open_session(on_a)
        key = str(uuid.uuid4())
        first = asyncio.create_task(turn(on_a, session, SLOW, key))
        await replicas.started(session)
        retry = asyncio.create_task(turn(on_b, session, SLOW, key))
        began = time.monotonic()
        other = await turn(on_b, session, "other", str(uuid.uuid4()))
        unkeyed = await turn(on_b, session, "unkeyed")
        assert time.monotonic() - began < 0.5  # not held back by the waiting retry
        for refused in (other, unkeyed):
            assert refused.status_code == 409, refused.text
            assert refused.json()["type"] == BUSY
        assert not retry.done()  # the retry of the same key still waits for A
        original, replayed = await first, await retry
        assert (original.status_code, replayed.status_code) == (200, 200), replayed.text
        assert replayed.content == original.content
        assert replicas.ran(session) == [SLOW]


async def test_a_retry_whose_holder_died_is_turn_lost_and_not_run_again(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    with cluster(redis_server, tmp_path, 8) as replicas:
        async with clients(replicas) as (on_a, on_b):
            session = await open_session(on_a)
            key = str(uuid.uuid4())
            first = asyncio.create_task(turn(on_a, session, SLOW, key))
            await replicas.started(session)
            retry = asyncio.create_task(turn(on_b, session, SLOW, key))
            await asyncio.sleep(0.3)
            assert not retry.done()  # waiting for A
            replicas.a.process.kill()  # A dies mid-turn: nothing recorded, lease kept
            replicas.a.process.wait(10)
            with pytest.raises(httpx.TransportError):
                await first
            # the dead lease would lapse within lease_ttl (15 s by default): expire it now
            with redis.Redis.from_url(replicas.store) as probe:
                assert probe.delete(f"evalport:l:{{{session}}}") == 1
            answer = await retry
            assert answer.status_code == 409, answer.text
            assert answer.json()["type"] == "urn:evalport:problem:turn-lost"
            assert replicas.ran(session) == [SLOW]  # not run a second time
            again = await turn(on_b, session, SLOW, key)  # recorded under the key
            assert (again.status_code, again.content) == (409, answer.content)
            fresh = await turn(on_b, session, SLOW, str(uuid.uuid4()))  # a new key runs it
            assert fresh.status_code == 200, fresh.text
            assert replicas.ran(session) == [SLOW, SLOW]


async def test_a_stream_dropped_on_a_is_resumed_on_b_from_the_store(replicas: Cluster) -> None:
    async with clients(replicas) as (on_a, on_b):
        session = await open_session(on_a)
        key = str(uuid.uuid4())
        path = f"/evals/sessions/{session}/turns"
        headers = {"Accept": "text/event-stream", "Idempotency-Key": key}
        last = ""
        async with on_a.stream("POST", path, json={"message": SLOW}, headers=headers) as cut:
            async for line in cut.aiter_lines():
                if line.startswith("id: "):
                    last = line[4:]
                    break  # A's connection drops mid-turn
        assert last == "1"
        resumed = await on_b.post(
            path, json={"message": SLOW}, headers={**headers, "Last-Event-ID": last}
        )
        assert resumed.status_code == 200
        assert resumed.headers["content-type"].startswith("text/event-stream")
        blocks = [block for block in resumed.text.split("\n\n") if block and block[0] != ":"]
        assert len(blocks) == 1 and blocks[0].startswith("event: result\ndata: ")
        plain = await turn(on_a, session, SLOW, key)  # the record, as A stored it
        assert blocks[0].removeprefix("event: result\ndata: ").encode() == plain.content
        assert plain.json()["run"]["reply"] == f"{SLOW} #1 on A history=0"
        assert replicas.ran(session) == [SLOW]  # the agent ran once
