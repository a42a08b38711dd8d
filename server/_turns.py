"""A turn, from the request to the stored outcome: begin, run, finish, answer.

:meth:`TurnRunner.turn` is the one entry, for every store; a stream is an option of it.
The path and its rules (store calls, leases, fencing, repeats of a key, streams) are in
ARCHITECTURE.md, "The path of a turn through the server". The rule not to break here: a
turn's response and its key's record are made before its lease goes, since the next
turn changes the run object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import msgspec
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

from ._jobs import Jobs, watched
from ._keywaits import InFlight, SameKeyWaiter, lost_record
from ._leases import LeaseKeeper, Leases
from ._limits import Limits
from ._live import LiveSessions
from ._problems import (
    HTTPProblem,
    decision_problem,
    key_reused,
    not_found,
    problem_body,
    suspended,
    suspended_elsewhere,
)
from ._records import (
    IDLE,
    SUSPENDED,
    Outcome,
    RunPolicy,
    decode_envelope,
    fingerprint,
    idempotency_record,
    replayed,
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
from ._streams import StreamListener, TurnStream
from .stores import (
    ApprovalRelay,
    BeginTurn,
    Finish,
    FinishTurn,
    Lease,
    SessionStore,
    StoredSession,
    StoreUnavailable,
    TurnStart,
    new_version,
)

logger = logging.getLogger("evalport.server")

Relayed = Callable[[str, bytes], Awaitable[bytes]]


class _Turn(msgspec.Struct):
    """A turn (or a decision) holding the session's lease under ``token``."""

    session_id: str
    token: str
    agent: AgentSession
    keeper: LeaseKeeper | None  # renews the lease while the agent runs
    key: str | None = None
    flight: InFlight | None = None  # what repeats of the key wait for
    since: int | None = None  # the cut its request asked for
    listener: StreamListener | None = None  # a streamed turn's, cut once the turn is over


class Turning(NamedTuple):
    """A streamed turn under way: the stream its request reads and the job whose outcome
    ends it; no job when the request joined the stream of its key's turn running here."""

    stream: TurnStream
    job: asyncio.Task[Outcome] | None


class TurnRunner:
    """Runs turns and decisions over ``store``; ``relay`` is the store's approvals relay,
    if it has one, and ``relayed`` answers approvals relayed here by another replica."""

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
        self._relay = relay
        self._limits = limits
        self._live = live
        self._leases = leases
        self._jobs = jobs
        self._policy = policy
        self._relayed = relayed
        self._inflight: dict[tuple[str, str], InFlight] = {}
        self.waiter = SameKeyWaiter(store, jobs, limits, leases)

    async def turn(
        self,
        session_id: str,
        message: str,
        key: str | None,
        parts: Sequence[ContentPart] = (),
        since: int | None = None,
        *,
        stream: bool = False,
    ) -> Outcome | Turning:
        """Run one turn, or answer a repeat of its ``key``, cut at ``since`` if given.

        Without ``stream`` the answer is the outcome. With it, the turn under way: the
        stream its events go to, ended by the outcome (the same one, from a job). A
        problem found before the turn starts is raised either way.
        """
        await self._live.sweep()
        bound, digest = _digest(message, key, parts)
        flight = None if key is None else self._inflight.get((session_id, key))
        if flight is not None:
            if flight.fingerprint != digest:
                raise key_reused()
            if stream and flight.stream is not None and flight.stream.since == since:
                return Turning(flight.stream, None)  # the same turn, read as it goes
        told = None
        if stream:
            limits = self._limits
            told = TurnStream(limits.stream_buffer_bytes, limits.stream_heartbeat, self._policy)
            told.since = since
        begun = await self._begin(session_id, key, digest, len(bound or message.encode()), flight)
        answered = self._answered(session_id, message, parts, since, begun, told)
        if told is None:
            return await answered  # (a request that goes away stops only its waiting)
        job = self._jobs.start(answered)  # the stream starts now, whatever the turn waits for
        if job.done():  # (a turn over at once, eagerly: its problem is answered as it is)
            told.finish(job.result())
        return Turning(told, job)

    async def _answered(
        self,
        session_id: str,
        message: str,
        parts: Sequence[ContentPart],
        since: int | None,
        begun: Outcome | _Turn | Awaitable[Outcome | _Turn],
        told: TurnStream | None,
    ) -> Outcome:
        """The turn's outcome: a repeat's, once its key's turn ended (here or elsewhere),
        or the turn's own, run now."""
        if not isinstance(begun, Outcome | _Turn):
            begun = await begun
        if isinstance(begun, Outcome):
            return await self.answer(session_id, begun, since)
        begun.since = since
        if told is not None:
            begun.listener = StreamListener(told)
            if begun.flight is not None:
                begun.flight.stream = told
        step = begun.agent.start(
            message, parts=parts, timeout=self._limits.turn_timeout, listen=begun.listener
        )
        return await self._run(begun, step)

    async def decide(
        self, session_id: str, agent: AgentSession, decisions: Mapping[str, ApprovalDecision]
    ) -> Outcome:
        """Resume ``agent``'s suspended turn with ``decisions`` (already checked)."""
        token = self._leases.token()
        lease = await self._store.acquire(
            session_id, token, lease=self._leases.length, ttl=self._limits.session_ttl
        )
        await self._leased(session_id, lease)
        self._live.finishing(session_id)
        turn = _Turn(session_id, token, agent, self._leases.keep(session_id, token))
        return await self._run(turn, agent.decide(decisions, timeout=self._limits.turn_timeout))

    async def answer(self, session_id: str, outcome: Outcome, since: int | None) -> Outcome:
        """A turn's ``outcome`` as its record keeps it, cut as a request with ``since``
        asks (a recorded delta cut otherwise is rebuilt from the store: :mod:`._runlog`)."""
        if outcome.status != 200:
            return outcome
        recorded = recorded_since(outcome.body)
        if recorded is None:  # a whole run, cut as asked (as it is when since is past it)
            if since is None:
                return outcome
            run = without_framework_state(decode_envelope.decode(outcome.body).run)
            return outcome if since > run.turns else Outcome(200, answer_body(run, since, None))
        if recorded == since:
            return outcome
        stored = await self._store.read(session_id)
        if stored is None:
            raise not_found(session_id)
        run = recorded_run(stored, outcome.body)  # (as sent and redacted already)
        return Outcome(status=200, body=answer_body(run, since, None))

    def attached(self, session_id: str, stored: StoredSession, since: int | None) -> bytes:
        """The run ``stored`` holds as a client receives it, cut at ``since`` if given:
        from the live agent's run when it is hot and reached ``stored``, else decoded."""
        run = self._live.hot_run(session_id, stored)
        policy = self._policy
        if run is None:
            run, policy = stored_run(stored), None  # (redacted as stored)
        return answer_body(without_framework_state(run), since, policy)

    # -- begin -----------------------------------------------------------------------------

    async def _begin(
        self, session_id: str, key: str | None, digest: str, size: int, flight: InFlight | None
    ) -> Outcome | _Turn | Awaitable[Outcome | _Turn]:
        """A repeat's recorded outcome; the turn, with the session's lease, its current
        agent and room for ``size`` more bytes of run; or the wait for the same key's
        turn (``flight`` here, or on another replica), which gives one of those."""
        if flight is not None:
            return flight.wait()
        if self._leases.fencing(session_id):  # a failed call of this process's goes first
            await self._leases.fenced(session_id)
        agent = self._live.get(session_id)
        if agent is not None and agent.suspended:
            record = None if key is None else await self._store.get_result(session_id, key)
            if record is not None:
                return replayed(record, digest)
            agent = self._live.get(session_id)
            if agent is not None and agent.suspended:
                raise suspended(agent)
        # one store call: the key's record, or the lease and the stored session (and the
        # turn-lost record that a later turn stores under the key if this one never ends)
        begin = BeginTurn(
            session_id,
            self._leases.token(),
            lease=self._leases.length,
            ttl=self._limits.session_ttl,
            key=key,
            lost=b"" if key is None else lost_record(digest),
            keep=self._limits.idempotency_keys,
            seen=self._live.seen(session_id).version,
        )
        start = await self._fenced(begin, self._store.begin_turn(begin))
        if start.same_key:  # the first attempt of this key runs on another replica
            return self._waited(begin, start, digest, size)
        return await self._leased_turn(begin, start, digest, size)

    async def _waited(
        self, begin: BeginTurn, start: TurnStart, digest: str, size: int
    ) -> Outcome | _Turn:
        start = await self._fenced(begin, self.waiter.wait(begin, start))  # (same token)
        return await self._leased_turn(begin, start, digest, size)

    async def _fenced(self, begin: BeginTurn, call: Awaitable[TurnStart]) -> TurnStart:
        try:
            return await call
        except StoreUnavailable:
            self._leases.fence(begin.session_id, begin.token)  # the call may still run later
            raise

    async def _leased_turn(
        self, begin: BeginTurn, start: TurnStart, digest: str, size: int
    ) -> Outcome | _Turn:
        session_id, key = begin.session_id, begin.key
        if start.replay is not None:
            return replayed(start.replay, digest)
        if start.suspended:
            raise suspended_elsewhere()
        await self._leased(session_id, start.lease)
        keeper = self._leases.keep(session_id, begin.token)
        try:
            agent = await self._live.current(session_id, start.session)
            self._check_size(agent, size)
        except BaseException:
            if keeper is not None:
                keeper.stop()
            await self._leases.give_back(session_id, begin.token)
            raise
        self._live.finishing(session_id)
        turn = _Turn(session_id, begin.token, agent, keeper, key)
        if key is not None:
            turn.flight = self._inflight[(session_id, key)] = InFlight(digest)
        return turn

    async def _leased(self, session_id: str, lease: Lease | None) -> None:
        """Nothing if ``lease`` was acquired, else the problem that says why not."""
        if lease is Lease.ACQUIRED:
            return
        if lease is Lease.MISSING:
            await self._live.forget(session_id)
            raise not_found(session_id)
        raise HTTPProblem(ProblemType.SESSION_BUSY, "A turn is already in flight on this session.")

    def _check_size(self, agent: AgentSession, adding: int) -> None:
        """413 ``run-too-large`` if the session's run with ``adding`` bytes (the turn's
        message, or its request with parts) would pass the limit."""
        limit = self._limits.max_run_bytes
        if agent.run_size + adding > limit:
            raise HTTPProblem(
                ProblemType.RUN_TOO_LARGE,
                "This session's run would pass the server's run size limit (max_run_bytes, "
                f"serve --max-run-bytes) of {limit} bytes; start a new session.",
            )

    # -- run ---------------------------------------------------------------------------------

    async def _run(self, turn: _Turn, step: Coroutine[Any, Any, AgentRun]) -> Outcome:
        """The rest of the turn, as a job the request only watches. The agent's task started
        before the job, so a turn that never waits is over when the job takes its first step."""
        return await watched(self._jobs.start(self._complete(turn, step)))

    async def _complete(self, turn: _Turn, step: Awaitable[AgentRun]) -> Outcome:
        """Drive the step, then store its run and the key's record and release the lease:
        the outcome as the request asked for it; repeats of the key get it as recorded."""
        session_id, flight = turn.session_id, turn.flight
        finished = False
        try:
            problem, run = await self._drive(turn, step)
            before = self._live.seen(session_id)
            since = None if problem else turn.since
            bodies = written(run, before, self._policy, since=since, keyed=flight is not None)
            outcome = problem or Outcome(status=200, body=bodies.sent)
            recorded = problem or Outcome(status=200, body=bodies.recorded)
            record = b"" if flight is None else idempotency_record(flight.fingerprint, recorded)
            if not await self._finish(turn, bodies, before, record):
                key = turn.key
                stored = None if key is None else await self._store.get_result(session_id, key)
                recorded = _unstored(session_id, flight, stored)
                outcome = await self.answer(session_id, recorded, turn.since)
            finished = True
        except BaseException as error:
            if flight is not None:  # repeats of the key waiting for it get its problem
                flight.settle(None, error)
            raise
        finally:
            if turn.listener is not None:
                turn.listener.cut()
            if turn.key is not None:
                self._inflight.pop((session_id, turn.key), None)
            if not finished:
                self._live.settled(session_id)
                await self._leases.give_back(session_id, turn.token)
        if flight is not None:
            flight.settle(recorded)
        return outcome

    async def _drive(
        self, turn: _Turn, step: Awaitable[AgentRun]
    ) -> tuple[Outcome | None, AgentRun]:
        """The step's 504 if it timed out (else ``None``) and the run to store; the other
        problems it raises store nothing. The lease is renewed until the step ends."""
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
            raise suspended(turn.agent) from None
        except (SessionBusy, NotSuspended) as error:
            problem_type = (
                ProblemType.SESSION_BUSY
                if isinstance(error, SessionBusy)
                else ProblemType.NOT_SUSPENDED
            )
            raise HTTPProblem(problem_type, str(error)) from None
        except SessionClosed:
            raise not_found(turn.session_id) from None
        finally:
            if turn.keeper is not None:
                turn.keeper.stop()
        return None, run

    # -- finish ------------------------------------------------------------------------------

    async def _finish(self, turn: _Turn, bodies: Written, before: Reached, record: bytes) -> bool:
        """Store the run (from ``before``, the stored run the agent started from) and the
        key's record as a new version and release the lease: one store call, two when
        the run moved on. ``False``, storing nothing, when the lease was lost."""
        session_id, agent, relay = turn.session_id, turn.agent, self._relay
        try:
            state = SUSPENDED if agent.suspended else IDLE
            if relay is not None and state == SUSPENDED:  # before the store says suspended
                await relay.listen(session_id, partial(self._relayed, session_id))
            finish = FinishTurn(
                session_id,
                turn.token,
                state,
                self._limits.session_ttl,
                new_version(),
                run=bodies.whole or b"",
                append=bodies.append,
                base=before.version,
                key=turn.key,
                record=record,
                keep=self._limits.idempotency_keys,
            )
            done = await self._store.finish_turn(finish)
            if done is Finish.STALE:  # the store's run is not the one the turn was cut against
                bodies = bodies.as_whole(agent.run, self._policy)
                finish = msgspec.structs.replace(finish, run=bodies.whole, append=b"", base=0)
                done = await self._store.finish_turn(finish)
            if done is not Finish.STORED:  # lost: the store moved on without this agent
                await self._live.forget(session_id)
                return False
            envelope = bodies.whole if self._policy is None else None  # (the run's own)
            self._live.reached(session_id, bodies.reached(before, finish.version), envelope)
            if relay is not None and state != SUSPENDED:
                await relay.unlisten(session_id)
            return True
        except BaseException:
            # Not stored, so not acknowledged: the agent's memory holds a turn the store
            # does not; drop it, and the next turn rebuilds the agent from the store.
            await self._live.forget(session_id)
            raise


def _digest(message: str, key: str | None, parts: Sequence[ContentPart]) -> tuple[bytes, str]:
    """The request's encoding when it has parts, and the fingerprint its key is bound to:
    the message's, or the whole request's when it has parts."""
    bound = encode(TurnRequest(message=message, parts=list(parts))) if parts else b""
    return bound, "" if key is None else fingerprint(message, bound if parts else None)


def _unstored(session_id: str, flight: InFlight | None, record: bytes | None) -> Outcome:
    """The answer of a turn whose lease was lost before it stored its outcome: the
    store's record for its key (the turn-lost one its successor stored), else 409
    ``turn-lost``; never a 200 the store does not hold."""
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
