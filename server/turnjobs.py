"""A turn's job: from a taken lease to a stored outcome.

:class:`TurnJobs` is the half of :class:`~evalport.server.sessions.SessionManager` that
runs once a turn (or a decision) holds its session's lease; the rules are those of
:mod:`evalport.server.sessions`. Here:

- The job drives the agent's step to its outcome: the accumulated run (200), a timed-out
  turn (504 ``turn-timeout``, whose run is stored too), or a problem that stores nothing
  (a busy, suspended or closed session, decisions that do not match).
- Then one store call writes the run and the idempotency record (when the request had a
  key) and releases the lease; whatever fails on the way releases the lease and hands
  the failure to repeats of the key that wait.
- With the in-process store the request runs the job itself, with plain calls; a request
  cancelled while the agent runs hands the rest to a job that follows the turn
  (:meth:`TurnJobs._follow`, which :meth:`SessionManager.aclose` waits for).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Mapping
from functools import partial
from typing import Any, Final, TypeVar

from evalport.protocol import (
    AgentRun,
    AgentSession,
    ApprovalDecision,
    DecisionError,
    NotSuspended,
    ProblemType,
    RunEnvelope,
    SessionBusy,
    SessionClosed,
    SessionSuspended,
    TurnTimeout,
    encode,
)

from .limits import Limits
from .problems import HTTPProblem, problem_body
from .records import (
    IdempotencyRecord,
    InFlight,
    Outcome,
    RunPolicy,
    decision_problem,
    not_found,
    suspended,
)
from .stores import ApprovalRelay, MemoryStore, SessionStore, TurnStore

__all__ = ["IDLE", "SUSPENDED", "TurnJobs"]

IDLE: Final = "idle"
SUSPENDED: Final = "suspended"

T = TypeVar("T")


class TurnJobs:
    """Driving and storing turns for :class:`~evalport.server.sessions.SessionManager`."""

    limits: Limits
    store: SessionStore
    policy: RunPolicy | None
    _memory: MemoryStore | None
    _turns: TurnStore
    _relay: ApprovalRelay | None
    _inflight: dict[tuple[str, str], InFlight]
    _seen: dict[str, bytes]
    _followers: set[asyncio.Task[Any]]

    async def _relayed(self, session_id: str, request: bytes) -> bytes:
        raise NotImplementedError  # the manager answers relayed decisions

    def body_of(self, live: AgentSession, run: AgentRun | None = None) -> bytes:
        """The response body of a session's run (``run``: the object a turn returned)."""
        if self.policy is None:
            return live.run_envelope
        return self.envelope(run if run is not None else live.run)

    def envelope(self, run: AgentRun) -> bytes:
        """The response body of a run: ``{"run": ...}``, redacted by the policy if any."""
        if self.policy is not None:
            run = self.policy.apply(run)
        return encode(RunEnvelope(run=run))

    def _follow(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a job that outlives its request and that :meth:`aclose` waits
        for, so shutting down never cuts a turn or a decision in half."""
        job = asyncio.get_running_loop().create_task(work)
        self._followers.add(job)
        job.add_done_callback(self._followers.discard)
        return job

    async def _turn_here(
        self,
        session_id: str,
        live: AgentSession,
        message: str,
        key: str | None,
        flight: InFlight | None,
        token: str,
    ) -> Outcome:
        """A turn's job on the request's own task (the agent runs in a task of its own).

        Only the turn itself waits (a process-local store never does), so only there can
        the request be cancelled; the job then continues as a task that follows the turn.
        A turn that returns a run is stored at once, without another coroutine.
        """
        loop = asyncio.get_running_loop()
        timeout = self.limits.turn_timeout
        started = loop.time()
        try:
            run = await live.send(message, timeout=timeout)
        except asyncio.CancelledError:
            left = None if timeout is None else max(started + timeout - loop.time(), 0.0)
            follow = live.wait(timeout=left)
            self._follow(self._turn_job(session_id, live, follow, key, flight, token))
            raise
        except Exception as error:
            return await self._turn_job(session_id, live, _raise(error), key, flight, token)
        finished = False
        try:
            body = self.body_of(live, run)
            outcome = Outcome(status=200, body=body)
            self._finish_here(session_id, live, token, body, key, _record(flight, outcome))
            finished = True
        except BaseException as error:
            _abandon(flight, error)
            raise
        finally:
            self._end_here(session_id, key, token, finished)
        if flight is not None:
            flight.settle(outcome)
        return outcome

    async def _turn_job(
        self,
        session_id: str,
        live: AgentSession,
        step: Awaitable[AgentRun],
        key: str | None,
        flight: InFlight | None,
        token: str,
    ) -> Outcome:
        """Drive the turn; then store its run and idempotency record and release the lease."""
        finished = False
        try:
            outcome, run = await self._drive(session_id, live, step)
            await self._finish(session_id, live, token, run, key, _record(flight, outcome))
            finished = True
        except BaseException as error:
            _abandon(flight, error)
            raise
        finally:
            if key is not None:
                self._inflight.pop((session_id, key), None)
            if not finished:
                await self.store.release(session_id, token)
        if flight is not None:
            flight.settle(outcome)
        return outcome

    def _end_here(self, session_id: str, key: str | None, token: str, finished: bool) -> None:
        """The end of a turn's job with the in-process store: the key is no longer in
        flight, and the lease goes back if the run was not stored (which releases it)."""
        if key is not None:
            self._inflight.pop((session_id, key), None)
        if not finished and self._memory is not None:
            self._memory.release_nowait(session_id, token)

    async def _decide_job(
        self,
        session_id: str,
        live: AgentSession,
        decisions: Mapping[str, ApprovalDecision],
        token: str,
    ) -> Outcome:
        finished = False
        try:
            outcome, run = await self._drive(
                session_id, live, live.decide(decisions, timeout=self.limits.turn_timeout)
            )
            await self._finish(session_id, live, token, run)
            finished = True
            return outcome
        finally:
            if not finished:
                await self.store.release(session_id, token)

    async def _drive(
        self, session_id: str, live: AgentSession, step: Awaitable[AgentRun]
    ) -> tuple[Outcome, bytes]:
        """The step's outcome and the run body to store (the problems it raises store nothing)."""
        try:
            run = await step
        except TurnTimeout as timeout:
            outcome = Outcome(
                status=504,
                body=problem_body(
                    ProblemType.TURN_TIMEOUT,
                    f"The turn did not finish within {timeout.timeout:g} seconds; "
                    "it was cancelled and recorded as failed, and the session is usable.",
                ),
            )
            return outcome, self.body_of(live, timeout.run)
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
        body = self.body_of(live, run)
        return Outcome(status=200, body=body), body

    async def _finish(
        self,
        session_id: str,
        live: AgentSession,
        token: str,
        body: bytes,
        key: str | None = None,
        record: bytes = b"",
    ) -> None:
        """Store the run (and the idempotency record) and release the lease: one store call.

        A suspended session's run is written first and its relay listens before the lease
        goes, so that approvals relayed by another replica find their holder at once.
        """
        if self._memory is not None:
            self._finish_here(session_id, live, token, body, key, record)
            return
        state = SUSPENDED if live.suspended else IDLE
        ttl = self.limits.session_ttl
        run: bytes | None = body
        if state == SUSPENDED and self._relay is not None:
            await self.store.write(session_id, body, state=state, ttl=ttl)
            self._seen[session_id] = body
            await self._relay.listen(session_id, partial(self._relayed, session_id))
            run = None
        await self._turns.finish_turn(
            session_id,
            token,
            run=run,
            state=state,
            ttl=ttl,
            key=key,
            record=record,
            keep=self.limits.idempotency_keys,
        )
        if run is not None:
            self._seen[session_id] = body
            if self._relay is not None:
                await self._relay.unlisten(session_id)

    def _finish_here(
        self,
        session_id: str,
        live: AgentSession,
        token: str,
        body: bytes,
        key: str | None = None,
        record: bytes = b"",
    ) -> None:
        """:meth:`_finish` with the in-process store: plain calls, nothing to relay."""
        assert self._memory is not None
        self._memory.finish_turn_nowait(
            session_id,
            token,
            run=body,
            state=SUSPENDED if live.suspended else IDLE,
            ttl=self.limits.session_ttl,
            key=key,
            record=record,
            keep=self.limits.idempotency_keys,
        )


def _record(flight: InFlight | None, outcome: Outcome) -> bytes:
    """The idempotency record of a keyed turn's outcome (nothing without a key)."""
    if flight is None:
        return b""
    return encode(
        IdempotencyRecord(fingerprint=flight.fingerprint, status=outcome.status, body=outcome.body)
    )


def _abandon(flight: InFlight | None, error: BaseException) -> None:
    """Repeats of the key waiting for a turn that failed get its problem."""
    if flight is not None:
        flight.settle(None, error)


async def _raise(error: Exception) -> AgentRun:
    raise error
