"""What a suspended turn waits for: pending approvals and interrupts, one mechanism.

Settling must cover exactly the pending ids, or nothing resumes. Rules: see
ARCHITECTURE.md, "Recording a turn".
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any, Final

from .._messages import ApprovalDecision
from .._models import AgentRun, Interrupt, PendingApproval, PendingInterrupt
from ._approvals import ApprovalResult
from ._errors import DecisionError
from ._stamps import json_arguments, json_value, new_id, utc_now

Decision = ApprovalDecision | ApprovalResult | str | tuple[str, str]
"""A decision on a pending call (any of these spellings) or, as an
:class:`ApprovalDecision` with ``decision="answer"``, the answer to a pending interrupt."""


def approval_request(
    turn: int,
    tool: str,
    arguments: Mapping[str, Any] | None,
    call_id: str | None,
    reason: str | None,
) -> PendingApproval:
    """The request a turn suspends on to have a call of ``tool`` approved."""
    return PendingApproval(
        call_id=call_id or new_id(),
        tool=tool,
        arguments=json_arguments(arguments),
        turn=turn,
        reason=reason,
        requested_at=utc_now(),
    )


def interrupt_request(turn: int, kind: str, payload: Any) -> PendingInterrupt:
    """The request a turn suspends on to ask something that is not an approval."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("an interrupt needs a kind, a non-empty str such as 'clarification'")
    return PendingInterrupt(
        id=new_id(),
        kind=kind,
        payload=json_value(payload),
        turn=turn,
        requested_at=utc_now(),
    )


def _answers_interrupt(decision: Decision) -> bool:
    return isinstance(decision, ApprovalDecision) and decision.decision == "answer"


def _result_of(decision: Decision) -> ApprovalResult:
    if isinstance(decision, ApprovalResult):
        return decision
    if isinstance(decision, ApprovalDecision):
        return ApprovalResult(approved=decision.decision == "approve", reason=decision.reason)
    if isinstance(decision, str):
        if decision not in ("approve", "reject"):
            raise ValueError(f"a decision is 'approve' or 'reject', not {decision!r}")
        return ApprovalResult(approved=decision == "approve")
    verdict, reason = decision
    if verdict not in ("approve", "reject"):
        raise ValueError(f"a decision is 'approve' or 'reject', not {verdict!r}")
    return ApprovalResult(approved=verdict == "approve", reason=reason)


_NO_IDS: Final[frozenset[str]] = frozenset()
"""The interrupt ids of a suspension waiting on none: one object for every idle session
(a set per session would be one more object for every full collection to walk; an empty
dict, as ``_futures`` starts, is not tracked by the collector)."""


class Suspension:
    """The requests one turn waits on, by id, and the futures that resume it."""

    __slots__ = ("_futures", "_interrupts")

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[Any]] = {}
        self._interrupts: frozenset[str] = _NO_IDS  # (shared while empty: see :data:`_NO_IDS`)

    def __bool__(self) -> bool:
        return bool(self._futures)

    def add(
        self, run: AgentRun, pending: PendingApproval | PendingInterrupt
    ) -> asyncio.Future[Any]:
        """List ``pending`` in ``run`` and return the future its answer will resolve."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if isinstance(pending, PendingInterrupt):
            if not pending.id or pending.id in self._futures:
                pending.id = str(uuid.uuid4())
            self._futures[pending.id] = future
            self._interrupts |= {pending.id}
            run.pending_interrupts.append(pending)
        else:
            if pending.call_id in self._futures:
                pending.call_id = str(uuid.uuid4())
            self._futures[pending.call_id] = future
            run.pending_approvals.append(pending)
        return future

    def check(self, decisions: Mapping[str, Decision]) -> None:
        """Raise :class:`DecisionError` unless ``decisions`` settle exactly what is pending."""
        pending, interrupts = self._futures, self._interrupts
        missing = [key for key in pending if key not in decisions]
        unknown = [key for key in decisions if key not in pending]
        mismatched = [
            key
            for key, decision in decisions.items()
            if key in pending and (key in interrupts) != _answers_interrupt(decision)
        ]
        if missing or unknown or mismatched:
            raise DecisionError(missing, unknown, mismatched)

    def settle(self, run: AgentRun, decisions: Mapping[str, Decision]) -> None:
        """Record the answers in ``run``, clear its pending lists and resume the waiters
        (``decisions`` passed :meth:`check`)."""
        results: dict[str, Any] = {}
        for key, decision in decisions.items():
            if key in self._interrupts:
                assert isinstance(decision, ApprovalDecision)
                results[key] = decision.answer
            else:
                results[key] = _result_of(decision)
        answered_at = utc_now()
        for asked in run.pending_interrupts:
            run.interrupts.append(
                Interrupt(
                    id=asked.id,
                    kind=asked.kind,
                    payload=asked.payload,
                    answer=results[asked.id],
                    turn=asked.turn,
                    requested_at=asked.requested_at,
                    answered_at=answered_at,
                )
            )
        run.pending_approvals = []
        run.pending_interrupts = []
        futures, self._futures = self._futures, {}
        self._interrupts = _NO_IDS
        for key, future in futures.items():
            if not future.done():
                future.set_result(results[key])

    def drop(self, run: AgentRun | None = None) -> None:
        """Cancel every waiter (an agent waiting, a sync one in its worker thread included,
        wakes with ``CancelledError`` instead of holding its thread) and, given the run,
        clear its pending lists."""
        futures, self._futures = self._futures, {}
        self._interrupts = _NO_IDS
        for future in futures.values():
            future.cancel()
        if run is not None:
            run.pending_approvals = []
            run.pending_interrupts = []
