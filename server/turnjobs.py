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
- That call is fenced: it stores nothing if another turn took the lease since (this one
  stalled past it). The turn then answers what the store holds for its key (the
  turn-lost record its successor stored), else 409 ``turn-lost``, never a 200 the store
  does not hold; it is logged and this replica's agent is dropped (rebuilt from the
  store next time).
- With the in-process store the request runs the job itself, with plain calls; a request
  cancelled while the agent runs hands the rest to a job that follows the turn
  (:meth:`TurnJobs._follow`, which :meth:`SessionManager.aclose` waits for).
- With a store that renews leases (:class:`~.stores.LeaseRenewal`), a lease lasts
  ``Limits.lease_ttl`` and the holder keeps it (:class:`LeaseKeeper`): a timer armed when
  the lease is taken fires after a third of it and starts a followed job that renews it
  every third until the step ends (done, timed out, failed, cancelled or suspended: a
  suspended turn holds no lease), before the final store call releases it. A turn
  shorter than that costs one timer and no task. A renewal that finds the lease gone
  (expired, or taken by another holder) stops and logs it, and never takes it back; a
  store that is down is logged and tried again a third of the lease later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Any, Final, TypeVar

from evalport.protocol import AgentRun, ApprovalDecision, ProblemType, RunEnvelope, encode
from evalport.protocol.runtime import (
    AgentSession,
    DecisionError,
    NotSuspended,
    SessionBusy,
    SessionClosed,
    SessionSuspended,
    TurnTimeout,
)

from .limits import Limits
from .problems import HTTPProblem, problem_body
from .records import (
    InFlight,
    Outcome,
    RunPolicy,
    decision_problem,
    idempotency_record,
    not_found,
    replayed,
    suspended,
)
from .stores import (
    ApprovalRelay,
    LeaseRenewal,
    MemoryStore,
    SessionStore,
    StoreUnavailable,
    TurnStore,
)

__all__ = ["IDLE", "SUSPENDED", "LeaseKeeper", "TurnJobs", "quietly"]

logger = logging.getLogger("evalport.server")

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
    _renewal: LeaseRenewal | None
    _inflight: dict[tuple[str, str], InFlight]
    _seen: dict[str, bytes]
    _followers: set[asyncio.Task[Any]]

    _relayed: Callable[[str, bytes], Awaitable[bytes]]  # the manager answers relayed decisions
    _forget: Callable[[str], Awaitable[None]]  # and drops a live agent

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

    @property
    def lease(self) -> float:
        """How long a turn's lease lasts when taken (and after each renewal)."""
        if self._renewal is not None:
            return self.limits.lease_ttl
        return self.limits.lease_seconds

    def _keep(self, session_id: str, token: str) -> LeaseKeeper | None:
        """Keep the lease that ``token`` just took, if the store renews leases."""
        if self._renewal is None:
            return None
        return LeaseKeeper(self, self._renewal, session_id, token, self.limits.lease_ttl)

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
            if not self._finish_here(session_id, live, token, body, key, _record(flight, outcome)):
                assert self._memory is not None
                record = None if key is None else self._memory.get_result_nowait(session_id, key)
                outcome = _unstored(session_id, flight, record)
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
        keeper: LeaseKeeper | None = None,
    ) -> Outcome:
        """Drive the turn; then store its run and idempotency record and release the lease."""
        finished = False
        try:
            outcome, run = await self._drive(session_id, live, step, keeper)
            if not await self._finish(session_id, live, token, run, key, _record(flight, outcome)):
                record = None if key is None else await self.store.get_result(session_id, key)
                outcome = _unstored(session_id, flight, record)
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
        keeper: LeaseKeeper | None,
    ) -> Outcome:
        finished = False
        try:
            step = live.decide(decisions, timeout=self.limits.turn_timeout)
            outcome, run = await self._drive(session_id, live, step, keeper)
            finished = await self._finish(session_id, live, token, run)
            if not finished:
                finished = True  # (nothing to release: the lease is another's)
                _unstored(session_id, None, None)
            return outcome
        finally:
            if not finished:
                await self.store.release(session_id, token)

    async def _drive(
        self,
        session_id: str,
        live: AgentSession,
        step: Awaitable[AgentRun],
        keeper: LeaseKeeper | None = None,
    ) -> tuple[Outcome, bytes]:
        """The step's outcome and the run body to store (the problems it raises store
        nothing); ``keeper`` renews the lease until the step ends, however it ends."""
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
        finally:
            if keeper is not None:
                keeper.stop()
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
    ) -> bool:
        """Store the run (and the idempotency record) and release the lease: one store call.

        A suspended session's run is written first and its relay listens before the lease
        goes, so that approvals relayed by another replica find their holder at once.
        ``False``, storing nothing, when the lease was lost (another turn took the session
        over): this replica's agent is then dropped, the store has moved on without it.
        """
        if self._memory is not None:
            return self._finish_here(session_id, live, token, body, key, record)
        state = SUSPENDED if live.suspended else IDLE
        ttl = self.limits.session_ttl
        run: bytes | None = body
        if state == SUSPENDED and self._relay is not None:
            if not await self.store.write(session_id, body, state=state, ttl=ttl, token=token):
                await self._forget(session_id)
                return False
            self._seen[session_id] = body
            await self._relay.listen(session_id, partial(self._relayed, session_id))
            run = None
        stored = await self._turns.finish_turn(
            session_id,
            token,
            run=run,
            state=state,
            ttl=ttl,
            key=key,
            record=record,
            keep=self.limits.idempotency_keys,
        )
        if not stored:
            await self._forget(session_id)
            return False
        if run is not None:
            self._seen[session_id] = body
            if self._relay is not None:
                await self._relay.unlisten(session_id)
        return True

    def _finish_here(
        self,
        session_id: str,
        live: AgentSession,
        token: str,
        body: bytes,
        key: str | None = None,
        record: bytes = b"",
    ) -> bool:
        """:meth:`_finish` with the in-process store: plain calls, nothing to relay."""
        assert self._memory is not None
        return self._memory.finish_turn_nowait(
            session_id,
            token,
            run=body,
            state=SUSPENDED if live.suspended else IDLE,
            ttl=self.limits.session_ttl,
            key=key,
            record=record,
            keep=self.limits.idempotency_keys,
        )


class LeaseKeeper:
    """Renews one turn's lease every third of ``lease`` seconds until :meth:`stop`.

    Until the first renewal is due it is a timer on the loop; then a job that
    :meth:`TurnJobs._follow` tracks renews the lease, sleeps, and so on.
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
        self, jobs: TurnJobs, renewal: LeaseRenewal, session_id: str, token: str, lease: float
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
            self._task = self._jobs._follow(self._renew())

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


async def quietly(work: Awaitable[None]) -> None:
    """``work``, for a job nobody waits for: a store that is down is logged, not raised."""
    try:
        await work
    except StoreUnavailable as error:
        logger.warning("could not release a lease: %s", error.detail)


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


def _abandon(flight: InFlight | None, error: BaseException) -> None:
    """Repeats of the key waiting for a turn that failed get its problem."""
    if flight is not None:
        flight.settle(None, error)


async def _raise(error: Exception) -> AgentRun:
    raise error
