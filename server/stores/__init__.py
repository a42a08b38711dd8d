"""Session stores: where the adapter keeps sessions between requests.

- :class:`SessionStore` is the interface, :class:`TurnStore` a turn's two atomic steps
  (both stores here implement it; :class:`ComposedTurns` builds it for a store of your
  own), :class:`LeaseRenewal` and :class:`ApprovalRelay` what a store shared by replicas
  adds. The rules every store follows are in the interface's module.
- :class:`MemoryStore` is the in-process default; :class:`RedisStore` serves several
  replicas and needs the ``redis`` extra: it is imported when first used.
- :func:`open_store` opens either from a string (``"memory"``, ``"redis://..."``).
- This module is the package's public face; its modules are private.
"""

import typing

from ._base import (
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
from ._memory import MemoryStore
from ._url import open_store

if typing.TYPE_CHECKING:
    from ._redis import RedisStore

__all__ = [
    "ApprovalRelay",
    "ComposedTurns",
    "Lease",
    "LeaseRenewal",
    "MemoryStore",
    "RedisStore",
    "SessionStore",
    "StoreUnavailable",
    "StoredSession",
    "TurnStart",
    "TurnStore",
    "open_store",
]


def __getattr__(name: str) -> typing.Any:
    if name == "RedisStore":  # needs the redis extra: imported on first use
        from ._redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
