"""The Redis session store (:class:`RedisStore`): one Lua script per operation on a session,
atomic across replicas (keys, expiry, fencing: ARCHITECTURE.md, "The Redis store").
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from evalport.protocol import require
from evalport.protocol._redis_url import connect, parse_redis_url, redacted

from . import _redis_lua as lua
from ._base import (
    BeginTurn,
    Finish,
    FinishTurn,
    Lease,
    NewSession,
    StoredSession,
    StoreUnavailable,
    TurnStart,
)
from ._redis_relay import Handler, RedisRelay

require("redis", "redis", "evalport.server.stores._redis")

import redis.asyncio as aioredis  # noqa: E402
import redis.exceptions as redis_errors  # noqa: E402
from redis.asyncio.cluster import RedisCluster  # noqa: E402

logger = logging.getLogger("evalport.server")

T = TypeVar("T")


_UNAVAILABLE: Final = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.BusyLoadingError,
    redis_errors.ReadOnlyError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    redis_errors.SlotNotCoveredError,  # a cluster that lost a master, until it fails over
    ConnectionError,
    TimeoutError,
    OSError,
)


# Wrong credentials or a user whose ACL lacks a command: a setting to fix, said as such.
_REFUSED: Final = (redis_errors.AuthenticationError, redis_errors.NoPermissionError)


def _stored(found: list[Any]) -> StoredSession:
    """A session as the scripts return it: meta, run, state, version, appended turns."""
    meta, run, state, version, *appended = found
    return StoredSession(meta, run, state.decode(), int(version), tuple(appended))


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class RedisStore:
    """Sessions in Redis, shared by several replicas.

    Pass a URL (the forms of :mod:`evalport.protocol._redis_url`: ``redis://``,
    ``rediss://``, ``unix://``, ``redis+sentinel://``, ``redis+cluster://``) or an
    existing ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` client (the store
    then leaves closing it to you). Keys start with ``prefix`` (no ``{`` or ``}``: the
    store's hash tags follow it); ``gone_seconds`` is how long ended ids are kept for
    other replicas (at most the newest 100,000). Each replica sweeps at most once a
    second, on requests; one that serves no request for longer than that keeps the agents
    of sessions that ended elsewhere meanwhile in memory (never served again) until it
    restarts. A URL opens at most ``max_connections`` connections (per node of a
    cluster); a call waits up to ``timeout`` seconds for one, to connect and for each
    answer.

    One server, TLS, ACL users, Sentinel and Cluster are chosen by the URL. With Sentinel the
    client asks for the master on every new connection: a failover is a few 503s. With
    ``wait_replicas=N`` every save that acknowledges a turn or a session runs ``WAIT N`` and
    is a 503 unless ``N`` replicas have it, so a failover loses no acknowledged turn. In a
    cluster the approvals relay uses sharded pub/sub. :meth:`purge_expired` returns the ids
    that expired **or were deleted** since this store object last asked (kept
    ``gone_seconds``), so every replica closes its own agents of sessions that ended
    elsewhere. The store needs ``maxmemory-policy noeviction`` (:meth:`eviction_policy`
    reads it; ``evalport serve`` refuses another); a session missing while the index still
    gives it time is logged as evicted. A Redis that cannot be reached, that refuses the
    store's user, or that is out of memory raises ``StoreUnavailable`` (503
    ``store-unavailable``); out of memory, attach and delete still work. Key names changed
    with hash tags: a session started before an upgrade answers 404 on an upgraded replica
    (the two layouts share no key).
    """

    def __init__(
        self,
        redis: str | aioredis.Redis | RedisCluster,
        *,
        prefix: str = "evalport:",
        gone_seconds: float = 3600.0,
        timeout: float = 5.0,
        max_connections: int = 64,
    ) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError(
                f"RedisStore prefix {prefix!r}: drop the braces (the store puts each "
                "session's keys under the hash tag {id} after the prefix)"
            )
        self._wait_replicas = 0
        self._others: list[Any] = []
        if isinstance(redis, str):
            parsed = parse_redis_url(redis)
            self._redis, self._others = connect(
                parsed, timeout=timeout, max_connections=max_connections
            )
            self._wait_replicas = parsed.wait_replicas
            self._owned = True
            self.url: str | None = redis
        else:
            self._redis = redis
            self._owned = False
            self.url = None
        self._wait_ms = _ms(timeout / 2)  # WAIT answers before the socket times out
        self._sharded = isinstance(self._redis, RedisCluster)
        self.prefix = prefix
        self._index = [f"{prefix}{{index}}", f"{prefix}{{index}}:gone"]
        self._gone_ms = _ms(gone_seconds)
        self._since = -1
        self._relay = RedisRelay(
            self._redis, prefix, sharded=self._sharded, call=self._call, unavailable=_UNAVAILABLE
        )
        register = self._redis.register_script
        self._create = register(lua.CREATE)
        self._read = register(lua.READ)
        self._delete = register(lua.DELETE)
        self._acquire = register(lua.ACQUIRE)
        self._release = register(lua.RELEASE)
        self._fence = register(lua.FENCE)
        self._renew = register(lua.RENEW)
        self._get_result = register(lua.GET_RESULT)
        self._begin_turn = register(lua.BEGIN_TURN)
        self._finish_turn = register(lua.FINISH_TURN)
        self._reserve = register(lua.RESERVE)
        self._due = register(lua.DUE)
        self._left = register(lua.LEFT)
        self._swept = register(lua.SWEPT)
        self._ended = register(lua.ENDED)
        self._gone = register(lua.GONE)

    def __repr__(self) -> str:
        return f"RedisStore({redacted(self.url) if self.url else self._redis!r}, prefix={self.prefix!r})"

    def _keys(self, session_id: str) -> list[str]:
        """The session's keys ``s``, ``l``, ``r``, ``o``: one hash slot (tag ``{id}``)."""
        return [f"{self.prefix}{kind}:{{{session_id}}}" for kind in "slro"]

    async def _call(self, operation: Callable[[], Awaitable[T]]) -> T:
        try:
            return await operation()
        except (*_REFUSED, *_UNAVAILABLE, redis_errors.ResponseError) as error:
            # (refusals first: an AuthenticationError is a ConnectionError; a ReadOnlyError
            # from a replica, a ResponseError, is unavailable)
            if isinstance(error, _REFUSED) or "can't run this command" in str(error):
                raise StoreUnavailable(
                    f"The session store (Redis) refused the store's user ({type(error).__name__}):"
                    " check the user and password in the store URL and that user's ACL."
                ) from error
            if isinstance(error, _UNAVAILABLE):
                raise StoreUnavailable(
                    f"The session store (Redis) is unavailable ({type(error).__name__}); retry"
                    " shortly."
                ) from error
            if isinstance(error, redis_errors.OutOfMemoryError):
                raise StoreUnavailable(
                    "The session store (Redis) is out of memory (maxmemory) and takes no new"
                    " data; retry shortly. Delete sessions or raise maxmemory."
                ) from error
            raise

    async def _run(self, script: Any, keys: list[str], *args: Any) -> Any:
        return await self._call(lambda: script(keys=keys, args=args))

    async def _save(self, script: Any, keys: list[str], *args: Any) -> Any:
        """Run a script that writes what a turn's answer acknowledges; with
        ``wait_replicas``, on the same connection ``WAIT`` for that many replicas."""
        if not self._wait_replicas:
            return await self._run(script, keys, *args)

        async def saved() -> Any:
            async with self._redis.pipeline(transaction=False) as pipe:
                await script(keys=keys, args=args, client=pipe)
                pipe.execute_command("WAIT", self._wait_replicas, self._wait_ms)
                return await pipe.execute()

        result, acknowledged = await self._call(saved)
        if int(acknowledged) < self._wait_replicas:
            raise StoreUnavailable(
                f"The session store (Redis) saved on the primary but only {acknowledged} of "
                f"{self._wait_replicas} replicas acknowledged it in time; retry shortly."
            )
        return result

    async def ping(self) -> bool:
        """Whether Redis answers (raises :class:`StoreUnavailable` otherwise)."""
        return bool(await self._call(lambda: self._redis.ping()))

    async def create(self, new: NewSession) -> bool:
        session_id, ttl = new.session_id, new.ttl
        reserve = (self._reserve, self._index, session_id, _ms(ttl), new.limit)
        if not await self._run(*reserve):
            await self._sweep()  # the cap may count sessions that expired meanwhile
            if not await self._run(*reserve):
                return False
        try:
            await self._save(
                self._create, self._keys(session_id), new.meta, new.run, _ms(ttl), new.version
            )
        except StoreUnavailable:
            with contextlib.suppress(StoreUnavailable):  # else the sweep frees it in ``ttl``
                await self._run(self._ended, self._index, session_id, 0)
            raise
        return True

    async def read(self, session_id: str, *, ttl: float | None = None) -> StoredSession | None:
        keys = self._keys(session_id)
        found = await self._run(self._read, keys, 0 if ttl is None else _ms(ttl))
        if not found:
            await self._vanished(session_id)
            return None
        return _stored(found)

    async def eviction_policy(self) -> str | None:
        """Redis's ``maxmemory-policy`` (the first node's in a cluster); ``None`` where it
        cannot be read (``CONFIG`` refused by a managed Redis or the user's ACL, or Redis
        unreachable now)."""
        try:
            found = await self._redis.config_get("maxmemory-policy")
        except redis_errors.RedisError:
            return None
        while isinstance(found, dict) and "maxmemory-policy" not in found and found:
            found = next(iter(found.values()))  # a cluster answers per node
        policy = found.get("maxmemory-policy") if isinstance(found, dict) else None
        return policy.decode() if isinstance(policy, bytes) else policy

    async def _vanished(self, session_id: str) -> None:
        """Log a session that is missing while the index still gives it time: evicted. (Only
        a log: a store that fails this check leaves the answer as it was.)"""
        try:
            due = await self._call(lambda: self._redis.zscore(self._index[0], session_id))
        except StoreUnavailable:
            return
        if due is not None and due > time.time() * 1000 + 1000:
            logger.warning(
                "session %s vanished from Redis before its TTL: Redis evicted it; set "
                "maxmemory-policy noeviction for the session store",
                session_id,
            )

    async def delete(self, session_id: str) -> bool:
        existed = bool(await self._run(self._delete, self._keys(session_id)))
        await self._run(self._ended, self._index, session_id, int(existed))
        return existed

    async def acquire(self, session_id: str, token: str, *, lease: float, ttl: float) -> Lease:
        keys = self._keys(session_id)
        outcome = await self._run(self._acquire, keys, token, _ms(lease), _ms(ttl))
        if outcome == b"missing":
            await self._vanished(session_id)
        return Lease(outcome.decode())

    async def release(self, session_id: str, token: str) -> None:
        await self._run(self._release, self._keys(session_id), token)

    async def renew(self, session_id: str, token: str, *, lease: float) -> bool:
        return bool(await self._run(self._renew, self._keys(session_id), token, _ms(lease)))

    async def fence(self, session_id: str, token: str) -> None:
        await self._run(self._fence, self._keys(session_id), token)

    async def get_result(self, session_id: str, key: str) -> bytes | None:
        s, _, r, _ = self._keys(session_id)
        found = await self._run(self._get_result, [s, r], key)
        return bytes(found) if found else None

    async def begin_turn(self, begin: BeginTurn) -> TurnStart:
        key = begin.key
        found = await self._run(
            self._begin_turn,
            self._keys(begin.session_id),
            begin.token,
            _ms(begin.lease),
            _ms(begin.ttl),
            0 if key is None else 1,
            key or "",
            begin.lost,
            begin.keep,
            begin.seen,
        )
        outcome = found[0].decode()
        if outcome == "replay":
            return TurnStart(lease=None, replay=bytes(found[1]))
        if outcome == "suspended":
            return TurnStart(lease=Lease.BUSY, suspended=True)
        if outcome == "missing":
            await self._vanished(begin.session_id)
        if outcome != "acquired":
            return TurnStart(lease=Lease(outcome), same_key=len(found) > 1 and found[1] == 1)
        return TurnStart(lease=Lease.ACQUIRED, session=_stored(found[1:]))

    async def finish_turn(self, finish: FinishTurn) -> Finish:
        key = finish.key
        outcome = await self._save(
            self._finish_turn,
            self._keys(finish.session_id),
            finish.token,
            1 if finish.append else 0,
            finish.append or finish.run,
            finish.state,
            _ms(finish.ttl),
            0 if key is None else 1,
            key or "",
            finish.record,
            finish.keep,
            finish.version,
            finish.base,
        )
        return Finish(outcome.decode())

    async def _sweep(self) -> None:
        """Move the index's expired ids to ``gone`` (and rescore the live ones that were due)."""
        due = await self._run(self._due, self._index)
        if not due:
            return

        async def lefts() -> list[int]:
            async with self._redis.pipeline(transaction=False) as pipe:
                for session_id in due:
                    pipe.pttl(self._keys(session_id.decode())[0])
                return list(await pipe.execute())

        verdicts: list[Any] = []
        for session_id, left in zip(due, await self._call(lefts), strict=True):
            if left <= 0:  # gone, unless a replica answered: asked again where it must be
                left = await self._run(self._left, self._keys(session_id.decode())[:1])
            verdicts += [session_id, left]
        await self._run(self._swept, self._index, *verdicts)

    async def count(self) -> int:
        await self._sweep()
        return int(await self._call(lambda: self._redis.zcard(self._index[0])))

    async def purge_expired(self) -> list[str]:
        await self._sweep()
        now, ids = await self._run(self._gone, self._index, self._since, self._gone_ms)
        self._since = int(now)
        return [session_id.decode() for session_id in ids]

    # -- approvals relay (:mod:`._redis_relay`) -----------------------------------------

    async def listen(self, session_id: str, handler: Handler) -> None:
        """Answer requests :meth:`forward`-ed to ``session_id`` with ``handler``."""
        await self._relay.listen(session_id, handler)

    async def unlisten(self, session_id: str) -> None:
        """Stop answering for ``session_id`` (nothing happens if this store did not)."""
        await self._relay.unlisten(session_id)

    async def forward(self, session_id: str, request: bytes, *, timeout: float) -> bytes | None:
        """The answer of the replica listening for ``session_id`` (``None`` if none does)."""
        return await self._relay.forward(session_id, request, timeout=timeout)

    async def aclose(self) -> None:
        await self._relay.aclose()
        if self._owned:
            await self._redis.aclose()
            for other in self._others:
                await other.aclose()
