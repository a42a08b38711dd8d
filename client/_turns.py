"""What both targets share: a turn cut from two accumulated runs, and decision input.

Rules:

- A turn's index is the run's ``turns`` (as Instructor shows it). A turn's own steps are
  the steps the accumulated run gained during the call; a server whose runs do not grow
  step by step falls back to the steps numbered with the turn.
- A turn answered by ``decide`` is the suspended turn resumed: its index and message are
  those of the turn that suspended, and its steps are all of that turn's steps (the step
  that asked for approval included), so a turn reads the same however often it paused.
- A decision is parsed in one place (:func:`to_decision`), for ``Session.decide`` and
  approval policies alike: an :class:`~evalport.protocol.ApprovalDecision`, ``"approve"``,
  ``"reject"``, ``True``/``False``, ``("reject", reason)`` or ``{"decision": ...,
  "reason": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Generic, Self, TypeAlias, TypeVar

from evalport.protocol import AgentRun, ApprovalDecision, Step

from ._target import Turn

T = TypeVar("T")

DecisionLike: TypeAlias = ApprovalDecision | str | bool | tuple[str, str | None] | Mapping[str, Any]
"""A decision in any spelling :func:`to_decision` accepts."""


def _steps_since(previous: AgentRun, run: AgentRun) -> list[Step]:
    before = len(previous.steps)
    if len(run.steps) >= before and all(
        old.id == new.id for old, new in zip(previous.steps, run.steps, strict=False)
    ):
        return run.steps[before:]
    return run.steps_of_turn(run.turns)


def next_turn(previous: AgentRun, run: AgentRun, message: str | None = None) -> Turn:
    """The turn between ``previous`` and ``run``; ``message=None`` for a resumed turn."""
    index = run.turns
    if message is None:
        message = run.user_messages[index - 1] if 0 < index <= len(run.user_messages) else ""
        steps = run.steps_of_turn(index) or _steps_since(previous, run)
    else:
        steps = _steps_since(previous, run)
    return Turn(index=index, message=message, run=run, steps=steps)


def to_decision(value: DecisionLike, call_id: str) -> ApprovalDecision:
    """An :class:`ApprovalDecision` from any accepted spelling (see the module rules);
    ``ValueError`` naming ``call_id`` for anything else."""
    if isinstance(value, ApprovalDecision):
        return value
    verdict: object = value
    reason: object = None
    if isinstance(value, bool):
        verdict = "approve" if value else "reject"
    elif isinstance(value, tuple | list) and len(value) == 2:
        verdict, reason = value
    elif isinstance(value, Mapping):
        verdict, reason = value.get("decision"), value.get("reason")
        if verdict == "answer":
            return ApprovalDecision(decision="answer", answer=value.get("answer"))
    if verdict == "approve" or verdict == "reject":
        return ApprovalDecision(decision=verdict, reason=None if reason is None else str(reason))
    raise ValueError(
        f"the decision for call {call_id!r} is {value!r}; use 'approve', 'reject', "
        "True/False, ('reject', reason) or {'decision': ..., 'reason': ...}"
    )


def decisions_of(decisions: Mapping[str, DecisionLike]) -> dict[str, ApprovalDecision]:
    """Decisions as the protocol sends them; an empty mapping is refused."""
    if not decisions:
        raise ValueError("decide() needs a decision for every pending call id; none given")
    return {call_id: to_decision(value, call_id) for call_id, value in decisions.items()}


class SessionBase(Generic[T]):
    """What every target's session shares: its id, its accumulated run, the ``async with``
    protocol and how a new run becomes a :class:`Turn`. Subclasses add ``send``,
    ``decide``, ``refresh`` and ``close`` for their transport."""

    def __init__(self, target: T, session_id: str, run: AgentRun) -> None:
        self._target = target
        self._id = session_id
        self._run = run
        self.closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._id!r}, turns={self._run.turns})"

    @property
    def id(self) -> str:
        return self._id

    @property
    def run(self) -> AgentRun:
        return self._run

    @property
    def target(self) -> T:
        return self._target

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    def _advance(self, run: AgentRun, message: str | None) -> Turn:
        turn = next_turn(self._run, run, message)
        self._run = run
        return turn
