"""A turn's lease on its session: its token, its renewal while the turn runs, and fencing a
call the store failed to answer (ARCHITECTURE.md, "Replicas"). Only the token that took a
lease releases, renews or fences it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets

from ._jobs import Jobs
from ._limits import Limits
from .stores import LeaseRenewal, SessionStore, StoreUnavailable

logger = logging.getLogger("evalport.server")

FENCE_FOR = 60.0
"""Seconds a fence is tried for before the lease is left to lapse (and logged)."""


class Leases:
    """Tokens, lengths, keepers and fences of the turn leases a session manager takes."""

    def __init__(self, store: SessionStore, limits: Limits, jobs: Jobs) -> None:
        self._store = store
        self._renewal = store if isinstance(store, LeaseRenewal) else None
        self._limits = limits
        self._jobs = jobs
        self._prefix = secrets.token_hex(8) + "-"
        self._count = 0
        self._pending: dict[str, set[str]] = {}  # tokens to fence, by session

    def token(self) -> str:
        """A new token for one acquisition."""
        self._count += 1
        return f"{self._prefix}{self._count}"

    @property
    def renewed(self) -> bool:
        """Whether the store renews leases (they are then short, and kept)."""
        return self._renewal is not None

    @property
    def length(self) -> float:
        """How long a turn's lease lasts when taken (and after each renewal)."""
        if self._renewal is not None:
            return self._limits.lease_ttl
        return self._limits.lease_seconds

    def fence(self, session_id: str, token: str) -> None:
        """Fence ``token``, whose call for the lease, finish or release failed (see
        ARCHITECTURE.md, "Replicas")."""
        if self._renewal is not None:
            self._pending.setdefault(session_id, set()).add(token)
            self._jobs.start(self._fence(self._renewal, session_id, token))

    async def give_back(self, session_id: str, token: str) -> None:
        """Release the lease ``token`` took for a turn that stored nothing; if the store
        fails to answer, fence ``token`` instead of raising: the turn's own failure is
        its answer, not the release's."""
        try:
            await self._store.release(session_id, token)
        except StoreUnavailable:
            self.fence(session_id, token)

    def fencing(self, session_id: str) -> bool:
        """Whether tokens of ``session_id`` wait to be fenced (see :meth:`fenced`)."""
        return session_id in self._pending

    async def fenced(self, session_id: str) -> None:
        """Fence now the tokens of ``session_id`` still to be fenced, before a turn takes
        its lease (a store still down raises :class:`~.stores.StoreUnavailable`)."""
        assert self._renewal is not None  # (only such a store has tokens to fence)
        for token in list(self._pending.get(session_id, ())):
            await self._renewal.fence(session_id, token)
            self._done(session_id, token)

    async def _fence(self, store: LeaseRenewal, session_id: str, token: str) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + FENCE_FOR
        while token in self._pending.get(session_id, ()):
            try:
                await store.fence(session_id, token)
                break
            except StoreUnavailable:
                if loop.time() > until:
                    logger.warning(
                        "session %s: the store stayed unavailable, so a lease its failed call "
                        "may have taken lapses on its own",
                        session_id,
                    )
                    break
                await asyncio.sleep(0.25)
        self._done(session_id, token)

    def _done(self, session_id: str, token: str) -> None:
        pending = self._pending.get(session_id)
        if pending is not None:
            pending.discard(token)
            if not pending:
                del self._pending[session_id]

    def keep(self, session_id: str, token: str) -> LeaseKeeper | None:
        """Keep the lease that ``token`` just took, if the store renews leases."""
        if self._renewal is None:
            return None
        return LeaseKeeper(self._jobs, self._renewal, session_id, token, self._limits.lease_ttl)


class LeaseKeeper:
    """Renews one turn's lease every third of ``lease`` seconds until :meth:`stop`.

    Until the first renewal is due it is a timer on the loop; then a job renews the
    lease, sleeps, and so on.
    """

    __slots__ = (
        "_busy",
        "_jobs",
        "_lease",
        "_renewal",
        "_session_id",
        "_task",
        "_timer",
        "_token",
        "stopped",
    )

    def __init__(
        self, jobs: Jobs, renewal: LeaseRenewal, session_id: str, token: str, lease: float
    ) -> None:
        self._jobs = jobs
        self._renewal = renewal
        self._session_id = session_id
        self._token = token
        self._lease = lease
        self._task: asyncio.Task[None] | None = None
        self._busy = False  # a renewal is in flight
        self.stopped = False
        self._timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(
            lease / 3, self._due
        )

    def _due(self) -> None:
        self._timer = None
        if not self.stopped:
            self._task = self._jobs.start(self._renew())

    async def _renew(self) -> None:
        session_id, every = self._session_id, self._lease / 3
        while True:
            self._busy = True
            try:
                held = await self._renewal.renew(session_id, self._token, lease=self._lease)
            except StoreUnavailable as error:
                held = True  # unknown: try again, the lease may still be ours
                if not self.stopped:
                    logger.warning(
                        "session %s: could not renew the turn's lease: %s", session_id, error.detail
                    )
            except Exception:
                logger.exception("session %s: renewing the turn's lease failed", session_id)
                return
            finally:
                self._busy = False
            if self.stopped:  # the job ended meanwhile (and may have released the lease)
                return
            if not held:
                logger.warning(
                    "session %s: the turn's lease expired or another turn took it; "
                    "its turn runs on without it",
                    session_id,
                )
                return
            await asyncio.sleep(every)

    def stop(self) -> None:
        """No more renewals (the job ends: its final store call releases the lease). A
        renewal already sent completes; one that waits for its time is cancelled."""
        if self.stopped:
            return
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and not self._busy:
            self._task.cancel()
