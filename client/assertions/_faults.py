"""Fault assertions: which tool calls got an injected fault instead of the tool's own outcome.

Rules:

- ``ToolWasInjected(name)`` passes when at least one call of ``name`` (matching ``args``
  if given) carries ``injected=True``: its error or result came from a tool fault the
  session was opened with (``faults=``, :mod:`evalport.protocol.runtime._faults`), not from the
  tool. A call that failed by itself is not injected; assert that with
  ``called_tool(name, is_error=True)``.
- Argument matching follows :mod:`.matchers` (digest equality on redacted runs).
"""

from __future__ import annotations

from typing import Any

from .._core import AssertionResult
from ._base import ToolCallsAssertion
from ._matchers import VERBATIM_HINT


class ToolWasInjected(ToolCallsAssertion):
    kind = "tool_was_injected"

    def evaluate(self, subject: Any) -> AssertionResult:
        calls = self.calls(subject)
        undecided = matched = 0
        for call in calls:
            answer = True if self.args is None else self.args.match(call.arguments)
            if answer is None:
                undecided += 1
            elif answer:
                if call.injected:
                    return self.result(True)
                matched += 1
        if undecided:
            return self.not_evaluable(f"calls of {self.tool!r}: the matcher {VERBATIM_HINT}")
        if not calls:
            return self.result(False, f"{self.tool!r} was never called")
        if not matched:
            return self.result(False, f"no call of {self.tool!r} matched the arguments")
        return self.result(
            False,
            f"{matched} call(s) of {self.tool!r}, none injected: was the session opened "
            f"with faults for {self.tool!r}, and does the tool run through @tool or "
            "ctx.tool_execution()?",
        )
