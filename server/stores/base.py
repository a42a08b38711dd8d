"""The session store interface: what the adapter keeps about sessions, as bytes.

Rules (every store implements them; the memory store is the reference):

- Records are opaque encoded bytes (the adapter encodes and decodes them), so a store
  over the network (Redis) keeps them as they are.
- A session has ``meta`` (written once at creation), ``run`` (the encoded response of
  its latest accumulated run), a ``state`` (``idle`` or ``suspended``), an idle TTL that
  every write or touch renews, a turn **lease** and its idempotency records.
- The cap on live sessions is enforced by :meth:`SessionStore.create` atomically.
- One turn at a time: :meth:`SessionStore.acquire` takes the session's lease with a
  random token and an expiry (so a crashed holder cannot block the session forever);
  only the holder's token releases it. A session whose lease is held never expires.
- Idempotency records are kept per session, the newest ``keep`` of them; they go with it.
- Expired sessions read as absent. :meth:`SessionStore.purge_expired` deletes them and
  returns their ids so that the adapter can close their live agents.
- A store that cannot reach its backend raises :class:`StoreUnavailable` (a 503
  ``store-unavailable`` problem with ``Retry-After``), never a backend's own exception.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import msgspec
from evalport.protocol import ProblemType

from ..problems import HTTPProblem

__all__ = ["ApprovalRelay", "Lease", "SessionStore", "StoreUnavailable", "StoredSession"]

STORE_RETRY_AFTER = 1


class StoreUnavailable(HTTPProblem):
    """The store's backend cannot be reached: 503 ``store-unavailable`` with ``Retry-After``."""

    def __init__(self, detail: str, *, retry_after: int = STORE_RETRY_AFTER) -> None:
        super().__init__(ProblemType.STORE_UNAVAILABLE, detail, retry_after=retry_after)


class Lease(enum.Enum):
    """The outcome of :meth:`SessionStore.acquire`."""

    ACQUIRED = "acquired"
    BUSY = "busy"
    MISSING = "missing"


class StoredSession(msgspec.Struct, frozen=True, gc=False):
    """A session as a store returns it."""

    meta: bytes
    run: bytes
    state: str


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

    async def write(self, session_id: str, run: bytes, *, state: str, ttl: float) -> bool:
        """Replace the session's run and state and renew its expiry; ``False`` if gone."""
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
