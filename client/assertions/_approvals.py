"""Approval assertions: what was decided on gated tool calls.

Rules:

- ``ToolWasApproved(name)`` passes when at least one call of ``name`` (matching ``args``
  if given) carries approval state ``approved``; ``ToolWasRejected`` likewise with
  ``rejected``. A call that was never gated has no approval state and matches neither.
- Argument matching follows :mod:`.matchers` (digest equality on redacted runs).
"""

from __future__ import annotations

from typing import Any

from evalport.protocol import ApprovalState

from .._results import AssertionResult
from ._base import ToolCallsAssertion
from ._matchers import VERBATIM_HINT


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
