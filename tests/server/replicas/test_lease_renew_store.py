"""``RedisStore.renew`` against a real Redis: it extends only a lease that the caller's
token still holds, atomically, and keeps the session alive as long as its lease."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from evalport.server.stores import Lease, RedisStore
from storekit import new
from support.redis import RedisServer


@pytest.fixture
async def store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    opened = RedisStore(redis_server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    await opened.create(new("s", b"meta", b"run", ttl=30, limit=10))
    yield opened
    await opened.aclose()


@pytest.fixture
async def plain(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


async def test_the_holder_extends_its_lease(store: RedisStore, plain: aioredis.Redis) -> None:
    assert await store.acquire("s", "one", lease=0.3, ttl=30) is Lease.ACQUIRED
    assert await store.renew("s", "one", lease=5) is True
    assert 4000 < await plain.pttl(f"{store.prefix}l:{{s}}") <= 5000
    await asyncio.sleep(0.4)  # past the first lease
    assert await store.acquire("s", "two", lease=5, ttl=30) is Lease.BUSY
    await store.release("s", "one")
    assert await store.acquire("s", "two", lease=5, ttl=30) is Lease.ACQUIRED


async def test_another_token_changes_nothing(store: RedisStore, plain: aioredis.Redis) -> None:
    assert await store.acquire("s", "one", lease=2, ttl=30) is Lease.ACQUIRED
    assert await store.renew("s", "two", lease=60) is False
    assert await plain.get(f"{store.prefix}l:{{s}}") == b"one"
    assert await plain.pttl(f"{store.prefix}l:{{s}}") <= 2000


async def test_an_expired_or_released_lease_stays_gone(
    store: RedisStore, plain: aioredis.Redis
) -> None:
    assert await store.acquire("s", "one", lease=0.1, ttl=30) is Lease.ACQUIRED
    await asyncio.sleep(0.15)
    assert await store.renew("s", "one", lease=5) is False  # expired: not brought back
    assert await plain.exists(f"{store.prefix}l:{{s}}") == 0
    assert await store.acquire("s", "two", lease=5, ttl=30) is Lease.ACQUIRED
    assert await store.renew("s", "one", lease=5) is False  # another holder now
    assert await plain.get(f"{store.prefix}l:{{s}}") == b"two"
    await store.release("s", "two")
    assert await store.renew("s", "two", lease=5) is False  # released
    assert await plain.exists(f"{store.prefix}l:{{s}}") == 0
    assert await store.renew("absent", "one", lease=5) is False


async def test_a_session_lives_as_long_as_its_renewed_lease(
    store: RedisStore, plain: aioredis.Redis
) -> None:
    await store.create(new("short", b"meta", b"run", ttl=0.3, limit=10))
    assert await store.acquire("short", "one", lease=0.3, ttl=0.3) is Lease.ACQUIRED
    assert await store.renew("short", "one", lease=2) is True
    assert await plain.pttl(f"{store.prefix}s:{{short}}") > 1500  # the lease outlasts the TTL
    await asyncio.sleep(0.5)  # past the idle TTL and the first lease
    assert await store.read("short") is not None
    await store.release("short", "one")  # back to the idle deadline, which has passed
    await asyncio.sleep(0.05)
    assert await store.read("short") is None
    # a long idle deadline is kept when the lease is shorter
    assert await store.acquire("s", "one", lease=0.3, ttl=30) is Lease.ACQUIRED
    assert await store.renew("s", "one", lease=0.3) is True
    assert await plain.pttl(f"{store.prefix}s:{{s}}") > 29_000
