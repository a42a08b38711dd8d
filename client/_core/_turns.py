"""What every target shares: a turn cut from the moments of its session's run, its timing
(:class:`TurnClock`) and the one parser of decisions (:func:`to_decision`). Rules: see
ARCHITECTURE.md, "The target contract".
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Generic, Self, TypeAlias, TypeVar

from evalport.protocol import AgentRun, ApprovalDecision, Step, StreamEvent, event_name

from ._results import TurnTiming
from ._target import RunAt, Turn, turn_at

T = TypeVar("T")

DecisionLike: TypeAlias = ApprovalDecision | str | bool | tuple[str, str | None] | Mapping[str, Any]
"""A decision in any spelling :func:`to_decision` accepts."""


def _steps_since(previous: RunAt, now: RunAt) -> list[Step]:
    old, new = previous.head.steps, now.head.steps
    before = len(old) if previous.counts is None else previous.counts.get("steps", len(old))
    # Grown in place (deltas): the check below would make turn 1,000 cost 13x turn 10.
    if new is old:
        return new[before:]
    if len(new) >= before and all(old[i].id == new[i].id for i in range(before)):
        return new[before:]
    return now.head.steps_of_turn(now.head.turns)


def next_turn(
    previous: AgentRun | RunAt,
    run: AgentRun | RunAt,
    message: str | None = None,
    timing: TurnTiming | None = None,
) -> Turn:
    """The turn between ``previous`` and ``run`` (runs or moments of runs);
    ``message=None`` for a resumed turn."""
    before = previous if isinstance(previous, RunAt) else RunAt(previous)
    now = run if isinstance(run, RunAt) else RunAt(run)
    head = now.head
    index = head.turns
    if message is None:
        messages = head.user_messages
        message = messages[index - 1] if 0 < index <= len(messages) else ""
        steps = head.steps_of_turn(index) or _steps_since(before, now)
    else:
        steps = _steps_since(before, now)
    return turn_at(index, message, now, steps, timing)


class TurnClock:
    """When a turn's answer came, by the client's clock, from when it was made: its first
    streamed event, the first text of its reply (a ``text-delta``), the whole of it."""

    __slots__ = ("first_event", "first_token", "sent")

    def __init__(self) -> None:
        self.sent = time.perf_counter()
        self.first_event: float | None = None
        self.first_token: float | None = None

    def seen(self, name: str) -> None:
        now = time.perf_counter() - self.sent
        if self.first_event is None:
            self.first_event = now
        if name == "text-delta" and self.first_token is None:
            self.first_token = now

    def told(self, event: StreamEvent) -> None:
        """:meth:`seen` for an event the in-process runtime tells."""
        self.seen(event_name(event))

    def timing(self, turn: int, replied: bool) -> TurnTiming:
        """The turn's timing, now that its whole answer is in; a streamed turn whose
        agent sent its reply whole (``replied``, no ``text-delta``) has its first token
        with the whole answer."""
        total = time.perf_counter() - self.sent
        first_token = self.first_token
        if first_token is None and replied and self.first_event is not None:
            first_token = total
        return TurnTiming(
            turn=turn, total=total, first_event=self.first_event, first_token=first_token
        )


def to_decision(value: DecisionLike, call_id: str) -> ApprovalDecision:
    """An :class:`ApprovalDecision` from any accepted spelling (see ARCHITECTURE.md, "The
    target contract"); ``ValueError`` naming ``call_id`` for anything else."""
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
        self._at = RunAt(run)
        self.closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._id!r}, turns={self._at.head.turns})"

    @property
    def id(self) -> str:
        return self._id

    @property
    def run(self) -> AgentRun:
        return self._at.run

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

    def _advance(
        self, run: AgentRun | RunAt, message: str | None, timing: TurnTiming | None = None
    ) -> Turn:
        now = run if isinstance(run, RunAt) else RunAt(run)
        turn = next_turn(self._at, now, message, timing)
        self._at = now
        return turn


def moment(session: object) -> RunAt:
    """The moment of a session's run: cheap for the sessions here, built from ``run`` for
    any other :class:`~evalport.client.Session`."""
    if isinstance(session, SessionBase):
        at: RunAt = session._at
        return at
    run: AgentRun = session.run  # type: ignore[attr-defined]
    return RunAt(run)
