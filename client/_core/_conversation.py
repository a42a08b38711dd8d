"""Conversations: scripted turns, approval and interrupt policies, simulated users.

Fail loud: silence is never consent. Rules: see ARCHITECTURE.md, "Conversations:
approvals, interrupts, simulated users".
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    PendingApproval,
    PendingInterrupt,
    is_digest,
    matches_digest,
)

from ._target import RunAt, Session, Turn, moment_of, turn_at
from ._trajectory import Trajectory
from ._turns import DecisionLike, next_turn, to_decision

MAX_APPROVAL_ROUNDS: Final = 25


class ApprovalError(RuntimeError):
    """The agent asked for approval and the eval did not (fully) answer."""


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the agent waits for: one or more gated tool calls."""

    pending: tuple[PendingApproval, ...]
    run: AgentRun
    turn: int

    @property
    def ids(self) -> list[str]:
        return [item.call_id for item in self.pending]

    @property
    def actions(self) -> tuple[PendingApproval, ...]:
        """The pending calls (Neuron's name for them)."""
        return self.pending

    def arguments(self, call_id: str) -> Any:
        """The arguments of pending call ``call_id`` (digested on a redacted run)."""
        for item in self.pending:
            if item.call_id == call_id:
                return item.arguments
        raise KeyError(f"no pending call {call_id!r}; pending: {self.ids}")

    def matches(self, call_id: str, **expected: Any) -> bool:
        """Whether call ``call_id``'s arguments hold ``expected`` (digest-aware), e.g.
        ``request.matches(id, order_id="A1")`` works on redacted runs too."""
        arguments = self.arguments(call_id)
        if not isinstance(arguments, Mapping):
            return False
        return all(
            key in arguments and matches_digest(value, arguments[key])
            for key, value in expected.items()
        )


ApprovalPolicy: TypeAlias = Callable[
    [ApprovalRequest, Trajectory],
    Mapping[str, DecisionLike] | Awaitable[Mapping[str, DecisionLike]],
]

InterruptPolicy: TypeAlias = Callable[[PendingInterrupt, Trajectory], Any]
"""``policy(interrupt, trajectory) -> answer`` (or an awaitable of it)."""


@runtime_checkable
class UserSimulator(Protocol):
    """What ``ctx.simulate`` drives: the next user message from the visible transcript
    (``None`` to stop) under a required turn cap. :class:`~evalport.client.ScriptedUser`
    and the model-backed :class:`~evalport.client.SimulatedUser` satisfy it."""

    max_turns: int

    async def next_message(self, transcript: Sequence[tuple[str, str]]) -> str | None: ...


def _digested(pending: tuple[PendingApproval, ...]) -> list[str]:
    """The pending calls' arguments that are digests, as ``tool.key`` (``tool`` when the
    arguments are one digest)."""
    names: list[str] = []
    for item in pending:
        arguments = item.arguments
        if is_digest(arguments):
            names.append(item.tool)
        elif isinstance(arguments, Mapping):
            names += [f"{item.tool}.{key}" for key, value in arguments.items() if is_digest(value)]
    return names


def _describe(pending: tuple[PendingApproval, ...], ids: list[str]) -> str:
    tools = {item.call_id: item.tool for item in pending}
    return ", ".join(f"{call_id} ({tools.get(call_id, '?')})" for call_id in ids)


async def settle_approvals(
    session: Session,
    turn: Turn,
    policy: ApprovalPolicy | None,
    previous: AgentRun | RunAt | None = None,
    interrupts: InterruptPolicy | None = None,
) -> Turn:
    """Answer suspensions of ``turn`` with ``policy`` (approvals) and ``interrupts``
    (interrupts) until nothing is pending, or until an interrupt waits with no policy to
    answer it (the case then calls ``ctx.resume``).

    Returns the whole turn: the message that started it, the final run, and the steps
    the run gained since ``previous`` (the run before the message was sent), across every
    suspension.
    """
    rounds = 0
    started = turn
    while turn.run.pending_approvals or turn.run.pending_interrupts:
        if turn.run.pending_interrupts and interrupts is None:
            break  # the case answers: ctx.resume(...)
        rounds += 1
        if rounds > MAX_APPROVAL_ROUNDS:
            raise ApprovalError(
                f"still suspended after {MAX_APPROVAL_ROUNDS} rounds in turn "
                f"{turn.index}; pending: {_pending_ids(turn.run)}"
            )
        answers: dict[str, Any] = {}
        trajectory = Trajectory(turn.run)
        for asked in turn.run.pending_interrupts:
            assert interrupts is not None
            answer = interrupts(asked, trajectory)
            answers[asked.id] = await answer if inspect.isawaitable(answer) else answer
        turn = await resume_with(session, turn, policy, answers)
    if turn is started:
        return turn
    if previous is None:
        return turn_at(turn.index, started.message, moment_of(turn), turn.steps)
    return next_turn(previous, moment_of(turn), started.message)


def _pending_ids(run: AgentRun) -> str:
    ids = [item.call_id for item in run.pending_approvals]
    ids += [f"{item.id} ({item.kind})" for item in run.pending_interrupts]
    return ", ".join(ids)


async def resume_with(
    session: Session, turn: Turn, policy: ApprovalPolicy | None, answers: Mapping[str, Any]
) -> Turn:
    """Settle ``turn``'s suspension in one call: ``answers`` for its interrupts (by id),
    ``policy`` for its approvals."""
    decisions: dict[str, ApprovalDecision] = {
        key: ApprovalDecision(decision="answer", answer=answer) for key, answer in answers.items()
    }
    if turn.run.pending_approvals:
        decisions.update(await _decide_approvals(turn, policy))
    return await session.decide(decisions)


async def _decide_approvals(
    turn: Turn, policy: ApprovalPolicy | None
) -> dict[str, ApprovalDecision]:
    pending = tuple(turn.run.pending_approvals)
    ids = [item.call_id for item in pending]
    if policy is None:
        raise ApprovalError(
            f"the agent suspended for approval of {_describe(pending, ids)} and no "
            "approval policy is set; pass approval_policy=... (silence is never consent)"
        )
    request = ApprovalRequest(pending=pending, run=turn.run, turn=turn.index)
    try:
        answer = policy(request, Trajectory(turn.run))
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as error:
        digested = _digested(pending)
        if not digested:
            raise
        raise ApprovalError(
            f"the approval policy raised {type(error).__name__}: {error}. The arguments it "
            f"saw are digests, not values ({', '.join(digested)}), because the trace "
            "policy digests tool payloads: compare them with request.matches(call_id, "
            "key=value), or run with --trace-policy verbatim (TracePolicy.verbatim()) "
            "for the policy to read them"
        ) from error
    if not isinstance(answer, Mapping):
        raise ApprovalError(
            f"the approval policy must return a mapping of call id -> decision, "
            f"got {type(answer).__name__}; pending: {_describe(pending, ids)}"
        )
    missing = [call_id for call_id in ids if call_id not in answer]
    unknown = [str(call_id) for call_id in answer if call_id not in ids]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"left pending call(s) undecided: {_describe(pending, missing)}")
        if unknown:
            parts.append(f"decided call(s) that are not pending: {', '.join(unknown)}")
        raise ApprovalError("the approval policy " + "; ".join(parts))
    try:
        return {call_id: to_decision(answer[call_id], call_id) for call_id in ids}
    except ValueError as error:
        raise ApprovalError(f"the approval policy answered: {error}") from None


# -- ready-made policies ------------------------------------------------------------------


def approve_all() -> ApprovalPolicy:
    """Approve every pending call."""

    def policy(request: ApprovalRequest, trajectory: Trajectory) -> dict[str, DecisionLike]:
        return dict.fromkeys(request.ids, "approve")

    return policy


def reject_all(reason: str | None = None) -> ApprovalPolicy:
    """Reject every pending call (with ``reason``, which reaches the agent)."""

    def policy(request: ApprovalRequest, trajectory: Trajectory) -> dict[str, DecisionLike]:
        decision: DecisionLike = ("reject", reason) if reason else "reject"
        return dict.fromkeys(request.ids, decision)

    return policy


def decide_by_tool(
    decisions: Mapping[str, DecisionLike], default: DecisionLike | None = None
) -> ApprovalPolicy:
    """Decide by tool name; a tool not listed gets ``default``, or stays undecided
    (which fails loud) when there is no default."""

    def policy(request: ApprovalRequest, trajectory: Trajectory) -> dict[str, DecisionLike]:
        answer: dict[str, DecisionLike] = {}
        for item in request.pending:
            choice = decisions.get(item.tool, default)
            if choice is not None:
                answer[item.call_id] = choice
        return answer

    return policy


def answer_by_kind(answers: Mapping[str, Any]) -> InterruptPolicy:
    """Answer each interrupt with ``answers[kind]``; a callable there is called with the
    interrupt and its result is the answer. A kind not listed raises
    :class:`ApprovalError` (an unanswered question is never answered for you)."""

    def policy(interrupt: PendingInterrupt, trajectory: Trajectory) -> Any:
        if interrupt.kind not in answers:
            raise ApprovalError(
                f"the agent asked a {interrupt.kind!r} interrupt ({interrupt.id}) and the "
                f"interrupt policy answers only {sorted(answers)}"
            )
        answer = answers[interrupt.kind]
        return answer(interrupt) if callable(answer) else answer

    return policy
