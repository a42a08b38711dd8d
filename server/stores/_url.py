"""Choose a session store by a string: ``memory`` or a Redis URL (the forms:
:mod:`evalport.protocol._redis_url`); anything else is a ``ValueError`` naming them.
"""

from __future__ import annotations

from evalport.protocol._redis_url import is_redis_url, parse_redis_url, redacted

from ._base import SessionStore
from ._memory import MemoryStore


def open_store(spec: str) -> SessionStore:
    """The store that ``spec`` names (``memory`` or a Redis URL such as ``redis://host:6379/0``)."""
    if spec == "memory":
        return MemoryStore()
    if is_redis_url(spec):
        parse_redis_url(spec)  # a bad URL says so before the redis extra is needed
        from ._redis import RedisStore

        return RedisStore(spec)
    raise ValueError(
        f"unknown session store {redacted(spec)!r}: use 'memory' or a Redis URL such as "
        "redis://127.0.0.1:6379/0, rediss://HOST:6380/0, "
        "redis+sentinel://HOST:26379/SERVICE or redis+cluster://HOST:7000"
    )
