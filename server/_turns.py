"""A turn, from the request to the stored outcome: the one path every store takes.

A turn reads top-down in :meth:`TurnRunner.turn`: **begin** (a repeat answers its record;
else the lease, the stored session and the current agent: :meth:`TurnRunner._begin`),
**run** (the agent's step, in a job the request only watches: :meth:`TurnRunner._run`),
**finish** (one store call: :meth:`TurnRunner._finish`), **answer** (the outcome as the
request asked for it, made with the run's bodies: :func:`~._runlog.written`; a repeat's
record through :meth:`TurnRunner.answer`). A decision on a suspended turn takes the same
run and finish.

Rules (the session rules are those of :mod:`evalport.server._sessions`):

- A turn costs two store calls (:class:`~.stores.BeginTurn`, :class:`~.stores.FinishTurn`):
  ``begin_turn`` answers the key's idempotency record, or takes the session's lease and
  reads the stored session (not its run, when it is the one the live agent reached);
  ``finish_turn`` writes what the turn added to the run (or the whole run,
  :mod:`._runlog`) as a new version and the key's record and releases the lease. The
  response and the record are made before the lease goes: the next turn changes the
  run object.
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
- A turn appended to a run that moved on (:attr:`~.stores.Finish.STALE`) is written whole
  instead. ``finish_turn`` is fenced: it stores nothing (:attr:`~.stores.Finish.LOST`)
  if another turn took the lease since (this one stalled past it). The turn then answers
  what the store holds for its key (the turn-lost record its successor stored), else
  409 ``turn-lost``, never a 200 the store does not hold; it is logged and this
  replica's agent is dropped (rebuilt from the store next time).
- A turn whose outcome could not be stored (the store failed: 503 ``store-unavailable``)
  was never acknowledged, so it must never be stored later: this replica's agent, which
  ran it, is dropped too, and the next turn rebuilds the agent from the store. A lease
  that such a turn could not give back (its release failed too, or Redis restarted
  with it) is fenced (:meth:`~._leases.Leases.fence`): given back as never taken once
  the store answers, and a finish of the turn that lands later stores nothing. So the
  key's retry, which the 503 invites, runs the turn once (or answers it, if the finish
  did land before the failure was seen), and is never a 409 ``turn-lost``.
- A streamed turn (:mod:`._streams`) is the same turn, its context telling its events to
  a :class:`~._streams.TurnStream` that the request reads instead of awaiting the
  outcome; the outcome ends the stream. A repeat of its key while it runs here reads
  the same stream; any other repeat answers as it would without the stream.
- A suspended turn's relay (:class:`~.stores.ApprovalRelay`, if the store has one)
  listens before its run is stored and the lease goes, so approvals relayed by another
  replica (which it sends only once the store says the session is suspended) find their
  holder at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any

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
    RunPolicy,
    decision_problem,
    decode_envelope,
    fingerprint,
    idempotency_record,
    key_reused,
    not_found,
    replayed,
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
from ._streams import Relay, TurnStream
from .stores import (
    ApprovalRelay,
    BeginTurn,
    Finish,
    FinishTurn,
    Lease,
    SessionStore,
    StoredSession,
    StoreUnavailable,
    new_version,
)

logger = logging.getLogger("evalport.server")

Relayed = Callable[[str, bytes], Awaitable[bytes]]


class _Turn(msgspec.Struct):
    """A turn (or a decision) that holds the session's lease under ``token``: its
    ``agent``, the ``keeper`` renewing the lease, the ``flight`` that repeats of its
    ``key`` wait for, and the ``since`` its request asked for."""

    session_id: str
    token: str
    agent: AgentSession
    keeper: LeaseKeeper | None
    key: str | None = None
    flight: InFlight | None = None
    since: int | None = None
    relay: Relay | None = None  # a streamed turn's, cut once the turn's request is over


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
        self._relay = relay
        self._limits = limits
        self._live = live
        self._leases = leases
        self._jobs = jobs
        self._policy = policy
        self._relayed = relayed
        self._inflight: dict[tuple[str, str], InFlight] = {}
        self._streams: dict[tuple[str, str], TurnStream] = {}  # keyed turns streaming here
        self.waiter = SameKeyWaiter(store, jobs, limits, leases)

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
        started = await self._start(session_id, message, key, parts, since)
        return started if isinstance(started, Outcome) else await watched(started)

    async def streamed(
        self,
        session_id: str,
        message: str,
        key: str | None,
        parts: Sequence[ContentPart] = (),
        since: int | None = None,
    ) -> tuple[TurnStream, asyncio.Task[Outcome] | None]:
        """:meth:`turn`, streamed: the stream the request reads, and the job running the
        turn, whose outcome ends the stream (``None`` when the stream is that of the same
        key's turn running here, or ended already: the answer of a repeat)."""
        running = None if key is None else self._streams.get((session_id, key))
        if running is not None:
            flight = self._inflight.get((session_id, key or ""))
            if flight is not None and flight.fingerprint != _digest(message, key, parts)[1]:
                raise key_reused()
            if running.since == since:
                return running, None
        limits = self._limits
        stream = TurnStream(
            limits.stream_buffer_bytes, limits.stream_heartbeat, self._policy, since
        )
        if running is not None:  # the same turn, its outcome cut otherwise: as without it
            stream.finish(await self.turn(session_id, message, key, parts, since))
            return stream, None
        # The stream starts once the turn has (a problem before that is answered as it is
        # without the stream), or once the request waits for the same key's turn, which
        # may take as long as that turn: keep-alives go out meanwhile.
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        job = self._jobs.start(
            self._streamed(session_id, message, key, parts, since, stream, ready)
        )
        await asyncio.wait((job, ready), return_when=asyncio.FIRST_COMPLETED)
        if job.done():
            stream.finish(job.result())
            return stream, None
        return stream, job

    async def _streamed(
        self,
        session_id: str,
        message: str,
        key: str | None,
        parts: Sequence[ContentPart],
        since: int | None,
        stream: TurnStream,
        ready: asyncio.Future[None],
    ) -> Outcome:
        """A streamed turn's outcome, ``ready`` once it started (see :meth:`streamed`)."""
        started = await self._start(session_id, message, key, parts, since, stream, ready)
        if not ready.done():
            ready.set_result(None)
        return started if isinstance(started, Outcome) else await watched(started)

    async def _start(
        self,
        session_id: str,
        message: str,
        key: str | None,
        parts: Sequence[ContentPart],
        since: int | None,
        stream: TurnStream | None = None,
        waits: asyncio.Future[None] | None = None,
    ) -> Outcome | asyncio.Task[Outcome]:
        """A repeat's answer, or the job running the turn (its events told to ``stream``);
        ``waits`` is resolved if it waits for the same key's turn."""
        await self._live.sweep()
        bound, digest = _digest(message, key, parts)
        size = len(bound or message.encode())
        begun = await self._begin(session_id, key, digest, size, waits)
        if isinstance(begun, Outcome):  # a repeat of the key
            return await self.answer(session_id, begun, since)
        begun.since = since
        if stream is not None:
            begun.relay = Relay(stream)
            if key is not None:
                self._streams[(session_id, key)] = stream
        step = begun.agent.start(
            message, parts=parts, timeout=self._limits.turn_timeout, listen=begun.relay
        )
        return self._jobs.start(self._complete(begun, step))

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
        """A turn's ``outcome`` as its record keeps it, as a request with ``since`` asks
        for it (a recorded delta cut otherwise is rebuilt from the store: :mod:`._runlog`)."""
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
        made from the live agent's run when it is hot and reached ``stored`` (no decode
        of the stored run), else from the stored run and its log."""
        run = self._live.hot_run(session_id, stored)
        policy = self._policy
        if run is None:
            run, policy = stored_run(stored), None  # (redacted as stored)
        return answer_body(without_framework_state(run), since, policy)

    # -- begin -----------------------------------------------------------------------------

    async def _begin(
        self,
        session_id: str,
        key: str | None,
        digest: str,
        size: int,
        waits: asyncio.Future[None] | None = None,
    ) -> Outcome | _Turn:
        """The recorded outcome of a repeated key, or the turn with the session's lease,
        its current agent and room for ``size`` more bytes of run; ``waits`` is resolved
        before it waits for the same key's turn (here or on another replica)."""
        if key is not None and (waiting := self._inflight.get((session_id, key))) is not None:
            if waiting.fingerprint != digest:
                raise key_reused()
            _resolve(waits)
            return await waiting.wait()
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
        try:
            start = await self._store.begin_turn(begin)
            if start.same_key:  # the first attempt of this key runs on another replica
                _resolve(waits)
                start = await self.waiter.wait(begin, start)  # (polls with the same token)
        except StoreUnavailable:
            self._leases.fence(session_id, begin.token)  # the call may still run later
            raise
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
        """The rest of the turn as a job that the request only watches (a disconnect
        cancels nothing). The turn's task started before the job, so the loop runs the
        turn first and a turn that never waits is over when the job takes its first step."""
        return await watched(self._jobs.start(self._complete(turn, step)))

    async def _complete(self, turn: _Turn, step: Awaitable[AgentRun]) -> Outcome:
        """Drive the step, then store its run and idempotency record and release the lease.
        Returns the outcome as the request asked for it (cut at ``since``); repeats of
        the key get it as recorded."""
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
            if turn.relay is not None:
                turn.relay.cut()
            if turn.key is not None:
                self._inflight.pop((session_id, turn.key), None)
                self._streams.pop((session_id, turn.key), None)
            if not finished:
                self._live.settled(session_id)
                await self._leases.give_back(session_id, turn.token)
        if flight is not None:
            flight.settle(recorded)
        return outcome

    async def _drive(
        self, turn: _Turn, step: Awaitable[AgentRun]
    ) -> tuple[Outcome | None, AgentRun]:
        """The step's problem outcome, if it timed out (else ``None``), and the run to
        store (the problems it raises store nothing); the turn's keeper renews the lease
        until the step ends, however it ends."""
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
        """Store the run (and the idempotency record) as a new version and release the
        lease: one store call (two when the run moved on and the turn is written whole).
        ``False``, storing nothing, when the lease was lost: this replica's agent is then
        dropped, the store moved on without it. ``before``: the stored run the turn's
        agent started from."""
        session_id, agent, relay = turn.session_id, turn.agent, self._relay
        try:
            state = SUSPENDED if agent.suspended else IDLE
            if relay is not None and state == SUSPENDED:
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
            if done is not Finish.STORED:
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


def _resolve(waits: asyncio.Future[None] | None) -> None:
    if waits is not None and not waits.done():
        waits.set_result(None)


def _digest(message: str, key: str | None, parts: Sequence[ContentPart]) -> tuple[bytes, str]:
    """The request's encoding when it has parts, and the fingerprint its key is bound to:
    the message's, or the whole request's when it has parts."""
    bound = encode(TurnRequest(message=message, parts=list(parts))) if parts else b""
    return bound, "" if key is None else fingerprint(message, bound if parts else None)


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
