"""A turn, from the request to the stored outcome: the one path every store takes.

Rules (the session rules are those of :mod:`evalport.server._sessions`):

- A turn costs two store calls (:class:`~.stores.TurnStore`): ``begin_turn`` answers the
  key's idempotency record, or takes the session's lease and reads the stored session
  (not its run, when it is the one the live agent reached); ``finish_turn`` writes what
  the turn added to the run (or the whole run, :mod:`._runlog`) and the key's record
  and releases the lease. The response and the record are made before the lease goes:
  the next turn changes the run object.
- A repeat of a key whose turn runs in this process waits for that turn's outcome; one
  whose turn runs on another replica waits in :mod:`._keywaits`.
- A session's run has a size limit (``Limits.max_run_bytes``): a turn whose message would
  take the run past it is refused with 413 ``run-too-large`` before the agent runs.
- Once the lease is taken, the rest is a job (:mod:`._jobs`) that the request only
  watches: drive the agent's step to its outcome (the accumulated run: 200; a timed-out
  turn: 504 ``turn-timeout``, whose run is stored too; or a problem that stores
  nothing: a busy, suspended or closed session, decisions that do not match), then the
  ``finish_turn`` call. Whatever fails on the way releases the lease and hands the
  failure to repeats of the key that wait.
- ``finish_turn`` is fenced: it stores nothing if another turn took the lease since
  (this one stalled past it). The turn then answers what the store holds for its key
  (the turn-lost record its successor stored), else 409 ``turn-lost``, never a 200 the
  store does not hold; it is logged and this replica's agent is dropped (rebuilt from
  the store next time).
- A turn whose outcome could not be stored (the store failed: 503 ``store-unavailable``)
  was never acknowledged, so it must never be stored later: this replica's agent, which
  ran it, is dropped too, and the next turn rebuilds the agent from the store.
- A suspended turn's run is written first and its relay (:class:`~.stores.ApprovalRelay`,
  if the store has one) listens before the lease goes, so approvals relayed by another
  replica find their holder at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial

from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    ContentPart,
    ProblemType,
    TurnRequest,
    encode,
)
from evalport.protocol.runtime import (
    AgentSession,
    DecisionError,
    NotSuspended,
    SessionBusy,
    SessionClosed,
    SessionSuspended,
    TurnTimedOut,
    without_framework_state,
)

from ._jobs import Jobs
from ._keywaits import SameKeyWaiter, lost_record
from ._leases import LeaseKeeper, Leases
from ._limits import Limits
from ._live import LiveSessions
from ._problems import HTTPProblem, problem_body
from ._records import (
    IDLE,
    SUSPENDED,
    InFlight,
    Outcome,
    RunBodies,
    RunPolicy,
    answered,
    decision_problem,
    fingerprint,
    idempotency_record,
    key_reused,
    not_found,
    replayed,
    run_bodies,
    suspended,
    suspended_elsewhere,
)
from ._runlog import (
    Reached,
    Written,
    answer_body,
    recorded_run,
    recorded_since,
    stored_run,
    written,
)
from .stores import (
    ApprovalRelay,
    Lease,
    SessionStore,
    StoredSession,
    TurnStart,
    TurnStore,
)
from .stores._base import turns_of

logger = logging.getLogger("evalport.server")

Relayed = Callable[[str, bytes], Awaitable[bytes]]


class TurnRunner:
    """Runs turns and decisions over ``store`` (see the module's rules).

    ``relay`` is the store's approvals relay, if it has one; ``relayed`` answers the
    approvals that another replica relays to this one (the session manager's ``decide``
    without forwarding).
    """

    def __init__(
        self,
        store: SessionStore,
        limits: Limits,
        live: LiveSessions,
        leases: Leases,
        jobs: Jobs,
        *,
        policy: RunPolicy | None,
        relay: ApprovalRelay | None,
        relayed: Relayed,
    ) -> None:
        self._store = store
        self._turns: TurnStore = turns_of(store)
        self._relay = relay
        self._limits = limits
        self._live = live
        self._leases = leases
        self._jobs = jobs
        self._policy = policy
        self._relayed = relayed
        self._inflight: dict[tuple[str, str], InFlight] = {}
        self.waiter = SameKeyWaiter(
            self._begin, store.release, jobs, limits, renewed=leases.renewed
        )

    async def turn(
        self,
        session_id: str,
        message: str,
        key: str | None,
        parts: Sequence[ContentPart] = (),
        since: int | None = None,
    ) -> Outcome:
        """Run one turn (or replay it by idempotency key); ``parts``: its content parts; its
        run cut at ``since`` if given."""
        digest = ""
        # a key is bound to the message, or to the whole request when it has parts
        bound = encode(TurnRequest(message=message, parts=list(parts))) if parts else b""
        if key is not None:
            digest = fingerprint(message, bound if parts else None)
            if (waiting := self._inflight.get((session_id, key))) is not None:
                if waiting.fingerprint != digest:
                    raise key_reused()
                return await self.answer(session_id, await waiting.wait(), since)
        live = self._live.get(session_id)
        if live is not None and live.suspended:
            if key is not None:
                record = await self._store.get_result(session_id, key)
                if record is not None:
                    return await self.answer(session_id, replayed(record, digest), since)
            live = self._live.get(session_id)
            if live is not None and live.suspended:
                raise suspended(live)
        # one store call: the key's record, or the lease and the stored session (and the
        # turn-lost record that a later turn stores under the key if this one never ends)
        token = self._leases.token()
        lost = b"" if key is None else lost_record(digest)
        start = await self._begin(session_id, token, key, lost)
        if start.same_key:  # the first attempt of this key runs on another replica
            start = await self.waiter.wait(session_id, token, key, lost, start)
        if start.replay is not None:
            return await self.answer(session_id, replayed(start.replay, digest), since)
        if start.suspended:
            raise suspended_elsewhere()
        if start.lease is not Lease.ACQUIRED:
            await self._leased(session_id, start.lease)
        self._live.finishing(session_id)
        keeper = self._leases.keep(session_id, token)
        try:
            live = await self._live.current(session_id, start.session)
            self._check_size(live, len(bound) if parts else len(message.encode()))
        except BaseException:
            if keeper is not None:
                keeper.stop()
            self._live.settled(session_id)
            await self._store.release(session_id, token)
            raise
        flight = None
        if key is not None:
            flight = self._inflight[(session_id, key)] = InFlight(digest)
        # The turn's task starts before the job that follows it, so the loop runs the
        # turn first and a turn that never waits is over when the job takes its first step.
        step = live.start(message, parts=parts, timeout=self._limits.turn_timeout)
        job = self._jobs.start(
            self._turn_job(session_id, live, step, key, flight, token, keeper, since)
        )
        return await asyncio.shield(job)

    async def answer(self, session_id: str, outcome: Outcome, since: int | None) -> Outcome:
        """A turn's ``outcome`` as its record keeps it, as a request with ``since`` asks
        for it (a recorded delta cut otherwise is rebuilt from the store: :mod:`._runlog`)."""
        if outcome.status != 200:
            return outcome
        recorded = recorded_since(outcome.body)
        if recorded is None:
            return answered(outcome, None, since)  # a whole run, cut as asked
        if recorded == since:
            return outcome
        stored = await self._store.read(session_id)
        if stored is None:
            raise not_found(session_id)
        run = recorded_run(stored, outcome.body)  # (as sent and redacted already)
        return Outcome(status=200, body=answer_body(run, since, None))

    async def decide(
        self, session_id: str, live: AgentSession, decisions: Mapping[str, ApprovalDecision]
    ) -> Outcome:
        """Resume ``live``'s suspended turn with ``decisions`` (already checked)."""
        token = self._leases.token()
        lease = await self._store.acquire(
            session_id, token, lease=self._leases.length, ttl=self._limits.session_ttl
        )
        await self._leased(session_id, lease)
        self._live.finishing(session_id)
        keeper = self._leases.keep(session_id, token)
        job = self._jobs.start(self._decide_job(session_id, live, decisions, token, keeper))
        return await asyncio.shield(job)

    def attached(self, session_id: str, stored: StoredSession, since: int | None) -> bytes:
        """The run ``stored`` holds as a client receives it, cut at ``since`` if given:
        made from the live agent's run when it is hot and reached ``stored`` (no decode
        of the stored run), else from the stored run and its log."""
        run = self._live.hot_run(session_id, stored)
        policy = self._policy
        if run is None:
            run, policy = stored_run(stored), None  # (redacted as stored)
        return answer_body(without_framework_state(run), since, policy)

    def _check_size(self, live: AgentSession, adding: int) -> None:
        """413 ``run-too-large`` if the session's run with ``adding`` bytes (the turn's
        message, or its request with parts) would pass the limit."""
        limit = self._limits.max_run_bytes
        if live.run_size + adding > limit:
            raise HTTPProblem(
                ProblemType.RUN_TOO_LARGE,
                "This session's run would pass the server's run size limit (max_run_bytes, "
                f"serve --max-run-bytes) of {limit} bytes; start a new session.",
            )

    def bodies(self, run: AgentRun) -> RunBodies:
        """A new session's run as stored and as sent (see :func:`~._records.run_bodies`)."""
        return run_bodies(self._policy, run)

    def _begin(
        self, session_id: str, token: str, key: str | None, lost: bytes
    ) -> Awaitable[TurnStart]:
        limits = self._limits
        return self._turns.begin_turn(  # (the store's call itself: no coroutine around it)
            session_id,
            token,
            lease=self._leases.length,
            ttl=limits.session_ttl,
            key=key,
            lost=lost,
            keep=limits.idempotency_keys,
            seen=self._live.reached_of(session_id).version,
        )

    async def _leased(self, session_id: str, lease: Lease | None) -> None:
        """Nothing if ``lease`` was acquired, else the problem that says why not."""
        if lease is Lease.ACQUIRED:
            return
        if lease is Lease.MISSING:
            await self._live.forget(session_id)
            raise not_found(session_id)
        raise HTTPProblem(ProblemType.SESSION_BUSY, "A turn is already in flight on this session.")

    async def _turn_job(
        self,
        session_id: str,
        live: AgentSession,
        step: Awaitable[AgentRun],
        key: str | None,
        flight: InFlight | None,
        token: str,
        keeper: LeaseKeeper | None,
        since: int | None,
    ) -> Outcome:
        """Drive the turn; then store its run and idempotency record and release the lease.
        Returns the outcome as the request asked for it (cut at ``since``); repeats of
        the key get it as recorded."""
        finished = False
        try:
            problem, run = await self._drive(session_id, live, step, keeper)
            before = self._live.reached_of(session_id)
            bodies = self._written(live, run, before, None if problem else since)
            outcome = problem or Outcome(status=200, body=bodies.sent)
            recorded = problem or Outcome(status=200, body=bodies.recorded)
            if not await self._finish(
                session_id, live, token, bodies, before, key, _record(flight, recorded)
            ):
                record = None if key is None else await self._store.get_result(session_id, key)
                recorded = _unstored(session_id, flight, record)
                outcome = await self.answer(session_id, recorded, since)
            finished = True
        except BaseException as error:
            if flight is not None:  # repeats of the key waiting for it get its problem
                flight.settle(None, error)
            raise
        finally:
            if key is not None:
                self._inflight.pop((session_id, key), None)
            if not finished:
                self._live.settled(session_id)
                await self._store.release(session_id, token)
        if flight is not None:
            flight.settle(recorded)
        return outcome

    async def _decide_job(
        self,
        session_id: str,
        live: AgentSession,
        decisions: Mapping[str, ApprovalDecision],
        token: str,
        keeper: LeaseKeeper | None,
    ) -> Outcome:
        finished = False
        try:
            step = live.decide(decisions, timeout=self._limits.turn_timeout)
            problem, run = await self._drive(session_id, live, step, keeper)
            before = self._live.reached_of(session_id)
            bodies = self._written(live, run, before, None)
            outcome = problem or Outcome(status=200, body=bodies.sent)
            finished = await self._finish(session_id, live, token, bodies, before)
            if not finished:
                finished = True  # (nothing to release: the lease is another's)
                _unstored(session_id, None, None)
            return outcome
        finally:
            if not finished:
                self._live.settled(session_id)
                await self._store.release(session_id, token)

    async def _drive(
        self,
        session_id: str,
        live: AgentSession,
        step: Awaitable[AgentRun],
        keeper: LeaseKeeper | None,
    ) -> tuple[Outcome | None, AgentRun]:
        """The step's problem outcome, if it timed out (else ``None``), and the run to
        store (the problems it raises store nothing); ``keeper`` renews the lease until
        the step ends, however it ends."""
        try:
            run = await step
        except TurnTimedOut as timeout:
            assert timeout.run is not None  # the runtime's timeout carries its run
            outcome = Outcome(
                status=504,
                body=problem_body(
                    ProblemType.TURN_TIMEOUT,
                    f"The turn did not finish within {timeout.timeout:g} seconds; "
                    "it was cancelled and recorded as failed, and the session is usable.",
                ),
            )
            return outcome, timeout.run
        except DecisionError as error:
            raise decision_problem(error) from None
        except SessionSuspended:
            raise suspended(live) from None
        except (SessionBusy, NotSuspended) as error:
            problem_type = (
                ProblemType.SESSION_BUSY
                if isinstance(error, SessionBusy)
                else ProblemType.NOT_SUSPENDED
            )
            raise HTTPProblem(problem_type, str(error)) from None
        except SessionClosed:
            raise not_found(session_id) from None
        finally:
            if keeper is not None:
                keeper.stop()
        return None, run

    def _written(
        self, live: AgentSession, run: AgentRun, before: Reached, since: int | None
    ) -> Written:
        """``run``'s bodies (:func:`~._runlog.written`) over the stored run ``before``,
        appended to a store with versions (``before`` has one) unless the turn is relayed
        (suspended, with a relay to carry its approvals from another replica: its run
        is then written whole, before the relay listens)."""
        appending = before.version > 0 and not (self._relay is not None and live.suspended)
        return written(run, before, self._policy, since=since, appending=appending)

    async def _finish(
        self,
        session_id: str,
        live: AgentSession,
        token: str,
        bodies: Written,
        before: Reached,
        key: str | None = None,
        record: bytes = b"",
    ) -> bool:
        """Store the run (and the idempotency record) and release the lease: one store call
        (two for a suspended turn with a relay). ``False``, storing nothing, when the
        lease was lost: this replica's agent is then dropped, the store moved on without it.
        ``before``: the stored run the turn's agent started from.
        """
        try:
            state = SUSPENDED if live.suspended else IDLE
            ttl = self._limits.session_ttl
            base = before.version
            whole, append = bodies.whole, bodies.append
            relayed = self._relay is not None and state == SUSPENDED  # (as in :meth:`_written`)
            if relayed:
                assert whole is not None and self._relay is not None
                if not await self._store.write(
                    session_id, whole, state=state, ttl=ttl, token=token
                ):
                    await self._live.forget(session_id)
                    return False
                self._live.reached(session_id, bodies.reached(before, 0))  # (its version: below)
                await self._relay.listen(session_id, partial(self._relayed, session_id))
                whole, append = None, b""
            finish = partial(
                self._turns.finish_turn,
                session_id,
                token,
                state=state,
                ttl=ttl,
                key=key,
                record=record,
                keep=self._limits.idempotency_keys,
            )
            version = await finish(run=whole, append=append, base=base)
            if version == -1:  # the store's run is not the one the turn was cut against
                bodies = bodies.as_whole(live.run, self._policy)
                version = await finish(run=bodies.whole, append=b"", base=0)
            if not version:
                await self._live.forget(session_id)
                return False
            # (a store that had no version for the turn's base has none: its bytes then)
            reached = (
                bodies.reached(before, version)
                if base
                else bodies.reached(before, 0, bodies.whole or b"")
            )
            envelope = bodies.whole if self._policy is None else None  # (the run's own)
            self._live.reached(session_id, reached, envelope)
            if not relayed and self._relay is not None:
                await self._relay.unlisten(session_id)
            return True
        except BaseException:
            # Not stored, so not acknowledged: the agent's memory holds a turn the store
            # does not; drop it, and the next turn rebuilds the agent from the store.
            await self._live.forget(session_id)
            raise


def _unstored(session_id: str, flight: InFlight | None, record: bytes | None) -> Outcome:
    """The answer of a turn whose lease was lost before it could store its outcome
    (another turn took the session over): what the store says for its key (the turn-lost
    record that the next holder stored), else 409 ``turn-lost``. Never a 200 that the
    store does not hold."""
    logger.warning(
        "session %s: the turn's lease was lost before its outcome was stored (another "
        "turn took the session over); its outcome is not stored",
        session_id,
    )
    if flight is not None and record is not None:
        return replayed(record, flight.fingerprint)
    raise HTTPProblem(
        ProblemType.TURN_LOST,
        "This turn ran, but its replica stalled past the session's lease and another "
        "request took the session over, so its outcome was not stored (the session's run "
        "does not include it) and its effects are unknown.",
    )


def _record(flight: InFlight | None, outcome: Outcome) -> bytes:
    """The idempotency record of a keyed turn's outcome (nothing without a key)."""
    return b"" if flight is None else idempotency_record(flight.fingerprint, outcome)
