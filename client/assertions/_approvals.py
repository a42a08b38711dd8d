"""Approval and interrupt assertions: what was decided on gated tool calls, and what the
agent stopped to ask. A call never gated matches neither ``ToolWasApproved`` nor
``ToolWasRejected``. See ARCHITECTURE.md, "The assertion families".
"""

from __future__ import annotations

from typing import Any

from evalport.protocol import ApprovalState, Interrupt, PendingInterrupt

from .._core import AssertionResult
from ._base import Assertion, ToolCallsAssertion, run_of
from ._matchers import VERBATIM_HINT, Count, all_of, as_count, as_matcher


class _Decided(ToolCallsAssertion):
    state: str = ApprovalState.APPROVED

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        calls, matching, undecided = self.matching(subject)
        for call in matching:
            if call.approval == self.state:
                return self.result(True, reason=call.approval_reason)
        if failed := self.unmatched(calls, matching, undecided):
            return failed
        shown = ", ".join(
            "not gated" if call.approval is None else call.approval for call in matching
        )
        return self.result(False, f"no call of {self.tool!r} was {self.state}; states: {shown}")


class ToolWasApproved(_Decided):
    kind = "tool_was_approved"
    state = ApprovalState.APPROVED


class ToolWasRejected(_Decided):
    kind = "tool_was_rejected"
    state = ApprovalState.REJECTED


class Interrupted(Assertion):
    kind = "interrupted"

    def __init__(
        self,
        kind: str,
        *,
        payload: Any = None,
        answer: Any = None,
        count: int | Count | None = None,
    ) -> None:
        self.interrupt = kind
        self.payload = None if payload is None else as_matcher(payload)
        self.answer = None if answer is None else as_matcher(answer)
        self.count = as_count(count)

    def describe(self) -> str:
        return self.interrupt

    def evaluate(self, subject: Any) -> AssertionResult:
        run = run_of(subject, self.kind)
        raised: list[Interrupt | PendingInterrupt] = [*run.interrupts, *run.pending_interrupts]
        asked = [item for item in raised if item.kind == self.interrupt]
        answers = [
            all_of(
                [
                    self.payload is None or self.payload.match(item.payload),
                    self.answer is None
                    or (isinstance(item, Interrupt) and self.answer.match(item.answer)),
                ]
            )
            for item in asked
        ]
        matched = answers.count(True)
        verdict = self.count.settle(matched, answers.count(None))
        if verdict is None:
            return self.not_evaluable(f"interrupts of kind {self.interrupt!r}: {VERBATIM_HINT}")
        if verdict:
            return self.result(True)
        if not asked:
            kinds = sorted({item.kind for item in raised})
            return self.result(
                False,
                f"no {self.interrupt!r} interrupt was raised; kinds raised: {kinds or 'none'}",
            )
        return self.result(
            False,
            f"{matched} of {len(asked)} {self.interrupt!r} interrupt(s) matched; "
            f"expected {self.count.describe()}",
        )
