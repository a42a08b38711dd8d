"""The session store interface: what the adapter keeps about sessions, as bytes.

Rules (every store implements them; the memory store is the reference):

- Records are opaque encoded bytes (the adapter encodes and decodes them), so a store
  over the network (Redis) keeps them as they are.
- A session has ``meta`` (written once at creation), ``run`` (the encoded response of
  its latest accumulated run), a ``state`` (``idle`` or ``suspended``), an idle TTL that
  every write or touch renews, a turn **lease** and its idempotency records.
- Every call that writes a run takes the run's new **version** from the adapter
  (:func:`new_version`: a unique id of that write, never a counter: after a lost write,
  as a failover or a restore from a snapshot can lose one, two replicas could reach the
  same count with different runs), and the store keeps it; versions are compared for
  equality only. Every store versions runs this one way.
- A run is kept as a log: ``run`` as last written whole and the turns **appended**
  since, each an encoded delta (:func:`evalport.protocol.run_delta`) of the run against
  the one stored before it, so that a turn stores what it added instead of the whole
  run again. ``begin_turn`` given the version the caller holds (``seen``) leaves the run
  and the appended turns out (``run`` empty) when the stored run is that version.
- A turn appended is a delta against the run of version ``base``: ``finish_turn``
  appends it only while the stored run is that version, and otherwise stores nothing,
  keeps the lease and answers :attr:`Finish.STALE` (the adapter then writes the run whole).
- The cap on live sessions is enforced by :meth:`SessionStore.create` atomically.
- One turn at a time: the lease is taken with a random token and an expiry (so a
  crashed holder cannot block the session forever); only the holder's token releases
  it. A session whose lease is held never expires.
- A store shared by replicas may let the holder renew its lease (:class:`LeaseRenewal`):
  the adapter then takes a short lease and renews it while the turn runs, so that a
  holder that died frees the session soon; ``renew`` extends only a lease that the
  caller's token still holds, and never takes one back that expired or moved on.
- Idempotency records are kept per session, the newest ``keep`` of them; they go with it.
- Expired sessions read as absent. :meth:`SessionStore.purge_expired` deletes them and
  returns their ids so that the adapter can close their live agents.
- A turn's bookkeeping is two calls, each one request struct and one atomic step (one
  round trip for a store over the network): :meth:`SessionStore.begin_turn`
  (:class:`BeginTurn`) answers the key's idempotency record (no lease taken), or
  (unless the session is suspended: :attr:`TurnStart.suspended`, no lease taken) takes
  the lease and reads the session; :meth:`SessionStore.finish_turn` (:class:`FinishTurn`)
  writes the run whole or appends the turn, stores the key's record and releases the
  lease, and answers a :class:`Finish`.
- Fencing: ``finish_turn`` stores only if its token took the lease last (it may have
  lapsed, if nobody took it since), and answers :attr:`Finish.LOST`, storing nothing,
  once another acquisition took it: a holder that stalled past its lease never
  overwrites the turn that took the session over.
- A shared store's ``begin_turn`` records the key of a keyed turn that takes the lease
  and its ``lost`` record (409 ``turn-lost``), cleared when the holder releases. The
  next ``begin_turn`` or ``acquire`` that finds the lease lapsed with a holder still
  recorded (it died, or stalled and was displaced) stores that record under its key
  first: a retry of the key replays it, however late. A ``BUSY`` answer says whether the
  lease's holder runs the same key (:attr:`TurnStart.same_key`): the adapter then waits
  for that turn's record instead of refusing the retry. A store in one process (the
  memory store: its turns die with it and the adapter's own table of keys in flight
  covers repeats) need not record holders and always says ``False``: such a retry is a
  409, and nothing is ever lost.
- A store that cannot reach its backend raises :class:`StoreUnavailable` (a 503
  ``store-unavailable`` problem with ``Retry-After``), never a backend's own exception.
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
