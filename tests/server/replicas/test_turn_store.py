"""A turn's two store steps (``begin_turn``, ``finish_turn``): the same contract from the
Redis store's scripts and from the memory store's own steps; runs kept as logs with
versions (turns appended, the run left out for the version the caller holds); and a
Redis turn costs two round trips."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from evalport.server.stores import (
    BeginTurn,
    Finish,
    Lease,
    MemoryStore,
    RedisStore,
    SessionStore,
    StoredSession,
)
from serverkit import Build, open_session
from storekit import finish, new
from support.redis import RedisServer


class Both:
    """A store (``turns`` too, as the tests name its two steps); ``shared``: whether it
    records a holder's key (Redis), which a store in one process does not."""

    def __init__(self, store: SessionStore, shared: bool) -> None:
        self.store, self.turns, self.shared = store, store, shared


@pytest.fixture(params=["redis", "memory"])
async def both(request: pytest.FixtureRequest) -> AsyncIterator[Both]:
    store: SessionStore
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        store = RedisStore(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    else:
        store = MemoryStore()
    yield Both(store, shared=request.param == "redis")
    await store.aclose()


async def test_begin_takes_the_lease_and_returns_the_stored_session(both: Both) -> None:
    store, turns = both.store, both.turns
    missing = await turns.begin_turn(BeginTurn("a", "one", lease=5, ttl=10))
    assert (missing.lease, missing.session, missing.replay) == (Lease.MISSING, None, None)
    await store.create(new("a", b"meta", b"run0", ttl=10, limit=5))
    start = await turns.begin_turn(BeginTurn("a", "one", lease=5, ttl=10, key="k1"))
    assert start.lease is Lease.ACQUIRED and start.replay is None
    assert start.session is not None
    assert (start.session.meta, start.session.run, start.session.state) == (
        b"meta",
        b"run0",
        "idle",
    )
    busy = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10))
    assert (busy.lease, busy.session) == (Lease.BUSY, None)
    assert await store.acquire("a", "two", lease=5, ttl=10) is Lease.BUSY


async def test_busy_tells_whether_the_holder_runs_the_same_key(both: Both) -> None:
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
    assert (
        await turns.begin_turn(BeginTurn("a", "one", lease=5, ttl=10, key="k1"))
    ).lease is Lease.ACQUIRED
    same = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10, key="k1"))
    assert (same.lease, same.session, same.replay) == (Lease.BUSY, None, None)
    # Redis records the holder's key; the memory store (one process) need not
    assert same.same_key is both.shared
    other = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10, key="k2"))
    unkeyed = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10))
    assert (other.lease, other.same_key) == (unkeyed.lease, unkeyed.same_key) == (Lease.BUSY, False)
    # the holder ends without a record (a failed turn): the key no longer holds anything
    await store.release("a", "one")
    assert (
        await turns.begin_turn(BeginTurn("a", "three", lease=5, ttl=10))
    ).lease is Lease.ACQUIRED
    after = await turns.begin_turn(BeginTurn("a", "four", lease=5, ttl=10, key="k1"))
    assert (after.lease, after.same_key) == (Lease.BUSY, False)  # an unkeyed turn holds it
    await store.release("a", "three")
    # the first key's holder finishes with a record: a retry of the key replays it
    assert (
        await turns.begin_turn(BeginTurn("a", "five", lease=5, ttl=10, key="k1"))
    ).lease is Lease.ACQUIRED
    await turns.finish_turn(
        finish("a", "five", run=b"run1", state="idle", ttl=10, key="k1", record=b"rec", keep=4)
    )
    replay = await turns.begin_turn(BeginTurn("a", "six", lease=5, ttl=10, key="k1"))
    assert (replay.lease, replay.replay, replay.same_key) == (None, b"rec", False)


async def test_a_holder_that_died_leaves_its_turn_lost_record_to_the_next_call(
    both: Both,
) -> None:
    """Redis stores the dead holder's ``lost`` record under its key when the next call
    finds its lease lapsed; the memory store (one process: its turns die with it) does not."""
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
    dead = await turns.begin_turn(
        BeginTurn("a", "dead", lease=0.1, ttl=10, key="k1", lost=b"L1", keep=4)
    )
    assert dead.lease is Lease.ACQUIRED
    assert (
        await turns.begin_turn(BeginTurn("a", "retry", lease=5, ttl=10, key="k1"))
    ).same_key is both.shared
    await asyncio.sleep(0.2)  # the holder died: its lease lapses, no record stored
    start = await turns.begin_turn(
        BeginTurn("a", "retry", lease=5, ttl=10, key="k1", lost=b"L2", keep=4)
    )
    if both.shared:  # the retry replays turn-lost, however late, and takes no lease
        assert (start.lease, start.replay) == (None, b"L1")
        assert await store.get_result("a", "k1") == b"L1"
        assert (
            await turns.begin_turn(BeginTurn("a", "next", lease=5, ttl=10))
        ).lease is Lease.ACQUIRED
    else:
        assert start.lease is Lease.ACQUIRED and start.session is not None
    # the dead holder's finish, when it comes back, stores nothing (fencing, Redis)
    stored = await turns.finish_turn(
        finish("a", "dead", run=b"late", state="idle", ttl=10, key="k1", record=b"R", keep=4)
    )
    assert stored is Finish.LOST


async def test_another_turn_settles_the_dead_holders_key_first(both: Both) -> None:
    """Any later acquisition (another key, none, a plain ``acquire``) stores the lost
    record of a holder that died, so its key's retry still replays turn-lost."""
    if not both.shared:
        pytest.skip("a store in one process has no holder that died without it")
    store, turns = both.store, both.turns
    for n, take in enumerate(("k2", None, "acquire")):
        session = f"s{n}"
        await store.create(new(session, b"m", b"run0", ttl=10, limit=5))
        await turns.begin_turn(
            BeginTurn(session, "dead", lease=0.05, ttl=10, key="k1", lost=b"L", keep=4)
        )
        await asyncio.sleep(0.1)
        if take == "acquire":
            assert await store.acquire(session, "t", lease=5, ttl=10) is Lease.ACQUIRED
        else:
            started = await turns.begin_turn(BeginTurn(session, "t", lease=5, ttl=10, key=take))
            assert started.lease is Lease.ACQUIRED
        done = await turns.finish_turn(finish(session, "t", run=b"r2", state="idle", ttl=10))
        assert done is Finish.STORED
        replay = await turns.begin_turn(BeginTurn(session, "retry", lease=5, ttl=10, key="k1"))
        assert (replay.lease, replay.replay) == (None, b"L"), take


async def test_a_holder_that_released_without_a_record_leaves_nothing_lost(both: Both) -> None:
    """A holder that answered a problem releases without a record: its key's retry takes
    the lease and runs the turn (it is not turn-lost)."""
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
    await turns.begin_turn(BeginTurn("a", "one", lease=0.1, ttl=10, key="k1", lost=b"L", keep=4))
    await store.release("a", "one")
    await asyncio.sleep(0.15)
    start = await turns.begin_turn(
        BeginTurn("a", "retry", lease=5, ttl=10, key="k1", lost=b"L", keep=4)
    )
    assert (start.lease, start.replay) == (Lease.ACQUIRED, None)
    assert await store.get_result("a", "k1") is None


async def test_finish_is_fenced_by_the_token(both: Both) -> None:
    """A holder whose lease another acquisition took stores nothing; one whose lease
    lapsed with nobody taking it still stores."""
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
    await turns.begin_turn(BeginTurn("a", "slow", lease=0.05, ttl=10, key="k1", lost=b"L", keep=4))
    await asyncio.sleep(0.1)  # lapsed, nobody took it: still the last holder
    assert (
        await turns.finish_turn(
            finish("a", "slow", run=b"run2", state="idle", ttl=10, key="k1", record=b"R1", keep=4)
        )
        is Finish.STORED
    )
    assert await store.get_result("a", "k1") == b"R1"
    await turns.begin_turn(
        BeginTurn("a", "stalled", lease=0.05, ttl=10, key="k2", lost=b"L2", keep=4)
    )
    await asyncio.sleep(0.1)
    assert (
        await turns.begin_turn(BeginTurn("a", "new", lease=5, ttl=10, key="k3"))
    ).lease is Lease.ACQUIRED
    stored = await turns.finish_turn(
        finish("a", "stalled", run=b"stale", state="idle", ttl=10, key="k2", record=b"R2", keep=4)
    )
    assert stored is Finish.LOST
    done = await turns.finish_turn(finish("a", "new", run=b"run3", state="idle", ttl=10))
    assert done is Finish.STORED
    session = await store.read("a")
    assert session is not None and session.run == b"run3"
    assert await store.get_result("a", "k2") == (b"L2" if both.shared else None)


async def test_the_memory_stores_own_finish_is_fenced() -> None:
    """``MemoryStore.finish_turn`` stores only for the token that took the lease last, as
    Redis's script does."""
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
    assert await store.acquire("a", "one", lease=1, ttl=10) is Lease.ACQUIRED
    now[0] = 2.0  # lapsed, nobody took it: still the last holder
    done = await store.finish_turn(finish("a", "one", run=b"run1", state="idle", ttl=10))
    assert done is Finish.STORED
    assert await store.acquire("a", "two", lease=1, ttl=10) is Lease.ACQUIRED
    now[0] = 4.0
    assert await store.acquire("a", "three", lease=1, ttl=10) is Lease.ACQUIRED
    stale = await store.finish_turn(
        finish("a", "two", run=b"stale", state="idle", ttl=10, key="k", record=b"R", keep=2)
    )
    assert stale is Finish.LOST
    assert await store.get_result("a", "k") is None
    third = finish("a", "three", run=b"run3", state="idle", ttl=10)
    assert await store.finish_turn(third) is Finish.STORED
    assert await store.read("a") == StoredSession(b"m", b"run3", "idle", third.version)


async def test_finish_writes_stores_the_record_and_releases(both: Both) -> None:
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
    assert (
        await turns.begin_turn(BeginTurn("a", "one", lease=5, ttl=10, key="k1"))
    ).lease is Lease.ACQUIRED
    await turns.finish_turn(
        finish("a", "one", run=b"run1", state="suspended", ttl=10, key="k1", record=b"rec1", keep=2)
    )
    stored = await store.read("a")
    assert stored is not None and (stored.run, stored.state) == (b"run1", "suspended")
    assert await store.get_result("a", "k1") == b"rec1"
    # the key's record answers: no lease is taken, so another token acquires afterwards
    replay = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10, key="k1"))
    assert (replay.lease, replay.session, replay.replay) == (None, None, b"rec1")
    # a suspended session takes no turn (and no lease): it waits for its approvals
    refused = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10, key="k2"))
    assert (refused.lease, refused.suspended, refused.session) == (Lease.BUSY, True, None)
    assert await store.acquire("a", "probe", lease=5, ttl=10) is Lease.ACQUIRED
    decided = finish("a", "probe", run=b"run1", state="idle")  # (the decision's finish)
    assert await turns.finish_turn(decided) is Finish.STORED
    start = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10, key="k2"))
    assert start.lease is Lease.ACQUIRED
    # a turn appended to the run: the newest ``keep`` records stay
    assert (
        await turns.finish_turn(
            finish("a", "two", append=b"t2", base=decided.version, key="k2", record=b"r2", keep=2)
        )
        is Finish.STORED
    )
    assert (await turns.begin_turn(BeginTurn("a", "three", lease=5, ttl=10, key="k3"))).session
    assert (
        await turns.finish_turn(
            finish("a", "three", run=b"run3", state="idle", ttl=10, key="k3", record=b"r3", keep=2)
        )
        is Finish.STORED
    )
    stored = await store.read("a")
    assert stored is not None and (stored.run, stored.state) == (b"run3", "idle")
    assert await store.get_result("a", "k1") is None
    assert (await store.get_result("a", "k2"), await store.get_result("a", "k3")) == (b"r2", b"r3")
    assert await store.acquire("a", "four", lease=5, ttl=10) is Lease.ACQUIRED


async def test_finish_by_a_token_that_lost_the_lease_releases_nothing(both: Both) -> None:
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"r", ttl=10, limit=5))
    assert await store.acquire("a", "holder", lease=5, ttl=10) is Lease.ACQUIRED
    done = await turns.finish_turn(finish("a", "stale", run=b"r2", state="idle", ttl=10))
    assert done is Finish.LOST
    assert (await turns.begin_turn(BeginTurn("a", "other", lease=5, ttl=10))).lease is Lease.BUSY


async def test_finish_brings_back_the_idle_ttl(both: Both) -> None:
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"r", ttl=0.2, limit=5))
    assert (await turns.begin_turn(BeginTurn("a", "t", lease=30, ttl=0.2))).lease is Lease.ACQUIRED
    await asyncio.sleep(0.3)
    assert await store.read("a") is not None  # the lease keeps it
    await turns.finish_turn(finish("a", "t", run=b"r2", state="idle", ttl=0.2))
    await asyncio.sleep(0.35)
    assert await store.read("a") is None


class Counting(RedisStore):
    """The Redis store, counting its sweeps (the manager's once-a-second purge)."""

    sweeps = 0

    async def purge_expired(self) -> list[str]:
        self.sweeps += 1
        return await super().purge_expired()


async def test_a_redis_turn_costs_two_round_trips(build: Build, redis_server: RedisServer) -> None:
    store = Counting(redis_server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    _, client = build(store=store)
    probe = aioredis.Redis.from_url(redis_server.url)

    async def scripts() -> int:  # script calls Redis ran, minus this store's sweeps
        stats = await probe.info("commandstats")
        calls = sum(
            stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval")
        )
        return int(calls) - store.sweeps

    async def turn(message: str, key: str) -> None:
        response = await client.post(
            f"/evals/sessions/{session_id}/turns",
            json={"message": message},
            headers={"Idempotency-Key": key},
        )
        assert response.status_code == 200, response.text

    try:
        session_id = await open_session(client)
        await turn("warm-up", "k0")  # Redis has the scripts from here on
        before = await scripts()
        for n in range(1, 4):
            await turn(f"m{n}", f"k{n}")
        assert await scripts() - before == 3 * 2
        before = await scripts()
        await turn("m2", "k2")  # a replay: its record (a delta), then the run it applies to
        assert await scripts() - before == 2
    finally:
        await probe.aclose()


async def test_a_turn_appends_to_the_runs_log_and_every_write_is_a_new_version(
    both: Both,
) -> None:
    store, turns = both.store, both.turns
    created = new("a", b"m", b"run0", ttl=10, limit=5)
    await store.create(created)
    first = await turns.begin_turn(BeginTurn("a", "one", lease=5, ttl=10))
    assert first.session is not None
    v1 = first.session.version
    assert v1 == created.version and first.session.appended == ()
    one = finish("a", "one", append=b"t1", base=v1, state="idle", ttl=10)
    assert await turns.finish_turn(one) is Finish.STORED
    v2 = one.version
    late = await turns.finish_turn(finish("a", "one", append=b"t2", base=v2))
    assert late is Finish.LOST  # released by the first finish: fenced, nothing stored
    start = await turns.begin_turn(BeginTurn("a", "two", lease=5, ttl=10))
    assert start.session == StoredSession(b"m", b"run0", "idle", v2, (b"t1",))
    two = finish("a", "two", append=b"t2", base=v2, state="suspended", ttl=10)
    assert await turns.finish_turn(two) is Finish.STORED
    v3 = two.version
    assert await store.read("a") == StoredSession(b"m", b"run0", "suspended", v3, (b"t1", b"t2"))
    assert await store.acquire("a", "w", lease=5, ttl=10) is Lease.ACQUIRED
    whole = finish("a", "w", run=b"whole")  # the log goes with it
    assert await turns.finish_turn(whole) is Finish.STORED
    v4 = whole.version
    assert (await store.read("a")) == StoredSession(b"m", b"whole", "idle", v4)
    held = await turns.begin_turn(BeginTurn("a", "three", lease=5, ttl=10, seen=v4))
    assert held.session == StoredSession(b"m", b"", "idle", v4)  # the version held: no run
    three = finish("a", "three", append=b"t5", base=v4, state="idle", ttl=10)
    assert await turns.finish_turn(three) is Finish.STORED
    other = await turns.begin_turn(BeginTurn("a", "four", lease=5, ttl=10, seen=v4))  # now stale
    assert other.session == StoredSession(b"m", b"whole", "idle", three.version, (b"t5",))
    four = finish("a", "four", run=b"again", state="idle", ttl=10)
    assert await turns.finish_turn(four) is Finish.STORED
    assert await store.read("a") == StoredSession(b"m", b"again", "idle", four.version)


async def test_a_turn_appends_only_on_the_version_it_was_cut_against(both: Both) -> None:
    """An append names its base version: on another run (a write lost to a failover or a
    snapshot restored) the store keeps the lease, stores nothing and says ``STALE``."""
    store, turns = both.store, both.turns
    await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
    start = await turns.begin_turn(BeginTurn("a", "one", lease=5, ttl=10))
    assert start.session is not None
    stale = start.session.version + 1
    refused = await turns.finish_turn(
        finish("a", "one", append=b"t1", base=stale, state="idle", ttl=10, key="k", keep=5)
    )
    assert refused is Finish.STALE
    assert await store.read("a") == StoredSession(b"m", b"run0", "idle", start.session.version)
    assert await store.get_result("a", "k") is None
    assert await store.acquire("a", "other", lease=5, ttl=10) is Lease.BUSY  # still held
    written = finish("a", "one", run=b"whole", state="idle", ttl=10, key="k", record=b"r", keep=5)
    assert await turns.finish_turn(written) is Finish.STORED
    assert await store.read("a") == StoredSession(b"m", b"whole", "idle", written.version)


async def test_two_writers_on_one_restored_version_reach_different_versions(
    redis_server: RedisServer,
) -> None:
    """A write lost in Redis (a failover without WAIT, a snapshot restored) and another
    write over the run before it: the two runs never share a version."""
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = RedisStore(redis_server.url, prefix=prefix)
    probe = aioredis.from_url(redis_server.url)
    try:
        await store.create(new("a", b"m", b"run0", ttl=10, limit=5))
        start = await store.begin_turn(BeginTurn("a", "one", lease=5, ttl=10))
        assert start.session is not None
        base = start.session.version
        key = f"{prefix}s:{{a}}"  # the session's hash (documented in the store's rules)
        snapshot, ttl = await probe.dump(key), await probe.pttl(key)
        lost = finish("a", "one", append=b"A", base=base, state="idle", ttl=10)
        assert await store.finish_turn(lost) is Finish.STORED
        await probe.restore(key, ttl, snapshot, replace=True)
        again = await store.begin_turn(BeginTurn("a", "two", lease=5, ttl=10))
        assert again.session is not None and again.session.version == base
        kept = finish("a", "two", append=b"B", base=base, state="idle", ttl=10)
        assert await store.finish_turn(kept) is Finish.STORED
        assert kept.version not in (lost.version, base)
        seen = lost.version
        held = await store.begin_turn(BeginTurn("a", "three", lease=5, ttl=10, seen=seen))
        assert held.session is not None and held.session.appended == (b"B",)  # never left out
    finally:
        await probe.aclose()
        await store.aclose()
