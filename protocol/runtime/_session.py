"""AgentSession: one agent session, its accumulated run, one turn at a time.

Each turn runs in a task of its own, shielded from its caller: only a timeout or
:meth:`AgentSession.close` cancels it. Rules: see ARCHITECTURE.md,
"The agent runtime: sessions and turns".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, Final, NoReturn

from .._messages import ContentPart
from .._models import (
    AgentRun,
    Message,
    PendingApproval,
    PendingInterrupt,
    RunStatus,
    Usage,
)
from ._agent import AsyncTurnHandler, SessionInfo, history_of, session_factory
from ._content import turn_content, user_parts
from ._context import Listener, TurnContext
from ._control import TurnControl
from ._errors import (
    NotSuspended,
    SessionBusy,
    SessionClosed,
    SessionSuspended,
    TurnTimedOut,
    turn_timed_out,
)
from ._outcomes import agent_error, complete, fail, fail_timeout
from ._parked import ParkedRun
from ._steps import StepClock, Timed, Worker
from ._suspension import Decision, Suspension
from ._tasks import raising, ready, resolve, start_task

_DONE: Final = "done"
_SUSPENDED: Final = "suspended"
_TIMED_OUT: Final = "timed out"
_CANCEL_GRACE: Final = 1.0


class AgentSession:
    """One session of an agent: its handler, its accumulated run, its turn task."""

    __slots__ = (
        "_checkpoint",
        "_clock",
        "_closed",
        "_ctx",
        "_deadline",
        "_ended",
        "_failure",
        "_handler",
        "_held",
        "_history",
        "_log_details",
        "_overran",
        "_suspending",
        "_task",
        "_timeout",
        "_timer",
        "_timing_out",
        "_usage_before",
        "_waiting",
        "_worker",
        "_workers",
        "info",
        "state",
    )

    def __init__(
        self,
        handler: AsyncTurnHandler,
        info: SessionInfo,
        run: AgentRun | None = None,
        *,
        workers: Executor | None = None,
        clock: StepClock | None = None,
        log_details: bool = True,
        hot: bool = False,
    ) -> None:
        self._handler = handler
        self._workers = workers
        self._worker: Worker | None = None  # made when the agent first runs sync code
        self._clock = clock
        self._log_details = log_details
        self._deadline: float | None = None
        self._timeout: float | None = None
        self._overran = False
        self.info = info
        self._held = ParkedRun(run, info.session_id, hot=hot)
        self.state: dict[str, Any] = {}
        self._history: list[Message] = []
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._ctx: TurnContext | None = None
        self._checkpoint: asyncio.Future[str] | None = None
        self._failure: BaseException | None = None
        self._suspending: asyncio.Task[None] | None = None  # see :meth:`register`
        self._ended = False  # whether the latest turn's task has settled the session
        self._timing_out: asyncio.Task[TurnTimedOut] | None = None
        self._waiting = Suspension()
        self._closed = False
        self._usage_before = Usage()

    @classmethod
    async def open(
        cls,
        agent: object | Callable[[SessionInfo], Any],
        info: SessionInfo,
        **options: Any,
    ) -> AgentSession:
        """Start a session: adapt ``agent`` (any accepted shape) and call its factory
        (``options``: the keyword arguments of the constructor)."""
        factory = session_factory(agent)
        return cls(await factory(info), info, **options)

    @classmethod
    async def from_factory(
        cls, factory: Callable[[SessionInfo], Any], info: SessionInfo, **options: Any
    ) -> AgentSession:
        """Start a session from a factory already adapted by :func:`session_factory`."""
        return cls(await factory(info), info, **options)

    @classmethod
    async def restore(
        cls,
        factory: Callable[[SessionInfo], Any],
        info: SessionInfo,
        run: AgentRun,
        **options: Any,
    ) -> AgentSession:
        """Rebuild a session another process started, from its accumulated ``run``.

        Calls the factory again, then the handler's ``restore(history, run)`` hook (if
        any) with :func:`~evalport.protocol.runtime._agent.history_of` the run; the next turn
        continues that run.
        """
        handler: AsyncTurnHandler = await factory(info)
        session = cls(handler, info, run, **options)
        session._history = history_of(run)
        await handler.restore(list(session._history), session.snapshot())
        return session

    # -- state ----------------------------------------------------------------------------

    @property
    def run(self) -> AgentRun:
        """The accumulated run (between turns kept only encoded, see :mod:`._parked`:
        reading this property decodes it again)."""
        return self._held.run

    @property
    def run_envelope(self) -> bytes:
        """The accumulated run as the protocol sends it, ``{"run": ...}`` (no copy when idle)."""
        return self._held.envelope

    @property
    def run_size(self) -> int:
        """The length of :attr:`run_envelope`, without encoding a hot run whole."""
        return self._held.size()

    def park(self, envelope: bytes | None = None) -> None:
        """Keep an idle hot session's run only encoded until its next turn (nothing
        happens while a turn runs or waits); ``envelope``: :attr:`run_envelope`, if held."""
        if self._task is None and not self._waiting and not self._closed:
            self._held.rest(envelope)

    def _park(self) -> AgentRun:
        # Between turns, keep the run only encoded; returns the run object as it was.
        return self._held.park(self._task is None and not self._waiting and not self._closed)

    @property
    def busy(self) -> bool:
        """A turn is running (not suspended), or a timed-out turn's thread still runs."""
        return (self._task is not None and not self._waiting) or self._thread_running()

    def _thread_running(self) -> bool:
        worker = self._worker
        return worker is not None and worker.running

    def _in_thread(self, function: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        # The session's worker (see :class:`Worker`), made on first use: a session of an
        # async agent holds none (one object fewer per idle session for the collector).
        worker = self._worker
        if worker is None:
            worker = self._worker = Worker(self._workers)
        return worker(function, *args)

    @property
    def suspended(self) -> bool:
        """The turn waits for approval decisions or interrupt answers."""
        return bool(self._waiting)

    @property
    def pending(self) -> list[PendingApproval]:
        return list(self.run.pending_approvals)

    def snapshot(self) -> AgentRun:
        """A deep copy of the accumulated run."""
        return self._held.snapshot()

    # -- turns ----------------------------------------------------------------------------

    async def send(
        self, message: str, *, parts: Sequence[ContentPart] = (), timeout: float | None = None
    ) -> AgentRun:
        """Run one turn (``parts``: its content parts, :mod:`._content`); returns the
        accumulated run once it completes or suspends."""
        return await self.start(message, parts=parts, timeout=timeout)

    def start(
        self,
        message: str,
        *,
        parts: Sequence[ContentPart] = (),
        timeout: float | None = None,
        listen: Listener | None = None,
    ) -> Coroutine[Any, Any, AgentRun]:
        """:meth:`send` in two halves: the turn's task is created before this returns, and
        the coroutine returned waits for the turn as ``send`` does (and raises what it
        raises). A caller that starts other work meanwhile lets the loop run the turn's
        first step before that work's. ``listen`` is told the turn's events as they are
        recorded (:mod:`._context`: a streaming host)."""
        if self._closed:
            return raising(SessionClosed("the session is closed"))
        if self._waiting:
            return raising(SessionSuspended("the session waits for approvals or answers"))
        if self._task is not None:
            return raising(SessionBusy("a turn is already running on this session"))
        if self._thread_running():
            return raising(
                SessionBusy(
                    "the previous turn timed out but its sync code still runs in its "
                    "thread; the session takes a turn once it returns"
                )
            )
        self._checkpoint = None
        self._ended = False
        self._timing_out = None
        self._overran = False
        self._timeout = timeout
        loop = asyncio.get_running_loop()
        self._deadline = None if timeout is None else loop.time() + timeout
        self._failure = None
        task = start_task(self._turn(message, parts, listen))
        if self._ended:  # (started eagerly, 3.12+: a turn that never waits is over)
            if self._failure is not None:
                return raising(self._failure)
            if self._overran:
                return raising(turn_timed_out(timeout or 0.0, self._park()))
            return ready(self._park())
        self._task = task
        checkpoint = self._checkpoint  # an approval requested at once made one already
        if checkpoint is None:
            checkpoint = self._checkpoint = asyncio.get_running_loop().create_future()
        return self._drive(checkpoint, timeout)

    async def decide(
        self, decisions: Mapping[str, Decision], *, timeout: float | None = None
    ) -> AgentRun:
        """Answer every pending approval and interrupt (an :class:`ApprovalDecision` with
        ``decision="answer"``) and resume the turn; returns at its next stop."""
        self.check(decisions)
        self._timing_out = None
        self._timeout = timeout  # each resumption gets the full timeout again
        loop = asyncio.get_running_loop()
        self._deadline = None if timeout is None else loop.time() + timeout
        self.run.status = RunStatus.IN_PROGRESS
        self._checkpoint = checkpoint = asyncio.get_running_loop().create_future()
        self._waiting.settle(self.run, decisions)
        return await self._drive(checkpoint, timeout)

    def check(self, decisions: Mapping[str, Decision]) -> None:
        """Raise what :meth:`decide` would raise for ``decisions`` before resuming anything
        (:class:`SessionClosed`, :class:`NotSuspended`, :class:`DecisionError`)."""
        if self._closed:
            raise SessionClosed("the session is closed")
        if not self._waiting:
            raise NotSuspended("nothing is pending on this session")
        self._waiting.check(decisions)

    async def wait(self, *, timeout: float | None = None) -> AgentRun:
        """Follow a turn whose caller of :meth:`send` or :meth:`decide` was cancelled.

        Returns (or raises :class:`TurnTimedOut`) as that call would have, at the turn's
        next completion or suspension; ``timeout`` counts from now. Returns the run at
        once when no turn is running.
        """
        if self._timing_out is not None:  # the turn timed out already: its outcome
            return await self._timed_out(None, 0.0)
        checkpoint = self._checkpoint
        if self._task is None or self._waiting or checkpoint is None:
            return self.run if self._waiting else self._park()
        return await self._drive(checkpoint, timeout)

    async def close(self) -> None:
        """Cancel a running or suspended turn and refuse further calls."""
        self._closed = True
        self._waiting.drop()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=_CANCEL_GRACE)
        if task is not None and task.done() and self._task is task:
            self._settled(False)  # cancelled before it started: nothing else settles it

    # -- approvals and interrupts (the turn context calls this) ----------------------------

    def register(self, pending: PendingApproval | PendingInterrupt) -> asyncio.Future[Any]:
        """Record a pending approval or interrupt and suspend the turn until it is answered."""
        if self._closed:
            raise SessionClosed("the session is closed")
        future = self._waiting.add(self.run, pending)
        loop = asyncio.get_running_loop()
        checkpoint = self._checkpoint
        if checkpoint is None:
            checkpoint = self._checkpoint = loop.create_future()
        if not checkpoint.done() and (self._suspending is None or self._suspending.done()):
            # A plain task (never eager): it suspends the turn two loop passes from now, so
            # requests from sibling tasks (``gather`` of tools that each ask) join it.
            self._suspending = asyncio.Task(_suspend_after(checkpoint), loop=loop)
        return future

    # -- internals --------------------------------------------------------------------------

    async def _drive(self, checkpoint: asyncio.Future[str], timeout: float | None) -> AgentRun:
        # A cancelled caller cancels the checkpoint, never the turn; a fresh checkpoint
        # lets :meth:`wait` follow the turn afterwards. The timeout's timer is set only
        # if the turn is still running after one pass of the loop: a cancelled timer
        # stays in the loop's heap (with the checkpoint) until the heap is pruned, and
        # thousands of them would keep the garbage collector busy for nothing.
        loop = asyncio.get_running_loop()
        arm = None
        if timeout is not None and not checkpoint.done():
            arm = loop.call_soon(self._arm, checkpoint, loop.time() + timeout)
        try:
            outcome = await checkpoint
        except asyncio.CancelledError:
            if self._task is not None and self._checkpoint is checkpoint and checkpoint.cancelled():
                self._checkpoint = loop.create_future()
            raise
        finally:
            if arm is not None:
                arm.cancel()
                timer, self._timer = self._timer, None
                if timer is not None:
                    timer.cancel()
        if outcome == _TIMED_OUT and self._task is not None:
            return await self._timed_out(self._task, timeout or 0.0)
        if outcome == _DONE and self._failure is not None:
            raise self._failure  # the runtime failed, not the agent: the caller sees it
        if outcome == _DONE and self._overran:
            raise turn_timed_out(self._timeout or 0.0, self._park())
        if outcome == _SUSPENDED:
            self.run.status = RunStatus.IN_PROGRESS
            self.run.sync_turn(self._usage_before)
            return self.run
        return self._park()

    def _arm(self, checkpoint: asyncio.Future[str], deadline: float) -> None:
        if not checkpoint.done():
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(deadline, resolve, checkpoint, _TIMED_OUT)

    async def _timed_out(self, task: asyncio.Task[None] | None, timeout: float) -> NoReturn:
        # Timing a turn out (cancel it, give it its grace, record the failure) is a job of
        # its own, shielded: a caller cancelled meanwhile cannot cut it short, and
        # :meth:`wait` raises its outcome, with the turn's own timeout.
        job = self._timing_out
        if job is None:
            assert task is not None
            job = asyncio.get_running_loop().create_task(self._time_out(task, timeout))
            self._timing_out = job
        error = await asyncio.shield(job)
        raise TurnTimedOut(error.message, timeout=error.timeout, run=error.run)

    async def _time_out(self, task: asyncio.Task[None], timeout: float) -> TurnTimedOut:
        ctx = self._ctx
        self._waiting.drop(self.run)
        task.cancel()
        await asyncio.wait({task}, timeout=_CANCEL_GRACE)
        if task.done() and self._task is task:
            self._settled(False)
        if ctx is not None:
            TurnControl(ctx).reopen()
            fail_timeout(ctx, self._history, timeout, self._usage_before)
            TurnControl(ctx).close()
            self.run.sync_turn(self._usage_before)
        return turn_timed_out(timeout, self._park())

    def _fail(self, ctx: TurnContext, error: BaseException) -> None:
        info = agent_error(ctx, self.info.session_id, error, log_details=self._log_details)
        fail(ctx, self._history, info, self._usage_before)

    def _past_deadline(self, ctx: TurnContext) -> bool:
        """Whether the turn ends after its deadline (it held the loop, so its timer could
        not fire): then it is recorded as timed out, whatever it returned."""
        deadline = self._deadline
        if deadline is None or asyncio.get_running_loop().time() < deadline:
            return False
        self._overran = True
        fail_timeout(ctx, self._history, self._timeout or 0.0, self._usage_before)
        return True

    def _settled(self, completed: bool) -> None:
        # The turn's task is ending (it runs this last): the session is idle again. A
        # completed turn's run is encoded here, in the turn's task, so that the tree of
        # objects it decoded lives within one pass of the loop; the caller gets the object.
        self._task = None
        self._ctx = None
        self._ended = True
        if completed and not self._waiting and not self._closed:
            self._held.finish()
        checkpoint, self._checkpoint = self._checkpoint, None
        if checkpoint is not None:
            resolve(checkpoint, _DONE)

    def _begin(
        self, message: str, parts: Sequence[ContentPart], listen: Listener | None
    ) -> TurnContext:
        run = self.run
        run.turns += 1
        message, content = turn_content(message, parts)
        run.user_messages.append(message)
        if parts:
            run.user_parts = [*(run.user_parts or ()), *user_parts(run.turns, content)]
        run.status = RunStatus.IN_PROGRESS
        run.reply = ""  # until this turn replies; a suspended turn has none yet
        self._usage_before = run.usage
        ctx = self._ctx = TurnContext(
            run=run,
            turn=run.turns,
            message=message,
            parts=content,
            session_id=self.info.session_id,
            history=self._history,
            state=self.state,
            approvals=self,
            loop=asyncio.get_running_loop(),
            faults=self.info.faults,
            listen=listen,
        )
        return ctx

    async def _turn(
        self, message: str, parts: Sequence[ContentPart], listen: Listener | None
    ) -> None:
        # Runs as the turn's own task; whatever ends it, the session is settled last.
        completed = False
        try:
            ctx = self._begin(message, parts, listen)
            TurnControl(ctx).activate()
            try:
                turn = self._handler.turn(ctx.message, ctx, self._in_thread)
                replying: Awaitable[str] = turn
                if self._clock is not None:
                    replying = Timed(turn, self._clock, self.info.session_id, ctx.turn)
                reply = await replying
            except asyncio.CancelledError as cancelled:
                task = asyncio.current_task()
                if task is not None and task.cancelling():  # the turn itself was cancelled
                    TurnControl(ctx).close()
                    raise
                # The agent let a CancelledError of its own (an awaited task someone else
                # cancelled) escape: agent behaviour, recorded as a failure like any error.
                if not self._past_deadline(ctx):
                    self._fail(ctx, cancelled)
            except Exception as error:  # agent behaviour, not a transport failure
                if not self._past_deadline(ctx):
                    self._fail(ctx, error)
            else:
                if not self._past_deadline(ctx):
                    complete(ctx, self._history, reply, self._usage_before)
            TurnControl(ctx).close()
            completed = True
        except Exception as error:  # the runtime's own (a bad part): handed to the caller
            self.run.sync_turn(self._usage_before)
            self._failure = error
        except BaseException:
            self.run.sync_turn(self._usage_before)
            raise
        finally:
            self._settled(completed)


async def _suspend_after(checkpoint: asyncio.Future[str]) -> None:
    """Suspend the turn of ``checkpoint`` a pass after this task's first step."""
    await asyncio.sleep(0)  # (one pass of the loop: see :meth:`AgentSession.register`)
    resolve(checkpoint, _SUSPENDED)
