"""Repeats of a key whose first attempt still runs: here (:class:`InFlight`, which also holds
a streamed turn's stream) or on another replica (:class:`SameKeyWaiter`), and the
turn-lost record a lost one leaves (ARCHITECTURE.md, "Replicas": a retry never runs a
turn that may have partly run).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Final

from evalport.protocol import ProblemType

from ._jobs import Jobs
from ._leases import Leases
from ._limits import Limits
from ._problems import HTTPProblem, problem_body
from ._records import Outcome, idempotency_record
from ._streams import TurnStream
from .stores import BeginTurn, Lease, SessionStore, StoreUnavailable, TurnStart

LOST: Final = Outcome(
    status=409,
    body=problem_body(
        ProblemType.TURN_LOST,
        "The first attempt under this Idempotency-Key did not record its outcome: its "
        "replica went away, or stalled past its lease while another request took the "
        "session over. Its effects are unknown; send the turn again under a new key to "
        "run it again.",
    ),
)


class InFlight:
    """A keyed turn running here: repeats of its key wait for its outcome, or read its
    ``stream`` (a streamed turn's)."""

    __slots__ = ("_waiters", "fingerprint", "stream")

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.stream: TurnStream | None = None
        self._waiters: list[asyncio.Future[Outcome]] = []

    def wait(self) -> asyncio.Future[Outcome]:
        """A future of this waiter's own for the turn's outcome (or its problem)."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return future

    def settle(self, outcome: Outcome | None, error: BaseException | None = None) -> None:
        for future in self._waiters:
            if future.done():
                continue
            if outcome is not None:
                future.set_result(outcome)
            elif isinstance(error, Exception):
                future.set_exception(error)
            else:
                future.cancel()


def lost_record(digest: str) -> bytes:
    """The idempotency record of :data:`LOST` for a keyed turn whose message has ``digest``."""
    return idempotency_record(digest, LOST)


_POLL_FIRST: Final = 0.02  # the first pause between two looks at the store (s)
_POLL_MAX: Final = 0.25  # and the longest one


class SameKeyWaiter:
    """Waiting for another replica's turn under the same key (see ARCHITECTURE.md, "Replicas").

    ``store`` answers the polls (``begin_turn``: the key's record, or the lease);
    ``leases`` give back (or fence) a lease a poll took for a request gone meanwhile.
    """

    def __init__(self, store: SessionStore, jobs: Jobs, limits: Limits, leases: Leases) -> None:
        self._store = store
        self._jobs = jobs
        self._limits = limits
        self._leases = leases
        if leases.renewed:
            self._bound = (limits.turn_timeout or limits.session_ttl) + limits.lease_ttl
        else:
            self._bound = limits.lease_seconds
        self._draining = False

    async def wait(self, begin: BeginTurn, start: TurnStart) -> TurnStart:
        """Wait for the turn that holds the lease under the same key on another replica.

        Polls the store with ``begin`` (20 ms doubling to 250 ms) until it answers the key's record
        (the holder's outcome, or the turn-lost record of a holder that died) or takes the
        lease (the holder released it without a record) or finds another holder or a
        suspended session, for at most the bound in ARCHITECTURE.md, "Replicas"; past it,
        ``start`` (still ``BUSY``) stands. A cancelled request stops waiting, and nothing
        else: a lease that its last poll took goes back.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._bound
        delay = _POLL_FIRST
        while start.same_key and (left := deadline - loop.time()) > 0:
            self._check_draining()
            await asyncio.sleep(min(delay, left))
            self._check_draining()
            delay = min(delay * 2, _POLL_MAX)
            poll = self._jobs.start(self._store.begin_turn(begin))
            try:
                start = await asyncio.shield(poll)
            except asyncio.CancelledError:
                poll.add_done_callback(partial(self._give_back, begin))
                raise
        return start

    def drain(self) -> None:
        """Stop waiting for other replicas' turns before a shutdown: requests that wait
        for their key's first attempt elsewhere answer 503 ``draining`` (with
        ``Retry-After``, so the client retries on another replica); turns run on."""
        self._draining = True

    def _check_draining(self) -> None:
        if self._draining:
            raise HTTPProblem(
                ProblemType.DRAINING,
                "The server is shutting down; retry on another replica.",
                retry_after=self._limits.retry_after,
            )

    def _give_back(self, begin: BeginTurn, poll: asyncio.Future[TurnStart]) -> None:
        """Release the lease a poll took for a request that went away meanwhile (fence it,
        if the store failed to answer the poll: it may still run later)."""
        if poll.cancelled():
            return
        if isinstance(poll.exception(), StoreUnavailable):
            self._leases.fence(begin.session_id, begin.token)
        elif poll.exception() is None and poll.result().lease is Lease.ACQUIRED:
            self._jobs.start(self._leases.give_back(begin.session_id, begin.token))
