"""Session stores: the interface (:class:`SessionStore`), the in-process default and
:func:`open_store` (``memory`` or a Redis URL; ``RedisStore`` is imported lazily from
:mod:`evalport.server.stores.redis`, it needs the ``redis`` extra)."""

from .base import (
    ApprovalRelay,
    ComposedTurns,
    Lease,
    LeaseRenewal,
    SessionStore,
    StoredSession,
    StoreUnavailable,
    TurnStart,
    TurnStore,
)
from .memory import MemoryStore
from .url import open_store

__all__ = [
    "ApprovalRelay",
    "ComposedTurns",
    "Lease",
    "LeaseRenewal",
    "MemoryStore",
    "SessionStore",
    "StoreUnavailable",
    "StoredSession",
    "TurnStart",
    "TurnStore",
    "open_store",
]
