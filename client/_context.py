"""The eval context a case function receives (``EvalContext``). Every assertion reads the
run accumulated over the current session's turns, and only once a send was awaited. See
ARCHITECTURE.md, "The eval context".
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import os
import sysconfig
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import evalport.protocol
from evalport.protocol import AgentRun, ContentPart, RunStatus, ToolFault

from ._core import (
    ApprovalError,
    ApprovalPolicy,
    AssertionHandle,
    AssertionResult,
    Expectation,
    InterruptPolicy,
    JudgeRecord,
    Session,
    Target,
    Trajectory,
    Turn,
    TurnTiming,
    UserSimulator,
    faults_option,
    moment,
    moment_of,
    resume_with,
    settle_approvals,
    turn_at,
    turn_parts,
)
from ._methods import AssertionMethods

if TYPE_CHECKING:
    from .judges import JudgeAssertions


class CaseStopped(BaseException):
    """Base of the exceptions that end a case early on purpose.

    They derive from ``BaseException`` so that a case's own ``except Exception`` does not
    swallow them.
    """


class SkipCase(CaseStopped):
    """Raised by ``ctx.skip(reason)``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RequirementFailed(CaseStopped):
    """Raised by ``ctx.require(...)`` when the requirement failed."""


class SendNotAwaited(RuntimeError):
    """A ``ctx.send(...)`` whose coroutine was never awaited (a bug in the eval)."""


class NothingSent(RuntimeError):
    """An assertion on the reply or the run before anything was sent (a bug in the eval)."""


def shown_path(filename: str) -> str:
    """``filename`` relative to the working directory when it lies below it."""
    try:
        shown = os.path.relpath(filename)
    except ValueError:  # another drive
        return filename
    return filename if shown.startswith("..") else shown


_NOT_EVAL_CODE: Final = tuple(
    os.path.join(os.path.abspath(folder), "")
    for folder in (
        os.path.dirname(__file__),  # evalport's client package
        os.path.dirname(evalport.protocol.__file__),
        *{sysconfig.get_paths()[name] for name in ("stdlib", "purelib", "platlib")},
    )
)


@functools.lru_cache(maxsize=256)
def is_eval_code(filename: str) -> bool:
    """Whether ``filename`` is the user's code (not evalport's, Python's or a library's)."""
    path = os.path.abspath(filename)
    return not filename.startswith("<") and not path.startswith(_NOT_EVAL_CODE)


def eval_caller() -> str | None:
    """``file:line`` of the innermost frame of eval code on the stack, or ``None``."""
    frame = inspect.currentframe()
    while frame is not None and not is_eval_code(frame.f_code.co_filename):
        frame = frame.f_back
    return None if frame is None else f"{shown_path(frame.f_code.co_filename)}:{frame.f_lineno}"


def _caller() -> tuple[str, int]:
    """File and line of the code that called the caller of this function; shown only for
    a send never awaited, so no source line is read (``traceback`` reads them)."""
    frame = inspect.currentframe()
    for _ in range(2):
        frame = frame.f_back if frame is not None else None
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", 0)


def _no_attribute(owner: object, name: str) -> str:
    """The AttributeError message for ``owner.name``, with a "did you mean" if one is close."""
    text = f"{type(owner).__name__!r} object has no attribute {name!r}"
    if name.startswith("__"):
        return text
    public = [entry for entry in dir(type(owner)) if not entry.startswith("_")]
    close = difflib.get_close_matches(name, public, n=1, cutoff=0.6)
    return text + (f"; did you mean {close[0]!r}?" if close else "")


class EvalContext(AssertionMethods):
    """What an async case function receives: ``await ctx.send(message)`` sends a turn and
    returns its :class:`~evalport.client.Turn`; the assertion methods then read
    :attr:`run`, accumulated over the current session's turns. Approvals are answered by
    the approval policy, interrupts by ``interrupt_policy`` or ``await ctx.resume(...)``.
    Sessions it opened close when the trial ends; attached ones are left alone."""

    def __init__(
        self,
        target: Target,
        session: Session,
        *,
        case_id: str = "",
        trial: int = 0,
        case_judge: Any = None,
        strict: bool = False,
        approval_policy: ApprovalPolicy | None = None,
        row: Any = None,
        base_dir: Path | None = None,
    ) -> None:
        self.target = target
        self.base_dir = base_dir
        """The eval file's folder: relative paths of ``send(image=..., file=...)`` start there."""
        self.case_id = case_id
        self.trial = trial
        self.case_judge = case_judge
        self.strict = strict
        self.approval_policy = approval_policy
        self.interrupt_policy: InterruptPolicy | None = None
        self.row = row
        self.turns: list[Turn] = []
        self._timings: list[TurnTiming] = []
        self.logs: list[str] = []
        self.output: Any = None
        """What the case recorded with :meth:`record_output`, as JSON data."""
        self.expectations: list[Expectation] = []
        self.locations: list[str | None] = []  # where each expectation was made
        self.judge_records: list[JudgeRecord] = []
        self.opened: list[Session] = [session]
        self._session = session
        self._sends: list[tuple[Coroutine[Any, Any, Turn], tuple[str, int]]] = []
        self.failed_turns: list[Turn] = []
        """The turns whose run ended ``failed``, every session's, in order: each fails the
        trial unless the case asserted ``ctx.failed()`` (``run_trial``)."""

    def __getattr__(self, name: str) -> Any:
        # only reached for a name the context lacks: say which method was meant
        raise AttributeError(_no_attribute(self, name))

    # -- state ------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        return self._session

    @property
    def session_id(self) -> str:
        return self._session.id

    @property
    def run(self) -> AgentRun:
        """The run accumulated over every turn of the current session (redacted)."""
        return self._session.run

    @property
    def timings(self) -> list[TurnTiming]:
        """When each turn's answer came (:class:`~evalport.client.TurnTiming`), every
        session's, in order: what ``first_token_within`` reads."""
        return self._timings

    def trajectory(self) -> Trajectory:
        """The trajectory view of the run so far."""
        return Trajectory.of(self.run)

    # -- conversation -----------------------------------------------------------------

    def send(
        self, message: str | Sequence[Any], *, image: Any = None, file: Any = None
    ) -> Coroutine[Any, Any, Turn]:
        """Send one user message (``await ctx.send(...)``); approvals are settled by the
        policy before it returns. A send left unawaited is an error naming its line.

        ``image=`` and ``file=`` add images and documents (a path, bytes, a URL, or a list
        of them), and ``message`` may be a list of ``str``, :class:`~evalport.protocol.TextPart`,
        :class:`~evalport.protocol.ImagePart` and :class:`~evalport.protocol.FilePart` items."""
        if not isinstance(message, str | list | tuple):
            raise TypeError(f"send() takes a str or a list of parts, got {type(message).__name__}")
        text, parts = turn_parts(message, image, file, self.base_dir)
        sending = self._send(text, parts)
        self._sends.append((sending, _caller()))
        return sending

    def unawaited_sends(self) -> SendNotAwaited | None:
        """The error for sends nobody awaited (their coroutines are closed), or ``None``."""
        waiting = [
            (coro, line)
            for coro, line in self._sends
            if inspect.getcoroutinestate(coro) == inspect.CORO_CREATED
        ]
        self._sends = []
        if not waiting:
            return None
        for coro, _ in waiting:
            coro.close()
        lines = ", ".join(f"{shown_path(file)}:{line}" for _, (file, line) in waiting)
        return SendNotAwaited(
            f"ctx.send(...) at {lines} was never awaited: write 'await ctx.send(...)'"
        )

    def sent_run(self) -> AgentRun:
        """The run an assertion reads: every send awaited, and something sent."""
        unawaited = self.unawaited_sends()
        if unawaited is not None:
            raise unawaited
        run = self._session.run
        if not self.turns and not run.turns and not run.steps:
            raise NothingSent(
                "nothing was sent on this session yet, so there is no reply or run to "
                "assert on: 'await ctx.send(message)' first"
            )
        return run

    async def _send(self, message: str, parts: list[ContentPart]) -> Turn:
        previous = moment(self._session)  # (not the run: a long session's turn stays flat)
        if previous.head.pending_interrupts:
            waiting = ", ".join(asked.id for asked in previous.head.pending_interrupts)
            raise ApprovalError(
                f"ctx.send(...): the agent still waits for an answer to interrupt(s) {waiting}: "
                "answer with 'await ctx.resume(answer)' (or answers={id: answer}) first, or "
                "set ctx.interrupt_policy to answer interrupts as they come"
            )
        turn = await (
            self._session.send(message, parts=parts) if parts else self._session.send(message)
        )
        timing = turn.timing
        if timing is not None:
            self._timings.append(timing)
        now = moment_of(turn).head
        if now.pending_approvals or now.pending_interrupts:
            turn = await settle_approvals(
                self._session, turn, self.approval_policy, previous, self.interrupt_policy
            )
            if turn.timing is None:  # the resumed turn is still the one sent
                turn = turn_at(turn.index, turn.message, moment_of(turn), turn.steps, timing)
        self._note(turn)
        self.turns.append(turn)
        return turn

    def _note(self, turn: Turn) -> None:
        if moment_of(turn).head.status == RunStatus.FAILED:
            self.failed_turns.append(turn)

    async def resume(self, answer: Any = None, *, answers: Mapping[str, Any] | None = None) -> Turn:
        """Answer the pending interrupt (with several pending, ``answers`` answers each by
        id: one call settles a suspension) and resume the turn; returns the whole turn,
        which replaces the suspended one in ``ctx.turns``."""
        run = self.sent_run()
        pending = [asked.id for asked in run.pending_interrupts]
        if not pending:
            raise ApprovalError("ctx.resume(...): the agent is not waiting for an answer")
        if answers is None:
            if len(pending) > 1:
                raise ApprovalError(
                    f"ctx.resume(...): {len(pending)} interrupts are pending ({', '.join(pending)}); "
                    "answer them all with answers={id: answer, ...}"
                )
            answers = {pending[0]: answer}
        unknown = [key for key in answers if key not in pending]
        if unknown:
            raise ApprovalError(
                f"ctx.resume(answers=...): {', '.join(map(repr, unknown))} is not a pending "
                f"interrupt; the pending ids are {', '.join(pending)}"
            )
        started = self.turns[-1] if self.turns and self.turns[-1].index == run.turns else None
        turn = await resume_with(
            self._session, Turn(run.turns, "", run), self.approval_policy, answers
        )
        turn = await settle_approvals(
            self._session, turn, self.approval_policy, None, self.interrupt_policy
        )
        if started is not None:
            self.turns[-1] = turn_at(
                turn.index, started.message, moment_of(turn), turn.steps, started.timing
            )
            self._note(self.turns[-1])
            return self.turns[-1]
        self._note(turn)
        self.turns.append(turn)
        return turn

    async def converse(self, messages: Sequence[str | Sequence[Any]]) -> list[Turn]:
        """Scripted turns, in order, each sent after the previous one completed."""
        if isinstance(messages, str):
            raise TypeError("converse() takes a list of messages, not one string")
        return [await self.send(message) for message in messages]

    async def simulate(self, user: UserSimulator, *, max_turns: int | None = None) -> list[Turn]:
        """Let ``user`` write the user turns until it stops or the turn cap is reached.

        The simulated user sees the visible conversation only; approvals stay with the
        approval policy.
        """
        cap = max_turns if max_turns is not None else getattr(user, "max_turns", None)
        if not isinstance(cap, int) or cap < 1:
            raise ValueError("a simulated conversation needs a turn cap: max_turns >= 1")
        transcript: list[tuple[str, str]] = []
        turns: list[Turn] = []
        for _ in range(cap):
            message = await user.next_message(list(transcript))
            if message is None:
                break
            turn = await self.send(message)
            turns.append(turn)
            transcript.append(("user", message))
            transcript.append(("assistant", turn.reply))
        return turns

    async def new_session(
        self,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session:
        """Open a fresh session on the target (with tool ``faults``) and make it current."""
        session = await self.target.open(
            case_id=self.case_id,
            description=description,
            metadata=metadata,
            **faults_option(faults),
        )
        self.opened.append(session)
        self._session = session
        self.turns = []
        return session

    async def attach(self, session_id: str) -> AgentRun:
        """Continue (or inspect) a session opened elsewhere; returns its run so far."""
        self._session = await self.target.attach(session_id)
        self.turns = []
        return self._session.run

    async def refresh(self) -> AgentRun:
        """Read the current session's run again."""
        return await self._session.refresh()

    # -- case control -----------------------------------------------------------------

    def record_output(self, value: Any) -> None:
        """Keep ``value`` as the trial's output, for the reports: text as is, a trajectory,
        turn or run as its reply, mappings and lists item by item, else its ``repr``."""
        self.output = _output_data(value)

    def log(self, text: str, context: Mapping[str, Any] | None = None) -> None:
        """Keep a line for the report (``context`` is appended as JSON); no effect on
        the verdict."""
        line = str(text)
        if context:
            line += " " + json.dumps(dict(context), default=repr, ensure_ascii=False)
        self.logs.append(line)

    def skip(self, reason: str) -> None:
        raise SkipCase(reason)

    def require(self, condition: Any, message: Any = "", detail: str = "") -> None:
        """Stop the case unless ``condition`` holds.

        ``condition`` is the handle an assertion method returned (it becomes a gate), or a
        truth value recorded as a check named ``require``; Instructor's form
        ``require(name, passed, message)`` works too.
        """
        if isinstance(condition, str) and isinstance(message, bool):
            condition, message, name = message, detail, condition
        else:
            name = "require"
        if isinstance(condition, AssertionHandle):
            if not any(expectation is condition for expectation in self.expectations):
                self.register(condition)
            condition.gate()
            if not condition.passed:
                raise RequirementFailed(
                    message or condition.result.message or condition.result.name
                )
            return
        if isinstance(condition, AssertionResult):
            raise TypeError("require() takes the handle an assertion method returned")
        if isinstance(condition, Expectation):
            raise TypeError(
                "require() needs a result now; a deferred or judged expectation is only "
                "known when the case ends"
            )
        passed = bool(condition)
        text = str(message) if message else ("" if passed else "requirement failed")
        recorded = AssertionResult(name=name, score=float(passed), passed=passed, message=text)
        self.register(AssertionHandle(recorded))
        if not passed:
            raise RequirementFailed(text)

    # -- the judge host ---------------------------------------------------------------

    def register(self, expectation: Expectation) -> None:
        self.expectations.append(expectation)
        self.locations.append(eval_caller())

    def record_judge(self, record: JudgeRecord) -> None:
        self.judge_records.append(record)

    def judge(self, judge: Any = None) -> JudgeAssertions:
        from .judges import JudgeAssertions

        return JudgeAssertions(self, judge)


_OUTPUT_REPR_LIMIT: Final = 2000


def _output_data(value: Any) -> Any:
    """``value`` as the JSON data a trial's output holds (see :meth:`EvalContext.record_output`)."""
    if isinstance(value, Trajectory):
        return value.final_answer
    if isinstance(value, AgentRun | Turn):
        return value.reply
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(key): _output_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_output_data(item) for item in value]
    text = repr(value)
    return text if len(text) <= _OUTPUT_REPR_LIMIT else text[: _OUTPUT_REPR_LIMIT - 3] + "..."
