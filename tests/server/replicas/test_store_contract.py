"""The store contract, run against the memory store and a real Redis store alike."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from evalport.server.stores import (
    BeginTurn,
    Finish,
    Lease,
    MemoryStore,
    RedisStore,
    SessionStore,
    StoreUnavailable,
    open_store,
)
from storekit import finish, new
from support.redis import RedisServer


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        made: SessionStore = MemoryStore()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        made = RedisStore(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    yield made
    await made.aclose()


async def test_create_read_write_delete(store: SessionStore) -> None:
    created = new("a", b"meta", b"run0", ttl=10, limit=5)
    assert await store.create(created)
    stored = await store.read("a")
    assert stored is not None
    assert (stored.meta, stored.run, stored.state) == (b"meta", b"run0", "idle")
    assert stored.version == created.version
    assert await store.acquire("a", "t", lease=5, ttl=10) is Lease.ACQUIRED
    written = finish("a", "t", run=b"run1", state="suspended")
    assert await store.finish_turn(written) is Finish.STORED
    stored = await store.read("a", ttl=10)
    assert stored is not None and (stored.run, stored.state) == (b"run1", "suspended")
    assert stored.version == written.version
    assert await store.delete("a")
    assert await store.read("a") is None
    assert not await store.delete("a")
    assert await store.finish_turn(finish("a", "t", run=b"x")) is Finish.LOST
    assert await store.acquire("a", "t", lease=5, ttl=10) is Lease.MISSING


async def test_cap_counts_live_sessions(store: SessionStore) -> None:
    for n in range(3):
        assert await store.create(new(f"s{n}", b"m", b"r", ttl=10, limit=3))
    assert not await store.create(new("s3", b"m", b"r", ttl=10, limit=3))
    assert await store.count() == 3
    await store.delete("s0")
    assert await store.create(new("s3", b"m", b"r", ttl=10, limit=3))


async def test_lease_has_one_holder_and_only_its_token_releases_it(store: SessionStore) -> None:
    await store.create(new("a", b"m", b"r", ttl=10, limit=5))
    assert await store.acquire("a", "one", lease=5, ttl=10) is Lease.ACQUIRED
    assert await store.acquire("a", "two", lease=5, ttl=10) is Lease.BUSY
    await store.release("a", "two")  # not the holder: nothing happens
    assert await store.acquire("a", "two", lease=5, ttl=10) is Lease.BUSY
    await store.release("a", "one")
    assert await store.acquire("a", "two", lease=5, ttl=10) is Lease.ACQUIRED


async def test_concurrent_acquires_have_exactly_one_winner(store: SessionStore) -> None:
    await store.create(new("a", b"m", b"r", ttl=10, limit=5))
    outcomes = await asyncio.gather(
        *(store.acquire("a", f"token{n}", lease=5, ttl=10) for n in range(20))
    )
    assert outcomes.count(Lease.ACQUIRED) == 1
    assert outcomes.count(Lease.BUSY) == 19


async def put_result(store: SessionStore, key: str, record: bytes) -> Finish:
    """A turn under ``key`` on session ``a`` that stores ``record``, keeping the newest 2."""
    begun = await store.begin_turn(BeginTurn("a", "t", lease=5, ttl=10))
    if begun.lease is not Lease.ACQUIRED:
        return Finish.LOST
    return await store.finish_turn(finish("a", "t", run=b"r", key=key, record=record, keep=2))


async def test_idempotency_records_keep_the_newest(store: SessionStore) -> None:
    await store.create(new("a", b"m", b"r", ttl=10, limit=5))
    for n in range(4):
        assert await put_result(store, f"k{n}", f"rec{n}".encode()) is Finish.STORED
    assert await store.get_result("a", "k0") is None
    assert await store.get_result("a", "k1") is None
    assert await store.get_result("a", "k3") == b"rec3"
    await put_result(store, "k2", b"again")  # re-put moves it to the newest
    await put_result(store, "k4", b"rec4")
    assert await store.get_result("a", "k2") == b"again"
    assert await store.get_result("a", "k3") is None
    await store.delete("a")
    assert await store.get_result("a", "k2") is None
    assert await put_result(store, "k9", b"x") is Finish.LOST  # absent session: ignored
    assert await store.get_result("a", "k9") is None


async def test_ttl_expiry_and_purge(store: SessionStore) -> None:
    await store.create(new("short", b"m", b"r", ttl=0.15, limit=5))
    await store.create(new("long", b"m", b"r", ttl=10, limit=5))
    await store.purge_expired()  # a first sweep (the Redis store counts from here)
    assert await store.acquire("short", "t", lease=5, ttl=0.15) is Lease.ACQUIRED
    kept = finish("short", "t", run=b"r", ttl=0.15, key="k", record=b"rec", keep=2)
    assert await store.finish_turn(kept) is Finish.STORED
    await asyncio.sleep(0.3)
    assert "short" in await store.purge_expired()
    assert await store.read("short") is None
    assert await store.get_result("short", "k") is None
    assert await store.count() == 1
    assert await store.read("long") is not None


async def test_a_held_lease_keeps_the_session_alive(store: SessionStore) -> None:
    await store.create(new("a", b"m", b"r", ttl=0.1, limit=5))
    assert await store.acquire("a", "t", lease=1.0, ttl=0.1) is Lease.ACQUIRED
    await asyncio.sleep(0.25)
    assert await store.read("a") is not None
    assert await store.finish_turn(finish("a", "t", run=b"r2")) is Finish.STORED
    assert await store.read("a") is not None


async def test_releasing_the_lease_brings_back_the_idle_ttl(store: SessionStore) -> None:
    await store.create(new("a", b"m", b"r", ttl=0.2, limit=5))
    assert await store.acquire("a", "t", lease=30, ttl=0.2) is Lease.ACQUIRED
    await store.release("a", "t")
    await asyncio.sleep(0.35)
    assert await store.read("a") is None


async def test_an_expired_lease_frees_the_session(store: SessionStore) -> None:
    await store.create(new("a", b"m", b"r", ttl=10, limit=5))
    assert await store.acquire("a", "crashed", lease=0.1, ttl=10) is Lease.ACQUIRED
    await asyncio.sleep(0.2)
    assert await store.acquire("a", "next", lease=5, ttl=10) is Lease.ACQUIRED


async def test_redis_store_reports_deletions_to_every_replica(redis_server: RedisServer) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    one, two = (
        RedisStore(redis_server.url, prefix=prefix),
        RedisStore(redis_server.url, prefix=prefix),
    )
    try:
        assert await one.purge_expired() == [] and await two.purge_expired() == []
        await one.create(new("a", b"m", b"r", ttl=10, limit=5))
        assert await two.acquire("a", "same", lease=5, ttl=10) is Lease.ACQUIRED
        assert await two.acquire("a", "same", lease=5, ttl=10) is Lease.ACQUIRED  # a retry
        await two.release("a", "same")
        await one.delete("a")
        assert await two.purge_expired() == ["a"]
        assert await two.purge_expired() in ([], ["a"])  # same millisecond at most
    finally:
        await one.aclose()
        await two.aclose()


async def test_unreachable_redis_is_store_unavailable() -> None:
    from support.servers import free_port

    store = open_store(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.read("a")
        assert caught.value.status == 503 and caught.value.retry_after is not None
    finally:
        await store.aclose()


def test_open_store_names_the_accepted_forms() -> None:
    assert isinstance(open_store("memory"), MemoryStore)
    with pytest.raises(ValueError, match="redis://"):
        open_store("postgres://db")


async def test_the_store_repr_hides_credentials() -> None:
    store = RedisStore("redis://user:s3cret@127.0.0.1:1/0")
    try:
        assert "s3cret" not in repr(store) and "***@127.0.0.1:1/0" in repr(store)
    finally:
        await store.aclose()
