"""Choose a session store by a string: ``memory`` or a Redis URL.

``evalport serve --store URL`` and ``EvalAdapter(store=URL)`` both come here. ``memory``
(the default) is the in-process store; a Redis URL (``redis://``, ``rediss://``,
``unix://``, ``redis+sentinel://``, ``redis+cluster://`` and their TLS forms, see
:mod:`evalport.protocol._redis_url`) opens a
:class:`~evalport.server.stores._redis.RedisStore` (the ``redis`` extra). Anything else is
a ``ValueError`` that names the accepted forms.
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
