"""Sessions of the adapter (:class:`SessionManager`): create, attach, delete, approvals, over
the live agents, the turn runner, the leases and the jobs it composes (ARCHITECTURE.md,
"Sessions"). Every store takes the same path.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    CreateSessionRequest,
    ProblemType,
)
from evalport.protocol.runtime import AgentSession, DecisionError, session_factory

from ._jobs import Jobs
from ._leases import Leases
from ._limits import Limits
from ._live import LiveSessions
from ._problems import HTTPProblem, decision_problem, not_found
from ._records import (
    SUSPENDED,
    Outcome,
    RunPolicy,
    SessionMeta,
    encode_meta,
    iso,
    log_details,
    new_session_id,
    sent_body,
    session_info,
)
from ._relaying import answer_relayed, forward_decisions
from ._runlog import Reached, answer_body
from ._turns import TurnRunner
from ._watchdog import Watchdog
from .stores import (
    ApprovalRelay,
    Lease,
    MemoryStore,
    NewSession,
    SessionStore,
    StoreUnavailable,
    new_version,
)


class SessionManager:
    """Live sessions of one adapter over a :class:`SessionStore`."""

    def __init__(
        self,
        agent: object,
        *,
        limits: Limits,
        store: SessionStore | None = None,
        policy: RunPolicy | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self.store: SessionStore = store if store is not None else MemoryStore()
        self._relay = self.store if isinstance(self.store, ApprovalRelay) else None
        self._wall_clock = wall_clock
        self._policy = policy
        self.jobs = Jobs()
        self.leases = Leases(self.store, limits, self.jobs)
        self.watchdog = Watchdog()
        self.workers = ThreadPoolExecutor(limits.turn_threads, thread_name_prefix="evalport-turn")
        self.live = LiveSessions(
            session_factory(agent),
            self.store,
            self._relay,
            workers=self.workers,
            clock=self.watchdog,
            log_details=log_details(policy),
        )
        self.turns = TurnRunner(
            self.store,
            limits,
            self.live,
            self.leases,
            self.jobs,
            policy=policy,
            relay=self._relay,
            relayed=self._relayed,
        )

    @property
    def live_count(self) -> int:
        """Sessions whose agent lives in this process."""
        return len(self.live)

    # -- sessions -----------------------------------------------------------------------------

    async def create(self, request: CreateSessionRequest) -> tuple[str, str]:
        """Open a session; returns its id and ``expiresAt``."""
        await self.live.sweep()
        limits = self.limits
        session_id = new_session_id()
        info = session_info(session_id, request)
        now = self._wall_clock()
        meta = encode_meta.encode(
            SessionMeta(
                case_id=request.case_id,
                description=request.description,
                metadata=request.metadata,
                created_at=iso(now),
                faults=list(request.faults) if request.faults else None,
            )
        )
        # The session is stored first (the store enforces the cap), then its agent built:
        # no agent is built for a session the cap refuses.
        body = answer_body(AgentRun(session_id=session_id), None, self._policy)
        new = NewSession(
            session_id, meta, body, new_version(), limits.session_ttl, limits.max_sessions
        )
        if not await self.store.create(new):
            raise HTTPProblem(
                ProblemType.SESSION_LIMIT,
                f"The server holds its maximum of {limits.max_sessions} live sessions; "
                "retry later.",
                retry_after=limits.retry_after,
            )
        try:
            live = await self.live.open(info)
        except BaseException:  # the factory failed: the session was never opened
            with contextlib.suppress(StoreUnavailable):  # (else it expires with its TTL)
                await self.store.delete(session_id)
            raise
        self.live.adopt(session_id, live, Reached(new.version, 0, len(body)))
        return session_id, iso(now + limits.session_ttl)

    async def attach(self, session_id: str, since: int | None = None) -> bytes:
        """The session's latest accumulated run, as clients receive it (renews its TTL);
        cut at ``since`` if given (:meth:`~._turns.TurnRunner.attached`)."""
        await self.live.sweep()
        stored = await self.store.read(session_id, ttl=self.limits.session_ttl)
        if stored is None:
            await self.live.forget(session_id)
            raise not_found(session_id)
        if since is None and not stored.appended:
            return sent_body(stored.run)  # (as stored: no object made)
        return self.turns.attached(session_id, stored, since)

    async def delete(self, session_id: str) -> None:
        """Close the session; a running turn is a 409, a suspended one is cancelled."""
        token = self.leases.token()
        lease = await self.store.acquire(session_id, token, lease=5.0, ttl=self.limits.session_ttl)
        if lease is Lease.MISSING:
            await self.live.forget(session_id)
            raise not_found(session_id)
        if lease is Lease.BUSY:
            raise HTTPProblem(
                ProblemType.SESSION_BUSY, "A turn is in flight on this session; delete it after."
            )
        await self.store.delete(session_id)
        await self.live.forget(session_id)

    def drain(self) -> None:
        """Before a shutdown: requests waiting for their key's first attempt on another
        replica answer 503 ``draining`` (see :mod:`._keywaits`); turns run on."""
        self.turns.waiter.drain()

    async def aclose(self) -> None:
        """Wait a moment for the jobs still running, then close every live agent and the store."""
        await self.jobs.wait(timeout=1.0)
        for session_id in self.live.ids():
            await self.live.forget(session_id)
        self.workers.shutdown(wait=False, cancel_futures=True)
        await self.store.aclose()

    # -- approvals -------------------------------------------------------------------------------

    async def decide(
        self,
        session_id: str,
        decisions: Mapping[str, ApprovalDecision],
        *,
        forward: bool = True,
    ) -> Outcome:
        """Answer the pending approvals and interrupts of a suspended session and resume
        its turn.

        When another replica holds the suspended turn and the store relays approvals,
        the decisions go there (unless ``forward`` is false) and its answer comes back.
        """
        await self.live.sweep()
        live = self.live.get(session_id)
        if live is None or not live.suspended:
            return await self._decide_elsewhere(session_id, live, decisions, forward)
        try:
            live.check(decisions)
        except DecisionError as error:
            raise decision_problem(error) from None
        return await self.turns.decide(session_id, live, decisions)

    async def _decide_elsewhere(
        self,
        session_id: str,
        live: AgentSession | None,
        decisions: Mapping[str, ApprovalDecision],
        forward: bool,
    ) -> Outcome:
        """Decisions for a session not suspended here: relayed to its holder, or a problem."""
        if live is not None and live.busy:
            raise HTTPProblem(ProblemType.SESSION_BUSY, "A turn is in flight on this session.")
        stored = await self.store.read(session_id)
        if stored is None:
            await self.live.forget(session_id)
            raise not_found(session_id)
        if stored.state != SUSPENDED:
            raise HTTPProblem(ProblemType.NOT_SUSPENDED, "The session has no pending approvals.")
        relay = self._relay
        if relay is None or not forward:
            raise HTTPProblem(
                ProblemType.SESSION_BUSY,
                "The suspended turn of this session lives on another replica; approvals "
                "must reach the replica that suspended it (route requests by session id).",
            )
        return await forward_decisions(
            relay, session_id, decisions, timeout=self.limits.lease_seconds
        )

    async def _relayed(self, session_id: str, request: bytes) -> bytes:
        """Answer decisions another replica relayed to this one (which holds the turn)."""
        return await answer_relayed(
            partial(self.decide, session_id, forward=False), session_id, request
        )
