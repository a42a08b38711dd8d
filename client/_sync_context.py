"""The blocking context a sync case function receives, in a worker thread; each call runs on
the trial's event loop. See ARCHITECTURE.md, "The eval context".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from evalport.protocol import AgentRun, ToolFault

from ._context import EvalContext
from ._core import (
    ApprovalPolicy,
    Expectation,
    InterruptPolicy,
    JudgeRecord,
    Session,
    Trajectory,
    Turn,
    TurnTiming,
    UserSimulator,
)
from ._methods import AssertionMethods

if TYPE_CHECKING:
    from .judges import JudgeAssertions

T = TypeVar("T")


class SyncEvalContext(AssertionMethods):
    """The context a sync case function receives, in a worker thread."""

    def __init__(self, inner: EvalContext, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop
        self._cancelled = False
        self._pending: set[concurrent.futures.Future[Any]] = set()

    def cancel(self) -> None:
        """Stop the case: pending calls are cancelled, later ones raise at once."""
        self._cancelled = True
        for future in list(self._pending):
            future.cancel()

    def block(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the case's event loop and wait for its result (sync code that
        holds a coroutine, such as an evaluator's async ``set_up``, uses this)."""
        if self._cancelled:
            coro.close()
            raise asyncio.CancelledError("the case was stopped (timeout)")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        self._pending.add(future)
        try:
            return future.result()
        finally:
            self._pending.discard(future)

    def __getattr__(self, name: str) -> Any:
        # state and case control are shared with the async context
        return getattr(self._inner, name)

    @property
    def run(self) -> AgentRun:
        return self._inner.run

    @property
    def turns(self) -> list[Turn]:
        return self._inner.turns

    @property
    def approval_policy(self) -> ApprovalPolicy | None:
        return self._inner.approval_policy

    @approval_policy.setter
    def approval_policy(self, policy: ApprovalPolicy | None) -> None:
        self._inner.approval_policy = policy

    @property
    def interrupt_policy(self) -> InterruptPolicy | None:
        return self._inner.interrupt_policy

    @interrupt_policy.setter
    def interrupt_policy(self, policy: InterruptPolicy | None) -> None:
        self._inner.interrupt_policy = policy

    def register(self, expectation: Expectation) -> None:
        self._inner.register(expectation)

    def record_judge(self, record: JudgeRecord) -> None:
        self._inner.record_judge(record)

    def require(self, condition: Any, message: Any = "", detail: str = "") -> None:
        self._inner.require(condition, message, detail)

    def trajectory(self) -> Trajectory:
        return self._inner.trajectory()

    def sent_run(self) -> AgentRun:
        return self._inner.sent_run()

    @property
    def timings(self) -> list[TurnTiming]:
        return self._inner.timings

    def judge(self, judge: Any = None) -> JudgeAssertions:
        from .judges import JudgeAssertions

        return JudgeAssertions(self, judge)

    def send(self, message: str | Sequence[Any], *, image: Any = None, file: Any = None) -> Turn:
        return self.block(self._inner.send(message, image=image, file=file))

    def resume(self, answer: Any = None, *, answers: Mapping[str, Any] | None = None) -> Turn:
        return self.block(self._inner.resume(answer, answers=answers))

    def converse(self, messages: Sequence[str | Sequence[Any]]) -> list[Turn]:
        return self.block(self._inner.converse(messages))

    def simulate(self, user: UserSimulator, *, max_turns: int | None = None) -> list[Turn]:
        return self.block(self._inner.simulate(user, max_turns=max_turns))

    def new_session(
        self,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session:
        opened = self._inner.new_session(description=description, metadata=metadata, faults=faults)
        return self.block(opened)

    def attach(self, session_id: str) -> AgentRun:
        return self.block(self._inner.attach(session_id))

    def refresh(self) -> AgentRun:
        return self.block(self._inner.refresh())
