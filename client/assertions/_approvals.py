"""Approval and interrupt assertions: what was decided on gated tool calls, and what
the agent stopped to ask.

Rules:

- ``ToolWasApproved(name)`` passes when at least one call of ``name`` (matching ``args``
  if given) carries approval state ``approved``; ``ToolWasRejected`` likewise with
  ``rejected``. A call that was never gated has no approval state and matches neither.
- ``Interrupted(kind)`` passes when the agent raised an interrupt of that kind (answered,
  in ``interrupts``, or still pending); ``payload=`` and ``answer=`` narrow it with a
  matcher (a mapping is a subset match); ``count=`` takes an exact number or a count
  predicate of the matching interrupts.
- Argument, payload and answer matching follows :mod:`.matchers` (digest equality on
  redacted runs).
"""

from __future__ import annotations

from typing import Any

from evalport.protocol import ApprovalState

from .._core import AssertionResult
from ._base import Assertion, ToolCallsAssertion, run_of
from ._matchers import VERBATIM_HINT, Count, as_count, as_matcher


class _Decided(ToolCallsAssertion):
    state: str = ApprovalState.APPROVED

    def evaluate(self, subject: Any) -> AssertionResult:
        calls = self.calls(subject)
        undecided = 0
        states: list[str | None] = []
        for call in calls:
            answer = True if self.args is None else self.args.match(call.arguments)
            if answer is False:
                continue
            if answer is None:
                undecided += 1
                continue
            states.append(call.approval)
            if call.approval == self.state:
                return self.result(True, reason=call.approval_reason)
        if undecided:
            return self.not_evaluable(f"calls of {self.tool!r}: the matcher {VERBATIM_HINT}")
        if not calls:
            return self.result(False, f"{self.tool!r} was never called")
        if not states:
            return self.result(False, f"no call of {self.tool!r} matched the arguments")
        shown = ", ".join("not gated" if s is None else s for s in states)
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
        asked: list[tuple[Any, Any, bool]] = [
            (item.payload, item.answer, True)
            for item in run.interrupts
            if item.kind == self.interrupt
        ]
        asked += [
            (item.payload, None, False)
            for item in run.pending_interrupts
            if item.kind == self.interrupt
        ]
        matched = undecided = 0
        for payload, answer, answered in asked:
            checks = [True if self.payload is None else self.payload.match(payload)]
            if self.answer is not None:
                checks.append(self.answer.match(answer) if answered else False)
            if False in checks:
                continue
            if None in checks:
                undecided += 1
            else:
                matched += 1
        verdicts = {self.count.check(n) for n in range(matched, matched + undecided + 1)}
        if len(verdicts) > 1:
            return self.not_evaluable(f"interrupts of kind {self.interrupt!r}: {VERBATIM_HINT}")
        if verdicts.pop():
            return self.result(True)
        kinds = sorted(
            {item.kind for item in run.interrupts} | {i.kind for i in run.pending_interrupts}
        )
        if not asked:
            return self.result(
                False,
                f"no {self.interrupt!r} interrupt was raised; kinds raised: {kinds or 'none'}",
            )
        return self.result(
            False,
            f"{matched} of {len(asked)} {self.interrupt!r} interrupt(s) matched; "
            f"expected {self.count.describe()}",
        )
