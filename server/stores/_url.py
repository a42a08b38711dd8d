"""Choose a session store by a string: ``memory`` or a Redis URL.

``evalport serve --store URL`` and ``EvalAdapter(store=URL)`` both come here. ``memory``
(the default) is the in-process store; ``redis://``, ``rediss://`` and ``unix://`` URLs
open a :class:`~evalport.server.stores._redis.RedisStore` (the ``redis`` extra). Anything
else is a ``ValueError`` that names the accepted forms.
"""

from __future__ import annotations

from typing import Final

from ._base import SessionStore
from ._memory import MemoryStore

_REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://")


def open_store(spec: str) -> SessionStore:
    """The store that ``spec`` names (``memory`` or ``redis://host:port/db``)."""
    if spec == "memory":
        return MemoryStore()
    if spec.startswith(_REDIS_SCHEMES):
        from ._redis import RedisStore

        return RedisStore(spec)
    raise ValueError(
        f"unknown session store {spec!r}: use 'memory' or a Redis URL such as "
        "redis://127.0.0.1:6379/0"
    )
