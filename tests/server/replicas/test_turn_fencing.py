"""Replicas over one real Redis (managers in this process, each with its own store
client): a holder displaced from its lease stores nothing and answers what the store
says; a retry is turn-lost only when its key's holder died mid-turn (the store tells,
not timing), however late the retry comes; a holder that answered a problem leaves its
key free to run."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis
from evalport.protocol import AgentRun, CreateSessionRequest, Message
from evalport.protocol.runtime import SessionInfo, TurnContext
from evalport.server import Limits
from evalport.server._problems import HTTPProblem
from evalport.server._records import Outcome, fingerprint, replayed
from evalport.server._sessions import SessionManager
from evalport.server.stores import BeginTurn, RedisStore, StoreUnavailable, TurnStart
from storekit import finish
from support.redis import RedisServer

LEASE = 0.3
LOST = "urn:evalport:problem:turn-lost"


@dataclass
class World:
    ran: list[str] = field(default_factory=list)  # every message the agent really ran
    failing_restores: int = 0  # the next restores that fail (after a pause)


WORLD = World()


class Agent:
    def __init__(self, info: SessionInfo) -> None:
        self.info = info

    async def restore(self, history: list[Message], run: AgentRun) -> None:
        if WORLD.failing_restores:
            WORLD.failing_restores -= 1
            await asyncio.sleep(0.3)  # holding the lease meanwhile
            raise RuntimeError("cannot rebuild the agent")

    async def turn(self, message: str, ctx: TurnContext) -> str:
        WORLD.ran.append(message)
        if message.startswith("slow:"):
            await asyncio.sleep(float(message.split(":", 1)[1]))
        return f"ran {message}"


class Partitioned(RedisStore):
    """A replica's store client that loses Redis right after its next turn began."""

    cut = False
    dark = False

    async def begin_turn(self, *args: object, **kwargs: object) -> TurnStart:
        start = await super().begin_turn(*args, **kwargs)  # type: ignore[arg-type]
        self.dark = self.cut
        return start

    async def _run(self, *args: object, **kwargs: object) -> object:
        if self.dark:
            raise StoreUnavailable("Redis is unreachable from this replica (on purpose)")
        return await super()._run(*args, **kwargs)


@dataclass
class Cluster:
    a: SessionManager
    b: SessionManager
    c: SessionManager
    redis: aioredis.Redis
    prefix: str

    async def stored_messages(self, session: str) -> list[str]:
        run = json.loads(await self.a.attach(session))["run"]
        return list(run["userMessages"])


@pytest.fixture
async def cluster(redis_server: RedisServer) -> AsyncIterator[Cluster]:
    global WORLD
    WORLD = World()
    prefix = f"f{uuid.uuid4().hex[:8]}:"
    limits = Limits(turn_timeout=5, lease_ttl=LEASE)
    managers = [
        SessionManager(Agent, limits=limits, store=Partitioned(redis_server.url, prefix=prefix))
        for _ in range(3)
    ]
    plain = aioredis.Redis.from_url(redis_server.url)
    try:
        yield Cluster(*managers, redis=plain, prefix=prefix)
    finally:
        for manager in managers:
            manager.store.dark = False  # type: ignore[attr-defined]
            await manager.aclose()
        await plain.aclose()


def problem_type(outcome: Outcome) -> str:
    return str(json.loads(outcome.body)["type"])


async def test_a_holder_displaced_from_its_lease_stores_nothing_and_agrees_with_the_store(
    cluster: Cluster,
) -> None:
    session, _ = await cluster.a.create(CreateSessionRequest())
    first = asyncio.create_task(cluster.a.turns.turn(session, "slow:0.4", "K"))
    while "slow:0.4" not in WORLD.ran:
        await asyncio.sleep(0.01)
    # A stalls past its lease (as if its loop blocked): the lease lapses
    await cluster.redis.delete(f"{cluster.prefix}l:{{{session}}}")
    retry = await cluster.b.turns.turn(session, "slow:0.4", "K")  # finds the holder gone
    assert (retry.status, problem_type(retry)) == (409, LOST)
    other = await cluster.b.turns.turn(session, "other", "K2")  # B moves the session on
    assert other.status == 200
    answer = await first  # A's turn ends: its lease was taken, it stores nothing...
    assert (answer.status, problem_type(answer)) == (409, LOST)  # ...and agrees with K's record
    again = await cluster.c.turns.turn(session, "slow:0.4", "K")
    assert (again.status, problem_type(again)) == (409, LOST)
    assert await cluster.stored_messages(session) == ["other"]  # B's turn is not overwritten
    assert WORLD.ran == ["slow:0.4", "other"]
    # an unkeyed displaced holder cannot replay anything: 409 turn-lost, nothing stored
    unkeyed = asyncio.create_task(cluster.a.turns.turn(session, "slow:0.4", None))
    while WORLD.ran.count("slow:0.4") < 2:
        await asyncio.sleep(0.01)
    await cluster.redis.delete(f"{cluster.prefix}l:{{{session}}}")
    assert (await cluster.b.turns.turn(session, "third", None)).status == 200
    with pytest.raises(HTTPProblem) as lost:
        await unkeyed
    assert lost.value.status == 409 and lost.value.problem_type == LOST
    assert await cluster.stored_messages(session) == ["other", "third"]


async def test_a_retry_racing_a_holder_that_answered_a_problem_runs_the_turn(
    cluster: Cluster,
) -> None:
    session, _ = await cluster.a.create(CreateSessionRequest())
    WORLD.failing_restores = 1  # B cannot rebuild the agent: its turn is a 500, no record
    holder = asyncio.create_task(cluster.b.turns.turn(session, "pay", "K"))
    await asyncio.sleep(0.1)  # B holds the lease under K, restoring
    retry = asyncio.create_task(cluster.c.turns.turn(session, "pay", "K"))  # waits for B
    with pytest.raises(RuntimeError, match="cannot rebuild"):
        await holder
    outcome = await retry  # B released without a record: not lost, the turn runs once
    assert outcome.status == 200, outcome.body
    assert WORLD.ran == ["pay"]
    replay = await cluster.a.turns.turn(session, "pay", "K")
    assert replay == outcome


async def test_a_retry_after_a_dead_holders_lease_lapsed_is_turn_lost(cluster: Cluster) -> None:
    session, _ = await cluster.a.create(CreateSessionRequest())
    store = cluster.b.store
    assert isinstance(store, Partitioned)
    store.cut = True  # B loses Redis right after it took the lease under K
    with pytest.raises(StoreUnavailable):
        await cluster.b.turns.turn(session, "pay", "K")  # the agent ran; nothing could be stored
    assert WORLD.ran == ["pay"]
    await asyncio.sleep(LEASE + 0.3)  # long after B's lease lapsed, the client retries
    late = await cluster.c.turns.turn(session, "pay", "K")
    assert (late.status, problem_type(late)) == (409, LOST)
    assert WORLD.ran == ["pay"]  # not run a second time
    assert await cluster.stored_messages(session) == []
    # the turn-lost record is bound to the key's message, like any record
    stored = await cluster.a.store.get_result(session, "K")
    assert stored is not None and replayed(stored, fingerprint("pay")) == late


async def test_a_suspended_session_takes_no_turn_and_keeps_its_approvals_open(
    cluster: Cluster,
) -> None:
    """BEGIN_TURN takes no lease of a suspended session, so the holder's approvals are
    never refused because a refused turn elsewhere held it for a moment."""
    session, _ = await cluster.a.create(CreateSessionRequest())
    start = await cluster.b.store.begin_turn(
        BeginTurn(  # type: ignore[attr-defined]
            session, "t", lease=5, ttl=30, key="K"
        )
    )
    assert start.session is not None
    await cluster.b.store.finish_turn(
        finish(  # type: ignore[attr-defined]
            session, "t", run=start.session.run, state="suspended", ttl=30
        )
    )
    refused = await cluster.c.store.begin_turn(
        BeginTurn(  # type: ignore[attr-defined]
            session, "u", lease=5, ttl=30, key="K2"
        )
    )
    assert refused.suspended and refused.session is None
    assert await cluster.redis.get(f"{cluster.prefix}l:{{{session}}}") is None  # no lease taken
    with pytest.raises(HTTPProblem) as caught:
        await cluster.c.turns.turn(session, "hello", "K3")
    assert caught.value.problem_type == "urn:evalport:problem:session-suspended"
