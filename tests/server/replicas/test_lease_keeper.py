"""A turn's short lease, kept by its holder (``LeaseKeeper``): a ``SessionManager`` over a
real Redis, with a second store object standing for another replica. Renewals start only
when a turn outlives a third of its lease, stop when the step ends however it ends, and
never take back a lease that expired or that another holder took."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis
from evalport.protocol import ApprovalDecision, CreateSessionRequest, Message, ProblemType
from evalport.protocol.runtime import TurnContext
from evalport.server import Limits
from evalport.server._problems import HTTPProblem
from evalport.server._sessions import SessionManager
from evalport.server.stores import Lease, LeaseRenewal, MemoryStore, RedisStore, StoreUnavailable
from support.redis import RedisServer

LEASE = 0.9  # renewed every 0.3 s: margins a loaded 2-core machine keeps (was 0.3 s)


class Counting(RedisStore):
    """The Redis store, counting renewals; the first ``failures`` of them find it down."""

    failures = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.renewals = 0

    async def renew(self, session_id: str, token: str, *, lease: float) -> bool:
        self.renewals += 1
        if self.renewals <= self.failures:
            raise StoreUnavailable("Redis is down (on purpose)")
        return await super().renew(session_id, token, lease=lease)


@dataclass
class Setup:
    manager: SessionManager
    store: Counting
    elsewhere: RedisStore  # another replica's view of the same keys
    redis: aioredis.Redis
    session: str
    prefix: str

    async def holder(self) -> bytes | None:
        """The token that holds the session's lease in Redis (``None``: nobody)."""
        token: bytes | None = await self.redis.get(f"{self.prefix}l:{{{self.session}}}")
        return token

    async def busy_elsewhere(self) -> bool:
        """Whether another replica's turn would be refused (it takes nothing if not)."""
        outcome = await self.elsewhere.acquire(self.session, "probe", lease=5, ttl=30)
        if outcome is Lease.ACQUIRED:
            await self.elsewhere.release(self.session, "probe")
        return outcome is Lease.BUSY


GATES: dict[str, asyncio.Event] = {}
"""A turn ``gate:<name>`` runs until the test sets ``GATES[name]``: as long as the test
needs, whatever the machine's load."""


async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    if message.startswith("gate:"):
        await GATES[message.removeprefix("gate:")].wait()
        return f"ran {message}"
    if message == "approve":
        decision = await ctx.request_approval("refund", {"order": "A1"})
        await asyncio.sleep(1.5)  # the resumed turn outlives its lease (turn timeout 1.8 s)
        return f"approved={decision.approved}"
    if message.startswith("slow:"):
        await asyncio.sleep(float(message.split(":", 1)[1]))
    return f"ran {message}"


@asynccontextmanager
async def made(
    redis_server: RedisServer, limits: Limits, failures: int = 0
) -> AsyncIterator[Setup]:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = Counting(redis_server.url, prefix=prefix)
    store.failures = failures
    elsewhere = RedisStore(redis_server.url, prefix=prefix)
    plain = aioredis.Redis.from_url(redis_server.url)
    manager = SessionManager(agent, limits=limits, store=store)
    try:
        session, _ = await manager.create(CreateSessionRequest())
        yield Setup(manager, store, elsewhere, plain, session, prefix)
    finally:
        await manager.aclose()
        await elsewhere.aclose()
        await plain.aclose()


@pytest.fixture
async def setup(redis_server: RedisServer, request: pytest.FixtureRequest) -> AsyncIterator[Setup]:
    limits = Limits(turn_timeout=1.8, lease_ttl=LEASE)
    async with made(redis_server, limits, getattr(request, "param", 0)) as made_setup:
        yield made_setup


async def test_only_a_store_that_renews_gets_short_leases(setup: Setup) -> None:
    assert isinstance(setup.store, LeaseRenewal) and setup.manager.leases.length == LEASE
    memory = SessionManager(agent, limits=Limits(lease_ttl=LEASE), store=MemoryStore())
    assert not isinstance(memory.store, LeaseRenewal)
    assert memory.leases.length == Limits().lease_seconds == 125.0  # the turn timeout + 5 s
    await memory.aclose()


async def test_a_short_turn_arms_a_timer_and_never_renews(setup: Setup) -> None:
    outcome = await setup.manager.turns.turn(setup.session, "quick", None)
    assert outcome.status == 200
    assert await setup.holder() is None  # released
    await asyncio.sleep(LEASE)  # past the first renewal's time: its timer was cancelled
    assert setup.store.renewals == 0
    assert not setup.manager.jobs


async def test_a_turn_longer_than_its_lease_keeps_it_until_it_ends(
    redis_server: RedisServer,
) -> None:
    # The turn runs until the test has seen three renewals (a whole lease's worth), not
    # for a fixed time; a 3 s lease is renewed every second, which a loaded machine's
    # stalls do not outlast, and no turn timeout is near.
    lease = 3.0
    async with made(redis_server, Limits(turn_timeout=120, lease_ttl=lease)) as setup:
        gate = GATES["kept"] = asyncio.Event()
        turn = asyncio.create_task(setup.manager.turns.turn(setup.session, "gate:kept", "k1"))
        while (holder := await setup.holder()) is None:
            await asyncio.sleep(0.01)
        while setup.store.renewals < 3:  # the lease was renewed past its own length
            assert await setup.busy_elsewhere()
            assert await setup.holder() == holder
            await asyncio.sleep(0.05)
        assert not turn.done()
        gate.set()
        assert (await turn).status == 200
        assert await setup.holder() is None  # the final store call released it
        renewals = setup.store.renewals
        await asyncio.sleep(lease / 3 * 2)  # two renewal periods: none comes
        assert setup.store.renewals == renewals  # renewing stopped with the turn


async def test_a_timed_out_turn_stops_renewing_and_releases(setup: Setup) -> None:
    outcome = await setup.manager.turns.turn(setup.session, "slow:5", None)  # turn timeout 1.8 s
    assert outcome.status == 504
    assert setup.store.renewals >= 3  # the lease (0.9 s) outlived by the turn was kept
    assert await setup.holder() is None
    renewals = setup.store.renewals
    await asyncio.sleep(LEASE)
    assert setup.store.renewals == renewals


async def test_a_renewal_never_takes_back_a_lease_another_holder_took(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    turn = asyncio.create_task(setup.manager.turns.turn(setup.session, "slow:1.5", None))
    await asyncio.sleep(0.05)
    # the lease is lost (say the replica stalled past it) and another replica takes it
    await setup.redis.delete(f"{setup.prefix}l:{{{setup.session}}}")
    assert await setup.elsewhere.acquire(setup.session, "other", lease=10, ttl=30) is Lease.ACQUIRED
    before = await setup.store.read(setup.session)
    # the turn ran on, but stores nothing and does not answer a 200 the store lacks
    with (
        caplog.at_level(logging.WARNING, logger="evalport.server"),
        pytest.raises(HTTPProblem) as lost,
    ):
        await turn
    assert lost.value.problem_type == ProblemType.TURN_LOST
    assert await setup.store.read(setup.session) == before
    assert await setup.holder() == b"other"  # neither renewed nor released by the turn
    assert 7000 < await setup.redis.pttl(f"{setup.prefix}l:{{{setup.session}}}") <= 10000
    assert setup.store.renewals == 1  # the first renewal found it gone and stopped
    assert "another turn took it" in caplog.text


async def test_a_renewal_never_brings_back_an_expired_lease(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="evalport.server"):
        turn = asyncio.create_task(setup.manager.turns.turn(setup.session, "slow:1.5", None))
        await asyncio.sleep(0.05)
        await setup.redis.delete(f"{setup.prefix}l:{{{setup.session}}}")  # as if it expired
        await asyncio.sleep(0.9)  # renewals were due
        assert await setup.holder() is None
        # nobody took the session meanwhile: the turn held the lease last, so it stores
        # its outcome (fencing refuses only a holder that another acquisition displaced)
        assert (await turn).status == 200
    assert not await setup.busy_elsewhere()
    assert setup.store.renewals == 1
    assert "expired" in caplog.text


@pytest.mark.parametrize("setup", [1], indirect=True)
async def test_a_store_down_during_a_renewal_is_logged_and_tried_again(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="evalport.server"):
        turn = asyncio.create_task(setup.manager.turns.turn(setup.session, "slow:1.65", None))
        while setup.store.renewals < 3:  # the first failed, the next ones renewed it
            assert not turn.done()
            await asyncio.sleep(0.01)
        assert await setup.busy_elsewhere()
        assert (await turn).status == 200
    assert caplog.text.count("could not renew the turn's lease") == 1
    assert "another turn took it" not in caplog.text
    assert await setup.holder() is None


async def test_a_suspended_turn_holds_no_lease_and_its_decisions_renew_one(setup: Setup) -> None:
    suspended = await setup.manager.turns.turn(setup.session, "approve", None)
    assert suspended.status == 200 and b"pendingApprovals" in suspended.body
    assert await setup.holder() is None and setup.store.renewals == 0
    live = setup.manager.live.get(setup.session)
    assert live is not None
    [pending] = live.run.pending_approvals
    decide = asyncio.create_task(
        setup.manager.decide(setup.session, {pending.call_id: ApprovalDecision(decision="approve")})
    )
    await asyncio.sleep(1.05)  # the resumed turn sleeps 1.5 s, past its 0.9 s lease
    assert not decide.done()
    assert await setup.busy_elsewhere()
    outcome = await decide
    assert outcome.status == 200 and b"approved=True" in outcome.body
    assert setup.store.renewals >= 3
    assert await setup.holder() is None
