"""Fault assertions: which tool calls got an injected fault, not the tool's own outcome.
See ARCHITECTURE.md, "The assertion families".
"""

from __future__ import annotations

from typing import Any

from .._core import AssertionResult
from ._base import ToolCallsAssertion


class ToolWasInjected(ToolCallsAssertion):
    kind = "tool_was_injected"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        calls, matching, undecided = self.matching(subject)
        if any(call.injected for call in matching):
            return self.result(True)
        if failed := self.unmatched(calls, matching, undecided):
            return failed
        return self.result(
            False,
            f"{len(matching)} call(s) of {self.tool!r}, none injected: was the session opened "
            f"with faults for {self.tool!r}, and does the tool run through @tool or "
            "ctx.tool_execution()?",
        )
