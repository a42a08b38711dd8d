"""Session stores: the interface (:class:`SessionStore`), the in-process default and
:func:`open_store` (``memory`` or a Redis URL; ``RedisStore`` is imported lazily from
:mod:`evalport.server.stores.redis`, it needs the ``redis`` extra)."""

from .base import ApprovalRelay, Lease, SessionStore, StoredSession, StoreUnavailable
from .memory import MemoryStore
from .url import open_store

__all__ = [
    "ApprovalRelay",
    "Lease",
    "MemoryStore",
    "SessionStore",
    "StoreUnavailable",
    "StoredSession",
    "open_store",
]
