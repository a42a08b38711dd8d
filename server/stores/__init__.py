"""Session stores: where the adapter keeps sessions between requests.

- :class:`SessionStore` is the interface (a turn is two atomic steps, each taking one
  request struct: :class:`BeginTurn`, :class:`FinishTurn`), :class:`LeaseRenewal` and
  :class:`ApprovalRelay` what a store shared by replicas adds. The rules every store
  follows are in the interface's module.
- :class:`MemoryStore` is the in-process default; :class:`RedisStore` serves several
  replicas and needs the ``redis`` extra: it is imported when first used.
- :func:`open_store` opens either from a string (``"memory"``, ``"redis://..."``).
- This module is the package's public face; its modules are private.
"""

import typing

from ._base import (
    ApprovalRelay,
    BeginTurn,
    Finish,
    FinishTurn,
    Lease,
    LeaseRenewal,
    NewSession,
    SessionStore,
    StoredSession,
    StoreUnavailable,
    TurnStart,
    new_version,
)
from ._memory import MemoryStore
from ._url import open_store

if typing.TYPE_CHECKING:
    from ._redis import RedisStore

__all__ = [
    "ApprovalRelay",
    "BeginTurn",
    "Finish",
    "FinishTurn",
    "Lease",
    "LeaseRenewal",
    "MemoryStore",
    "NewSession",
    "RedisStore",
    "SessionStore",
    "StoreUnavailable",
    "StoredSession",
    "TurnStart",
    "new_version",
    "open_store",
]


def __getattr__(name: str) -> typing.Any:
    if name == "RedisStore":  # needs the redis extra: imported on first use
        from ._redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
