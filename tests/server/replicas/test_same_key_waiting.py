"""How long and how a keyed turn waits for its key's holder on another replica (a
``SessionManager`` over a real Redis; the other replica's turn is played by a second
store object that takes the lease under the same key and then neither finishes nor dies)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from evalport.protocol import CreateSessionRequest, Message, ProblemType
from evalport.protocol.runtime import TurnContext
from evalport.server import Limits
from evalport.server._problems import HTTPProblem
from evalport.server._records import Outcome, fingerprint, idempotency_record
from evalport.server._sessions import SessionManager
from evalport.server.stores import BeginTurn, Lease, RedisStore, TurnStart
from storekit import finish
from support.redis import RedisServer

SHORT = 0.3  # lease_ttl: the wait's bound (2 x turn timeout 0.2 s + lease) is quick to reach
LONG = 30.0  # a lease that outlasts the test, so only a release can free it


class Answering(RedisStore):
    """The Redis store; with ``late`` set, ``begin_turn`` answers 0.3 s after Redis did."""

    late = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ran = asyncio.Event()

    async def begin_turn(self, *args: Any, **kwargs: Any) -> TurnStart:
        start = await super().begin_turn(*args, **kwargs)
        if self.late:
            self.ran.set()
            await asyncio.sleep(0.3)
        return start


@dataclass
class Setup:
    manager: SessionManager
    store: Answering
    elsewhere: RedisStore  # the other replica's view of the same keys
    session: str
    calls: list[str]

    async def hold(self, key: str, message: str = "pay") -> None:
        """The other replica's turn takes the lease under ``key`` and keeps it."""
        start = await self.elsewhere.begin_turn(
            BeginTurn(self.session, "other", lease=30, ttl=30, key=key)
        )
        assert start.lease is Lease.ACQUIRED


@pytest.fixture
async def setup(redis_server: RedisServer, request: pytest.FixtureRequest) -> AsyncIterator[Setup]:
    calls: list[str] = []

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        calls.append(message)
        return f"ran {message}"

    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = Answering(redis_server.url, prefix=prefix)
    elsewhere = RedisStore(redis_server.url, prefix=prefix)
    lease_ttl: float = getattr(request, "param", SHORT)
    manager = SessionManager(
        agent, limits=Limits(turn_timeout=0.2, lease_ttl=lease_ttl), store=store
    )
    try:
        session, _ = await manager.create(CreateSessionRequest())
        yield Setup(manager, store, elsewhere, session, calls)
    finally:
        await manager.aclose()
        await elsewhere.aclose()


async def test_the_wait_ends_with_409_after_the_turn_timeout_and_the_lease(
    setup: Setup,
) -> None:
    await setup.hold("k1")
    began = time.monotonic()
    with pytest.raises(HTTPProblem) as refused:
        await setup.manager.turns.turn(setup.session, "pay", "k1")
    waited = time.monotonic() - began
    assert refused.value.problem_type == ProblemType.SESSION_BUSY
    # the holder's turn (0.2 s) + its lease after a last renewal (0.3 s)
    assert 0.45 <= waited < 1.5, waited
    assert setup.calls == []


async def test_a_cancelled_wait_cancels_only_the_waiting(setup: Setup) -> None:
    await setup.hold("k1")
    waiting = asyncio.create_task(setup.manager.turns.turn(setup.session, "pay", "k1"))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # the holder is untouched: it still holds the lease, and finishes its turn
    busy = await setup.elsewhere.begin_turn(BeginTurn(setup.session, "third", lease=5, ttl=30))
    assert busy.lease is Lease.BUSY
    answer = idempotency_record(fingerprint("pay"), Outcome(status=200, body=b"{}"))
    held = await setup.elsewhere.read(setup.session)
    assert held is not None
    await setup.elsewhere.finish_turn(finish(
        setup.session, "other", run=held.run, state="idle", ttl=30, key="k1",
        record=answer, keep=8,
    ))  # fmt: skip
    replayed = await setup.manager.turns.turn(setup.session, "pay", "k1")
    assert (replayed.status, replayed.body) == (200, b"{}")
    assert setup.calls == []


@pytest.mark.parametrize("setup", [LONG], indirect=True)
async def test_a_lease_taken_by_a_poll_whose_request_went_away_goes_back(setup: Setup) -> None:
    await setup.hold("k1")
    waiting = asyncio.create_task(setup.manager.turns.turn(setup.session, "pay", "k1"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    setup.store.late = True
    await setup.elsewhere.release(setup.session, "other")  # the holder ends, no record
    await setup.store.ran.wait()  # a poll took the lease; its answer is on the way
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    deadline = time.monotonic() + 1  # the poll answers within 0.3 s; the lease is 30 s
    while (
        await setup.elsewhere.begin_turn(BeginTurn(setup.session, "next", lease=5, ttl=30))
    ).lease is not Lease.ACQUIRED:
        assert time.monotonic() < deadline, "the lease the cancelled poll took stayed held"
        await asyncio.sleep(0.05)
    assert setup.calls == []


@pytest.mark.parametrize("setup", [LONG], indirect=True)
async def test_a_draining_replica_stops_waiting_with_503(setup: Setup) -> None:
    await setup.hold("k1")
    waiting = asyncio.create_task(setup.manager.turns.turn(setup.session, "pay", "k1"))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    began = time.monotonic()
    setup.manager.drain()  # the server is shutting down: retry elsewhere
    with pytest.raises(HTTPProblem) as draining:
        await waiting
    assert time.monotonic() - began < 0.3  # the next poll at the latest
    assert draining.value.problem_type == ProblemType.DRAINING
    assert draining.value.retry_after is not None
    busy = await setup.elsewhere.begin_turn(BeginTurn(setup.session, "third", lease=5, ttl=30))
    assert busy.lease is Lease.BUSY  # the holder is untouched
    assert setup.calls == []
