"""Session stores: where the adapter keeps sessions between requests.

:class:`SessionStore` is the interface (a turn is two atomic calls, :class:`BeginTurn` and
:class:`FinishTurn`), :class:`LeaseRenewal` and :class:`ApprovalRelay` what a store shared
by replicas adds. :class:`MemoryStore` is the in-process default; :class:`RedisStore`
serves several replicas (the ``redis`` extra); :func:`open_store` opens either from a
string (``"memory"``, ``"redis://..."``).
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
