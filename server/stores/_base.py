"""The session store interface: a contract as a Protocol over request and answer structs.
Every store keeps its rules (ARCHITECTURE.md, "The store contract"; the memory store is
the reference, ``tests/server/replicas/test_store_contract.py`` the check).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import msgspec
from evalport.protocol import ProblemType

from .._problems import HTTPProblem

STORE_RETRY_AFTER = 1


class StoreUnavailable(HTTPProblem):
    """The store's backend cannot be reached: 503 ``store-unavailable`` with ``Retry-After``."""

    def __init__(self, detail: str, *, retry_after: int = STORE_RETRY_AFTER) -> None:
        super().__init__(ProblemType.STORE_UNAVAILABLE, detail, retry_after=retry_after)


def new_version() -> int:
    """A run version for a new write: random, never 0, exact in a double (Redis's Lua).
    From :mod:`random` (seeded from the OS, and again in a forked child), not
    :mod:`secrets`: a version is an id, not a secret, and this costs 3 us less a turn."""
    return random.getrandbits(52) + 1


class Lease(enum.Enum):
    """The outcome of :meth:`SessionStore.acquire`."""

    ACQUIRED = "acquired"
    BUSY = "busy"
    MISSING = "missing"


class StoredSession(msgspec.Struct, frozen=True, gc=False):
    """A session as a store returns it: ``run`` as last written whole, the turns
    ``appended`` since and the run's ``version``."""

    meta: bytes
    run: bytes
    state: str
    version: int
    appended: tuple[bytes, ...] = ()


class NewSession(msgspec.Struct, frozen=True, gc=False):
    """A session to add: its ``meta`` and first ``run`` (of ``version``), its idle
    ``ttl`` and the cap on live sessions (``limit``)."""

    session_id: str
    meta: bytes
    run: bytes
    version: int
    ttl: float
    limit: int


class BeginTurn(msgspec.Struct, frozen=True, gc=False):
    """A turn's first store step: the lease for ``lease`` seconds under ``token`` (and the
    idle ``ttl`` renewed); ``key`` the turn's idempotency key, ``lost`` the record that a
    later turn stores under it if this holder never finishes (keeping ``keep``); ``seen``
    the run version the caller holds (0: none)."""

    session_id: str
    token: str
    lease: float
    ttl: float
    key: str | None = None
    lost: bytes = b""
    keep: int = 0
    seen: int = 0


class FinishTurn(msgspec.Struct, frozen=True, gc=False):
    """A turn's last store step: the run, of ``version`` from now on, as ``run`` (whole)
    or as the turn to ``append`` to the run of version ``base``; the session's ``state``
    and idle ``ttl``; the ``record`` to keep under ``key`` (the newest ``keep``)."""

    session_id: str
    token: str
    state: str
    ttl: float
    version: int
    run: bytes = b""
    append: bytes = b""
    base: int = 0
    key: str | None = None
    record: bytes = b""
    keep: int = 0


class Finish(enum.Enum):
    """What :meth:`SessionStore.finish_turn` did."""

    STORED = "stored"
    """The run and the record are stored and the lease released."""
    LOST = "lost"
    """Nothing stored: another acquisition took the lease since (fencing)."""
    STALE = "stale"
    """Nothing stored and the lease kept: the run is not of version ``base``."""


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live between requests."""

    async def create(self, new: NewSession) -> bool:
        """Add a session; ``False`` when ``new.limit`` live sessions already exist."""
        ...

    async def read(self, session_id: str, *, ttl: float | None = None) -> StoredSession | None:
        """The session, or ``None`` if absent or expired; ``ttl`` renews its expiry."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Forget the session and its idempotency records; ``False`` if it was absent."""
        ...

    async def acquire(self, session_id: str, token: str, *, lease: float, ttl: float) -> Lease:
        """Take the session's turn lease for ``lease`` seconds (and renew its TTL)."""
        ...

    async def release(self, session_id: str, token: str) -> None:
        """Give the lease back, if ``token`` still holds it."""
        ...

    async def get_result(self, session_id: str, key: str) -> bytes | None:
        """The idempotency record stored under ``key`` for the session."""
        ...

    async def count(self) -> int:
        """Live (unexpired) sessions."""
        ...

    async def purge_expired(self) -> list[str]:
        """Delete expired sessions; returns their ids."""
        ...

    async def begin_turn(self, begin: BeginTurn) -> TurnStart:
        """The key's record if it has one; else, unless the session is suspended, take
        the lease and read the session (the run left out if its version is ``seen``)."""
        ...

    async def finish_turn(self, finish: FinishTurn) -> Finish:
        """Write or append the run, store the key's record and release the lease, only
        while ``token`` holds the lease (or held it last)."""
        ...

    async def aclose(self) -> None:
        """Release the store's resources."""
        ...


class TurnStart(msgspec.Struct, frozen=True, gc=False):
    """The outcome of :meth:`SessionStore.begin_turn`.

    ``replay`` is the idempotency record stored under the turn's key (then ``lease`` is
    ``None``: none was taken); otherwise ``lease`` tells, and with ``ACQUIRED``
    ``session`` is the session as stored. With ``BUSY``, ``same_key`` is true when the
    lease's holder is a turn under the same key (never, from a store that does not
    record the holder's key). ``suspended`` (with ``BUSY``; no lease taken): the session
    waits for approval decisions, so it takes no turn.
    """

    lease: Lease | None
    session: StoredSession | None = None
    replay: bytes | None = None
    same_key: bool = False
    suspended: bool = False


@runtime_checkable
class ApprovalRelay(Protocol):
    """A store that carries approval decisions to the replica holding a suspended turn.

    The holder listens (:meth:`listen`) while its turn is suspended; any replica may
    :meth:`forward` a request and get the holder's answer (``None`` if nobody listens).
    The in-process store needs none of it: one process holds every turn.
    """

    async def listen(self, session_id: str, handler: Callable[[bytes], Awaitable[bytes]]) -> None:
        """Answer forwarded requests for ``session_id`` with ``handler``."""
        ...

    async def unlisten(self, session_id: str) -> None:
        """Stop answering for ``session_id``."""
        ...

    async def forward(self, session_id: str, request: bytes, *, timeout: float) -> bytes | None:
        """The listening replica's answer to ``request``; ``None`` if no replica listens."""
        ...


@runtime_checkable
class LeaseRenewal(Protocol):
    """A store whose leases their holder can extend while its turn runs.

    The adapter then takes each turn's lease for ``Limits.lease_ttl`` (short) and renews it
    every third of that until the turn's job ends. A store without it gets leases as long
    as a turn may run (``Limits.lease_seconds``). The in-process store needs none: one
    process holds every turn, and its sessions die with it.
    """

    async def renew(self, session_id: str, token: str, *, lease: float) -> bool:
        """Make the lease end ``lease`` seconds from now if ``token`` still holds it
        (atomically); ``False``, changing nothing, if it expired or another holds it."""
        ...

    async def fence(self, session_id: str, token: str) -> None:
        """``token`` asked for the lease and the store failed to answer (a stalled Redis
        may still run the call later): give the lease back if ``token`` took it, as if
        never taken, and refuse it to ``token`` from now on (atomically)."""
        ...
