"""The session store interface: what the adapter keeps about sessions, as bytes.

Rules (every store implements them; the memory store is the reference):

- Records are opaque encoded bytes (the adapter encodes and decodes them), so a store
  over the network (Redis) keeps them as they are.
- A session has ``meta`` (written once at creation), ``run`` (the encoded response of
  its latest accumulated run), a ``state`` (``idle`` or ``suspended``), an idle TTL that
  every write or touch renews, a turn **lease** and its idempotency records.
- A store may keep a run as a log (both stores here do): ``run`` as last written whole
  and the turns **appended** since, each an encoded delta
  (:func:`evalport.protocol.run_delta`) of the run against the one stored before it, so
  that a turn stores what it added instead of the whole run again. Such a store
  **versions** runs: creating a session and every write, whole or appended, give the run
  a new version (:attr:`StoredSession.version`), a unique id of that write
  (:func:`new_version`; never a counter: after a lost write, as a failover or a restore
  from a snapshot can lose one, two replicas could reach the same count with different
  runs), compared for equality only. ``begin_turn`` given
  the version the caller holds (``seen``) leaves the run and the appended turns out
  (``run`` empty) when the stored run is that version. A store without versions
  (``version`` 0, as :class:`ComposedTurns` over a store of your own) has no appended
  turns and ignores ``seen`` and ``append``: the adapter writes whole runs to it.
- A turn appended is a delta against the run of version ``base``: ``finish_turn``
  appends it only while the stored run is that version, and otherwise stores nothing,
  keeps the lease and returns -1 (the adapter then writes the run whole).
- The cap on live sessions is enforced by :meth:`SessionStore.create` atomically.
- One turn at a time: :meth:`SessionStore.acquire` takes the session's lease with a
  random token and an expiry (so a crashed holder cannot block the session forever);
  only the holder's token releases it. A session whose lease is held never expires.
- A store shared by replicas may let the holder renew its lease (:class:`LeaseRenewal`):
  the adapter then takes a short lease and renews it while the turn runs, so that a
  holder that died frees the session soon; ``renew`` extends only a lease that the
  caller's token still holds, and never takes one back that expired or moved on.
- Idempotency records are kept per session, the newest ``keep`` of them; they go with it.
- Expired sessions read as absent. :meth:`SessionStore.purge_expired` deletes them and
  returns their ids so that the adapter can close their live agents.
- A turn's bookkeeping is two calls (:class:`TurnStore`, which both stores implement,
  and a store over the network in one round trip each): :meth:`TurnStore.begin_turn`
  is ``get_result`` (a record under the key answers, no lease is taken), then (unless
  the session is suspended: :attr:`TurnStart.suspended`, no lease taken) ``acquire``
  and ``read``; :meth:`TurnStore.finish_turn` is ``write``, ``put_result`` and
  ``release`` (or, with ``append``, adding that turn to the run's log instead of
  ``write``); each as one atomic step. :class:`ComposedTurns` builds them from the
  single operations for a store of your own without them.
- Fencing: ``finish_turn``, and ``write`` given the holder's ``token``, store only if
  that token took the lease last (it may have lapsed, if nobody took it since), and
  return ``False``, storing nothing, once another acquisition took it: a holder that
  stalled past its lease never overwrites the turn that took the session over.
- A shared store's ``begin_turn`` records the key of a keyed turn that takes the lease
  and its ``lost`` record (409 ``turn-lost``), cleared when the holder releases. The
  next ``begin_turn`` or ``acquire`` that finds the lease lapsed with a holder still
  recorded (it died, or stalled and was displaced) stores that record under its key
  first: a retry of the key replays it, however late. A ``BUSY`` answer says whether the
  lease's holder runs the same key (:attr:`TurnStart.same_key`): the adapter then waits
  for that turn's record instead of refusing the retry. A store that does not record
  holders (the memory store and :class:`ComposedTurns`: one process holds every turn,
  its turns die with it and the adapter's own table of keys in flight covers repeats)
  always says ``False``: such a retry is a 409, and nothing is ever lost.
- A store that cannot reach its backend raises :class:`StoreUnavailable` (a 503
  ``store-unavailable`` problem with ``Retry-After``), never a backend's own exception.
"""

from __future__ import annotations

import enum
import inspect
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

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
    ``appended`` since and the run's ``version`` (0 from a store without versions)."""

    meta: bytes
    run: bytes
    state: str
    version: int = 0
    appended: tuple[bytes, ...] = ()


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live between requests."""

    async def create(
        self, session_id: str, meta: bytes, run: bytes, *, ttl: float, limit: int
    ) -> bool:
        """Add a session; ``False`` when ``limit`` live sessions already exist."""
        ...

    async def read(self, session_id: str, *, ttl: float | None = None) -> StoredSession | None:
        """The session, or ``None`` if absent or expired; ``ttl`` renews its expiry."""
        ...

    async def write(
        self, session_id: str, run: bytes, *, state: str, ttl: float, token: str | None = None
    ) -> bool:
        """Replace the session's run (and its log: a store with versions gives it the
        next version) and state and renew its expiry; ``False`` if gone, or if ``token``
        is given and another acquisition took the lease since it did."""
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

    async def put_result(self, session_id: str, key: str, record: bytes, *, keep: int) -> None:
        """Store an idempotency record, keeping the newest ``keep`` of the session."""
        ...

    async def count(self) -> int:
        """Live (unexpired) sessions."""
        ...

    async def purge_expired(self) -> list[str]:
        """Delete expired sessions; returns their ids."""
        ...

    async def aclose(self) -> None:
        """Release the store's resources."""
        ...


class TurnStart(msgspec.Struct, frozen=True, gc=False):
    """The outcome of :meth:`TurnStore.begin_turn`.

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
class TurnStore(Protocol):
    """A store that does a turn's bookkeeping in two atomic steps (one round trip each)."""

    async def begin_turn(
        self,
        session_id: str,
        token: str,
        *,
        lease: float,
        ttl: float,
        key: str | None = None,
        lost: bytes = b"",
        keep: int = 0,
        seen: int = 0,
    ) -> TurnStart:
        """``get_result(key)`` if ``key``; unless it answers, ``acquire`` then ``read``
        (recording ``key`` as the holder's, so that a ``BUSY`` can tell ``same_key``, and
        ``lost``: the record that a later turn stores under ``key``, keeping ``keep``, if
        this holder never finishes); the run left out if its version is ``seen``."""
        ...

    async def finish_turn(
        self,
        session_id: str,
        token: str,
        *,
        run: bytes | None,
        state: str,
        ttl: float,
        key: str | None = None,
        record: bytes = b"",
        keep: int = 0,
        append: bytes = b"",
        base: int = 0,
    ) -> int:
        """``write`` (unless ``run`` is ``None``; a store with versions adds ``append`` to
        the run's log instead, when given, if the run's version is ``base``), ``put_result``
        (if ``key``), ``release``, only while ``token`` holds the lease (or held it last).
        Returns the run's new version (1 from a store without versions); 0, storing
        nothing, when another acquisition took the lease since; -1, storing nothing and
        keeping the lease, when the run to append to is not of version ``base``."""
        ...


class ComposedTurns:
    """:class:`TurnStore` from a store's single operations (several calls, not atomic).

    The single operations keep no versions (the adapter writes whole runs: ``seen`` and
    ``append`` are ignored) and do not record a holder's key, so ``same_key`` is never true,
    a holder that died leaves no turn-lost record (``lost`` is ignored), and
    ``finish_turn`` is not fenced (it stores whatever the token): enough for a store in
    one process, whose turns die with it and whose leases last as long as a turn may run.
    A store shared by replicas implements :class:`TurnStore` itself.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    async def begin_turn(
        self,
        session_id: str,
        token: str,
        *,
        lease: float,
        ttl: float,
        key: str | None = None,
        lost: bytes = b"",
        keep: int = 0,
        seen: int = 0,
    ) -> TurnStart:
        store = self.store
        if key is not None:
            record = await store.get_result(session_id, key)
            if record is not None:
                return TurnStart(lease=None, replay=record)
        outcome = await store.acquire(session_id, token, lease=lease, ttl=ttl)
        if outcome is not Lease.ACQUIRED:
            return TurnStart(lease=outcome)
        stored = await store.read(session_id)
        if stored is None:  # gone in between (a store whose steps are not atomic)
            return TurnStart(lease=Lease.MISSING)
        if stored.state == "suspended":
            await store.release(session_id, token)
            return TurnStart(lease=Lease.BUSY, suspended=True)
        # (no versions here, even over a store that has them: its finish writes whole runs)
        return TurnStart(lease=outcome, session=msgspec.structs.replace(stored, version=0))

    async def finish_turn(
        self,
        session_id: str,
        token: str,
        *,
        run: bytes | None,
        state: str,
        ttl: float,
        key: str | None = None,
        record: bytes = b"",
        keep: int = 0,
        append: bytes = b"",
        base: int = 0,
    ) -> int:
        store = self.store
        try:
            if run is not None:
                await store.write(session_id, run, state=state, ttl=ttl)
            if key is not None:
                await store.put_result(session_id, key, record, keep=keep)
            return 1
        finally:
            await store.release(session_id, token)


def turns_of(store: SessionStore) -> TurnStore:
    """The :class:`TurnStore` of ``store``: the store itself; a :class:`TurnStore` of an
    earlier contract (its ``begin_turn`` takes no ``seen``, its ``finish_turn`` no
    ``append`` nor ``base``) called as that contract says, with whole runs; else
    :class:`ComposedTurns` over it."""
    if not isinstance(store, TurnStore):
        return ComposedTurns(store)
    if _takes(store.begin_turn, "seen") and _takes(store.finish_turn, "append", "base"):
        return store
    return _EarlierTurns(store)


def _takes(method: Callable[..., Any], *names: str) -> bool:
    parameters = inspect.signature(method).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return all(name in parameters for name in names)


class _EarlierTurns:
    """A :class:`TurnStore` of the contract before runs had versions: whole runs only."""

    def __init__(self, turns: Any) -> None:
        self._turns = turns

    async def begin_turn(
        self, session_id: str, token: str, *, seen: int = 0, **options: Any
    ) -> TurnStart:
        start: TurnStart = await self._turns.begin_turn(session_id, token, **options)
        if start.session is None or not start.session.version:
            return start
        session = msgspec.structs.replace(start.session, version=0)  # (whole writes only)
        return msgspec.structs.replace(start, session=session)

    async def finish_turn(
        self, session_id: str, token: str, *, append: bytes = b"", base: int = 0, **options: Any
    ) -> int:
        return 1 if await self._turns.finish_turn(session_id, token, **options) else 0


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
