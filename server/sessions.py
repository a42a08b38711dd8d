"""Sessions of the adapter: live agents in this process, their records in a store.

Rules:

- Creating a session draws an id with 192 random bits, calls the agent's session factory
  and stores the session (the store enforces the cap: 503 ``session-limit``).
- A turn takes the session's lease in the store (409 ``session-busy`` when another turn
  holds it): for ``Limits.lease_ttl``, renewed while the turn runs, with a store that
  renews leases (see :mod:`.turnjobs`), else for ``Limits.lease_seconds``. The agent
  runs in a task of its own; the rest of the job (store the new run and the idempotency
  record when the request had a key, release the lease) is a task that the request
  only watches, except with the in-process store, whose operations never
  wait: there the request does it, and a request cancelled while the agent runs hands it
  to a task that follows the turn. Either way a client that disconnects cancels nothing.
- Idempotency: a repeated key with the same message answers the stored response (or
  waits for the turn still running under that key) without running the agent again; the
  same key with another message is 422 ``idempotency-key-reused``. Keys are per session;
  the stored answer is the response as first sent (a 504, or the suspended run of a turn
  that asked for approval), never a later state of the session.
- A turn that times out (504 ``turn-timeout``) leaves the session idle and usable; its run
  records the turn as ``failed`` with a ``time_limit`` stop signal (attach shows it).
- A suspended session refuses new turns (409 ``session-suspended``) until its approvals
  are decided; it still expires with its idle TTL, which cancels the suspended turn.
- Several replicas (a shared store such as Redis): after taking the lease, a turn reads
  the stored run; if this process has not seen the session, or another replica has
  moved it on since, the agent is rebuilt from the stored run (its factory again, then
  the handler's ``restore(history, run)`` hook). A session suspended on another replica
  refuses turns (409 ``session-suspended``, without taking its lease). Approvals posted to another replica are
  relayed to the holder when the store can (:class:`~.stores.ApprovalRelay`: Redis
  pub/sub), else refused with 409 ``session-busy`` (route them to the holder).
- A repeated key whose first attempt still runs on another replica waits for it (or
  learns that it was lost): :mod:`evalport.server.keywaits` has the rules.
- With a shared store a turn's bookkeeping is two store calls (:class:`~.stores.TurnStore`):
  one looks up the idempotency record or takes the lease and reads the stored run, the
  other writes the new run and the record and releases the lease.
- Expired sessions are purged lazily (at most once a second, on any request) and their
  live agents closed; no background task, so nothing depends on the host's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from typing import Any, Final

from evalport.protocol import ApprovalDecision, CreateSessionRequest, ProblemType
from evalport.protocol.runtime import AgentSession, DecisionError, SessionInfo, session_factory

from .keywaits import KeyWaits, lost_record
from .limits import Limits
from .problems import HTTPProblem
from .records import (
    InFlight,
    Outcome,
    RunPolicy,
    SessionMeta,
    decision_problem,
    decode_envelope,
    decode_meta,
    encode_meta,
    fingerprint,
    iso,
    key_reused,
    new_session_id,
    not_found,
    replayed,
    suspended,
    suspended_elsewhere,
)
from .relaying import answer_relayed, forward_decisions
from .stores import (
    ApprovalRelay,
    ComposedTurns,
    Lease,
    LeaseRenewal,
    MemoryStore,
    SessionStore,
    StoredSession,
    StoreUnavailable,
    TurnStart,
    TurnStore,
)
from .turnjobs import SUSPENDED, TurnJobs

__all__ = ["Outcome", "RunPolicy", "SessionManager", "new_session_id"]

_SWEEP_EVERY: Final = 1.0


class SessionManager(KeyWaits, TurnJobs):
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
        self._factory = session_factory(agent)
        self.limits = limits
        self.store: SessionStore = store if store is not None else MemoryStore()
        self._relay = self.store if isinstance(self.store, ApprovalRelay) else None
        self._renewal = self.store if isinstance(self.store, LeaseRenewal) else None
        self._turns: TurnStore = (
            self.store if isinstance(self.store, TurnStore) else ComposedTurns(self.store)
        )
        self.policy = policy
        self._wall_clock = wall_clock
        self._live: dict[str, AgentSession] = {}
        self._seen: dict[str, bytes] = {}  # the stored run each live agent has reached
        self._inflight: dict[tuple[str, str], InFlight] = {}
        # A process-local store never waits: a turn's bookkeeping cannot be interrupted,
        # and only this process moves its sessions on, so a live agent is always current.
        # Its operations are then called as plain methods on the turn's path.
        self._memory = self.store if type(self.store) is MemoryStore else None
        self._followers: set[asyncio.Task[Any]] = set()  # jobs whose request went away
        self._next_sweep = 0.0
        self._draining = False
        self._lease_prefix = secrets.token_hex(8) + "-"
        self._leases = 0

    def _lease_token(self) -> str:
        # Unique per acquisition and per process (the prefix is random), cheap to make.
        self._leases += 1
        return f"{self._lease_prefix}{self._leases}"

    @property
    def live_count(self) -> int:
        """Sessions whose agent lives in this process."""
        return len(self._live)

    # -- sessions -----------------------------------------------------------------------------

    async def create(self, request: CreateSessionRequest) -> tuple[str, str]:
        """Open a session; returns its id and ``expiresAt``."""
        await self.sweep()
        limits = self.limits
        session_id = new_session_id()
        info = SessionInfo(
            session_id=session_id,
            case_id=request.case_id,
            description=request.description,
            metadata=request.metadata or {},
            faults=tuple(request.faults) if request.faults else (),
        )
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
        if self._memory is not None and not self._memory.has_room(limits.max_sessions):
            raise self._session_limit()  # before an agent is built for nothing
        live = await AgentSession.from_factory(self._factory, info)
        body = self.body_of(live)
        try:
            created = await self.store.create(
                session_id, meta, body, ttl=limits.session_ttl, limit=limits.max_sessions
            )
        except BaseException:  # the store is down: the new agent must not leak
            await live.close()
            raise
        if not created:
            await live.close()
            raise self._session_limit()
        self._live[session_id] = live
        if self._memory is None:  # (with the in-process store a live agent is current)
            self._seen[session_id] = body
        return session_id, iso(now + limits.session_ttl)

    def _session_limit(self) -> HTTPProblem:
        limits = self.limits
        return HTTPProblem(
            ProblemType.SESSION_LIMIT,
            f"The server holds its maximum of {limits.max_sessions} live sessions; retry later.",
            retry_after=limits.retry_after,
        )

    async def attach(self, session_id: str) -> bytes:
        """The session's latest accumulated run (renews its TTL)."""
        await self.sweep()
        stored = await self.store.read(session_id, ttl=self.limits.session_ttl)
        if stored is None:
            await self._forget(session_id)
            raise not_found(session_id)
        return stored.run

    async def delete(self, session_id: str) -> None:
        """Close the session; a running turn is a 409, a suspended one is cancelled."""
        token = self._lease_token()
        lease = await self.store.acquire(session_id, token, lease=5.0, ttl=self.limits.session_ttl)
        if lease is Lease.MISSING:
            await self._forget(session_id)
            raise not_found(session_id)
        if lease is Lease.BUSY:
            raise HTTPProblem(
                ProblemType.SESSION_BUSY, "A turn is in flight on this session; delete it after."
            )
        await self.store.delete(session_id)
        await self._forget(session_id)

    async def sweep(self) -> None:
        """Purge expired sessions and close their agents (at most once a second)."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_EVERY
        for session_id in await self.store.purge_expired():
            await self._forget(session_id)

    async def aclose(self) -> None:
        """Close every live agent and the store."""
        waiting: set[asyncio.Future[Any]] = {flight.wait() for flight in self._inflight.values()}
        waiting.update(self._followers)
        if waiting:
            await asyncio.wait(waiting, timeout=1.0)
        for session_id in list(self._live):
            await self._forget(session_id)
        await self.store.aclose()

    async def _forget(self, session_id: str) -> None:
        self._seen.pop(session_id, None)
        if self._relay is not None:
            with contextlib.suppress(StoreUnavailable):
                await self._relay.unlisten(session_id)
        live = self._live.pop(session_id, None)
        if live is not None:
            await live.close()

    async def _current(
        self, session_id: str, live: AgentSession | None, stored: StoredSession | None = None
    ) -> AgentSession:
        """The session's agent, rebuilt from the store unless this process is up to date
        (``stored``: the session as the store returned it with the lease, if it did)."""
        if live is not None and self._memory is not None:
            return live
        if stored is None:
            stored = await self.store.read(session_id)
        if stored is None:
            await self._forget(session_id)
            raise not_found(session_id)
        if live is not None and self._seen.get(session_id) == stored.run:
            return live
        if stored.state == SUSPENDED:
            raise suspended_elsewhere()
        await self._forget(session_id)
        meta = decode_meta.decode(stored.meta)
        info = SessionInfo(
            session_id=session_id,
            case_id=meta.case_id,
            description=meta.description,
            metadata=meta.metadata or {},
            faults=tuple(meta.faults) if meta.faults else (),
        )
        run = decode_envelope.decode(stored.run).run
        live = await AgentSession.restore(self._factory, info, run)
        self._live[session_id] = live
        self._seen[session_id] = stored.run
        return live

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
            await self._forget(session_id)
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

    # -- turns ----------------------------------------------------------------------------------

    async def turn(self, session_id: str, message: str, key: str | None) -> Outcome:
        """Run one turn (or replay it by idempotency key)."""
        if time.monotonic() >= self._next_sweep:
            await self.sweep()
        digest = ""
        if key is not None:
            digest = fingerprint(message)
            if (waiting := self._inflight.get((session_id, key))) is not None:
                if waiting.fingerprint != digest:
                    raise key_reused()
                return await waiting.wait()
        live = self._live.get(session_id)
        memory = self._memory
        if memory is None:
            return await self._turn_shared(session_id, message, key, digest, live)
        if key is not None:
            record = memory.get_result_nowait(session_id, key)
            if record is not None:
                return replayed(record, digest)
        if live is not None and live.suspended:
            raise suspended(live)
        token = self._lease_token()
        limits = self.limits
        lease = memory.acquire_nowait(
            session_id, token, lease=limits.lease_seconds, ttl=limits.session_ttl
        )
        if lease is not Lease.ACQUIRED:
            await self._leased(session_id, lease)
        if live is None:
            try:
                live = await self._current(session_id, live)
            except BaseException:
                memory.release_nowait(session_id, token)
                raise
        flight = None
        if key is not None:
            flight = self._inflight[(session_id, key)] = InFlight(digest)
        return await self._turn_here(session_id, live, message, key, flight, token)

    async def _turn_shared(
        self, session_id: str, message: str, key: str | None, digest: str, live: AgentSession | None
    ) -> Outcome:
        """:meth:`turn` with a store that may be shared by replicas."""
        if live is not None and live.suspended:
            if key is not None:
                record = await self.store.get_result(session_id, key)
                if record is not None:
                    return replayed(record, digest)
            live = self._live.get(session_id)
            if live is not None and live.suspended:
                raise suspended(live)
        # one store call: the key's record, or the lease and the stored session (and the
        # turn-lost record that a later turn stores under the key if this one never ends)
        token = self._lease_token()
        lost = b"" if key is None else lost_record(digest)
        start = await self._begin(session_id, token, key, lost)
        if start.same_key:  # the first attempt of this key runs on another replica
            start = await self._await_holder(session_id, token, key, lost, start)
        if start.replay is not None:
            return replayed(start.replay, digest)
        if start.suspended:
            raise suspended_elsewhere()
        await self._leased(session_id, start.lease)
        keeper = self._keep(session_id, token)
        try:
            live = await self._current(session_id, self._live.get(session_id), start.session)
        except BaseException:
            if keeper is not None:
                keeper.stop()
            await self.store.release(session_id, token)
            raise
        flight = None
        if key is not None:
            flight = self._inflight[(session_id, key)] = InFlight(digest)
        step = live.send(message, timeout=self.limits.turn_timeout)
        job = self._follow(self._turn_job(session_id, live, step, key, flight, token, keeper))
        return await asyncio.shield(job)

    async def decide(
        self,
        session_id: str,
        decisions: Mapping[str, ApprovalDecision],
        *,
        forward: bool = True,
    ) -> Outcome:
        """Answer the pending approvals of a suspended session and resume its turn.

        When another replica holds the suspended turn and the store relays approvals,
        the decisions go there (unless ``forward`` is false) and its answer comes back.
        """
        await self.sweep()
        live = self._live.get(session_id)
        if live is None or not live.suspended:
            return await self._decide_elsewhere(session_id, live, decisions, forward)
        pending = {approval.call_id for approval in live.run.pending_approvals}
        missing = sorted(pending - decisions.keys())
        unknown = sorted(decisions.keys() - pending)
        if missing or unknown:
            raise decision_problem(DecisionError(missing, unknown))
        token = await self._acquire(session_id)
        keeper = self._keep(session_id, token)
        job = self._follow(self._decide_job(session_id, live, decisions, token, keeper))
        return await asyncio.shield(job)

    def _begin(
        self, session_id: str, token: str, key: str | None, lost: bytes
    ) -> Coroutine[Any, Any, TurnStart]:
        limits = self.limits
        return self._turns.begin_turn(
            session_id,
            token,
            lease=self.lease,
            ttl=limits.session_ttl,
            key=key,
            lost=lost,
            keep=limits.idempotency_keys,
        )

    async def _acquire(self, session_id: str) -> str:
        token = self._lease_token()
        lease = await self.store.acquire(
            session_id, token, lease=self.lease, ttl=self.limits.session_ttl
        )
        await self._leased(session_id, lease)
        return token

    async def _leased(self, session_id: str, lease: Lease | None) -> None:
        """Nothing if ``lease`` was acquired, else the problem that says why not."""
        if lease is Lease.ACQUIRED:
            return
        if lease is Lease.MISSING:
            await self._forget(session_id)
            raise not_found(session_id)
        raise HTTPProblem(ProblemType.SESSION_BUSY, "A turn is already in flight on this session.")
