"""Waiting for a key's first attempt on another replica, and what a lost one answers.

:class:`SameKeyWaiter` is what a keyed turn meets when the store reports the session's
lease held by the same key on another replica (:attr:`~evalport.server.stores.TurnStart.same_key`: Redis does; the
memory store, one process, never needs to: its manager waits for its own turns in flight).

Rules:

- A keyed turn hands the store, with its lease, its own turn-lost record
  (:func:`lost_record`: 409 ``turn-lost`` under its key and message). The store keeps it
  while the turn holds the lease and drops it when the turn finishes or releases; if
  instead the lease lapses (the replica went away, or stalled past ``lease_ttl``), the
  next call that finds the lease free stores it under the key, atomically. A retry of
  the key then replays 409 ``turn-lost``, however late it comes, and the turn is not run
  again: it may have partly run, and a turn that brought one replica down would take the
  next with it. The client sends it under a new key to run it. (The memory store never
  does this: its turns die only with its process, and its sessions with them.)
- A retry that meets its key's holder polls the store (20 ms doubling to 250 ms) until
  it finds the key's record, answered as a replay (the agent ran once, or the turn was
  lost), or takes the lease: the holder released it without a record (it answered a
  problem, which stores nothing), so the retry runs the turn.
- It waits at most the turn timeout plus ``lease_ttl``: a live holder ends within the
  turn timeout, a dead one's lease lapses within ``lease_ttl`` of its last renewal (with
  a store that cannot renew leases: ``lease_seconds``). Then, or when another turn holds
  the lease (another key, or none), the answer is 409 ``session-busy``.
- A request cancelled while waiting cancels only its waiting (a lease its last look took
  goes back). A look the store failed to answer may have taken the lease unseen, or
  may still take it once a stalled Redis resumes: its token is fenced
  (:meth:`~._leases.Leases.fence`), so the next retry runs the turn. After
  :meth:`SameKeyWaiter.drain` a waiting request answers 503 ``draining`` with
  ``Retry-After`` (the client retries on another replica).
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


def lost_record(digest: str) -> bytes:
    """The idempotency record of :data:`LOST` for a keyed turn whose message has ``digest``."""
    return idempotency_record(digest, LOST)


_POLL_FIRST: Final = 0.02  # the first pause between two looks at the store (s)
_POLL_MAX: Final = 0.25  # and the longest one


class SameKeyWaiter:
    """Waiting for another replica's turn under the same key (see the module rules).

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
        suspended session, for at most the bound of the module's rules; past it,
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
