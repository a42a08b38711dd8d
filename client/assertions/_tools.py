"""Tool assertions: which tools the agent called, with what, how often, in which order
(``ToolOrder``'s modes relate the expected list to the actual calls). See
ARCHITECTURE.md, "The assertion families".
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, Final

from .._core import AssertionResult, Trajectory, TrajectoryToolCall
from ._base import Assertion, ToolCallsAssertion, run_of
from ._matchers import (
    DIGESTED_HINT,
    VERBATIM_HINT,
    Count,
    Matcher,
    all_of,
    as_count,
    at_most,
    error_lines,
    has_digest,
    short,
    value_matcher,
)
from ._sequence import lcs_length, multiset_overlap
from ._steps import BudgetAssertion

UNSET: Final[Any] = object()


class ToolOrderMode:
    """The four modes of :class:`ToolOrder` (``MEANING``); ``EXPECTED_IN_ORDER`` and
    ``ONLY_FROM_EXPECTED`` are descriptive aliases of ``subset`` and ``superset``."""

    STRICT = "strict"
    UNORDERED = "unordered"
    SUBSET = "subset"
    SUPERSET = "superset"
    EXPECTED_IN_ORDER = SUBSET
    ONLY_FROM_EXPECTED = SUPERSET
    ALL = (STRICT, UNORDERED, SUBSET, SUPERSET)
    MEANING: Final = {
        STRICT: "actual == expected, same order, nothing else",
        UNORDERED: "same calls and counts as expected, any order",
        SUBSET: "expected ⊆ actual: expected calls in this order, extra calls allowed",
        SUPERSET: "expected ⊇ actual: no call outside the expected list",
    }


def match_calls(
    calls: Sequence[TrajectoryToolCall],
    args: Matcher | None = None,
    result: Matcher | None = None,
    is_error: bool | None = None,
    enough: int | None = None,
) -> tuple[int, int]:
    """``(matched, undecided)``: calls that match, and calls that could not be read.

    With ``enough``, counting stops once that many calls matched.
    """
    matched = undecided = 0
    for call in calls:
        if matched == enough:
            break
        if is_error is not None and call.is_error != is_error:
            continue
        answer = True if args is None else args.match(call.arguments)
        if answer is not False and result is not None:
            answer = call.executed and all_of([answer, result.match(call.result)])
        matched += answer is True
        undecided += answer is None
    return matched, undecided


def _seen(calls: Sequence[TrajectoryToolCall], limit: int = 5) -> str:
    return "[" + "; ".join(short(call.arguments) for call in calls[:limit]) + "]"


def _called_instead(subject: Any, tool: str) -> str:
    """What was called instead of ``tool``, a close name first ("did you mean")."""
    names = list(dict.fromkeys(Trajectory.of(run_of(subject, "called_tool")).tool_names()))
    if not names:
        return "no tool was called"
    close = difflib.get_close_matches(tool, names, n=1, cutoff=0.6)
    if not close:
        close = [name for name in names if tool in name or name in tool][:1]
    said = f"did you mean {close[0]!r}? " if close else ""
    return f"{said}tools called: {', '.join(names)}"


class CalledTool(ToolCallsAssertion):
    kind = "called_tool"

    def __init__(
        self,
        name: str,
        args: Any = None,
        *,
        result: Any = UNSET,
        is_error: bool | None = None,
        count: int | Count | None = None,
    ) -> None:
        super().__init__(name, args)
        self.expected_result = None if result is UNSET else value_matcher(result)
        self.is_error = is_error
        self.count = as_count(count)

    def describe(self) -> str:
        parts = [self.tool]
        if self.args is not None:
            parts.append(self.args.describe())
        if self.expected_result is not None:
            parts.append(f"result={self.expected_result.describe()}")
        if self.is_error is not None:
            parts.append(f"is_error={self.is_error}")
        if self.count != Count(1, None):
            parts.append(self.count.describe())
        return ", ".join(parts)

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        calls = self.calls(subject)
        count = self.count
        enough = count.low if count.high is None else count.high + 1
        matched, undecided = match_calls(
            calls, self.args, self.expected_result, self.is_error, enough
        )
        verdict = self.count.settle(matched, undecided)
        context = {"calls": len(calls), "matched": matched, "undecided": undecided}
        if verdict is None:
            return self.not_evaluable(
                f"{undecided} call(s) of {self.tool!r}: the matcher {VERBATIM_HINT}", **context
            )
        if verdict:
            return self.result(True, "", **context)
        if not calls:
            message = f"{self.tool!r} was never called; {_called_instead(subject, self.tool)}"
        else:
            found = f"more than {count.high}" if matched == enough else str(matched)
            message = (
                f"{self.tool!r} called {len(calls)} time(s), {found} matching; "
                f"expected {count.describe()} matching; arguments seen: {_seen(calls)}"
            )
            if any(has_digest(call.arguments) or has_digest(call.result) for call in calls):
                message += f"; {DIGESTED_HINT}"
        return self.result(False, message, **context)


class NotCalledTool(ToolCallsAssertion):
    """``name`` was not called (with arguments matching ``args``, if given)."""

    kind = "not_called_tool"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        calls = self.calls(subject)
        matched, undecided = match_calls(calls, self.args, enough=1)
        verdict = at_most(0).settle(matched, undecided)
        if verdict is None:
            return self.not_evaluable(f"calls of {self.tool!r}: the matcher {VERBATIM_HINT}")
        message = "" if verdict else f"{self.tool!r} was called {matched} time(s)"
        return self.result(verdict, message, calls=len(calls), matched=matched)


class UsedNoTools(Assertion):
    kind = "used_no_tools"
    needs = "tools"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        calls = Trajectory.of(run_of(subject, self.kind)).all_calls
        if not calls:
            return self.result(True)
        return self.result(False, f"tools were called: {[call.name for call in calls][:20]!r}")


class MaxToolCalls(BudgetAssertion):
    """At most ``limit`` tool calls in all (or of tool ``name``); partial credit above."""

    kind = "max_tool_calls"
    needs = "tools"

    def __init__(self, limit: int, name: str | None = None) -> None:
        super().__init__(limit)
        self.tool = name

    def describe(self) -> str:
        return str(self.limit) if self.tool is None else f"{self.limit}, {self.tool}"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        view = Trajectory.of(run_of(subject, self.kind))
        used = len(view.all_calls if self.tool is None else view.calls_of(self.tool))
        return self.graded(used, "tool calls", "limit", calls=used)


class NoFailedActions(Assertion):
    """No tool call failed and the run recorded no error (as in Instructor); partial
    credit is the share of calls that succeeded (0 when the run itself has errors)."""

    kind = "no_failed_actions"
    needs = "tools"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        run = run_of(subject, self.kind)
        calls = Trajectory.of(run).all_calls
        failed = [call.name for call in calls if call.is_error]
        if run.errors:
            message = f"the run recorded errors: {error_lines(run.errors)}"
            return self.result(0.0, message, failed=failed, run_errors=True)
        if not failed:
            return self.result(True, "", calls=len(calls))
        score = 1.0 - len(failed) / len(calls)
        return self.result(score, f"failed tool calls: {failed!r}", failed=failed)


class ToolOrder(Assertion):
    kind = "tool_order"
    needs = "tools"

    def __init__(self, names: Sequence[str], mode: str = ToolOrderMode.SUBSET) -> None:
        if isinstance(names, str):
            raise TypeError("tool_order takes a list of tool names, not one string")
        if mode not in ToolOrderMode.ALL:
            meanings = "; ".join(f"{m!r}: {ToolOrderMode.MEANING[m]}" for m in ToolOrderMode.ALL)
            raise ValueError(f"unknown tool_order mode {mode!r}. Modes: {meanings}")
        self.names = list(names)
        self.mode = mode

    def describe(self) -> str:
        return f"{self.mode}: {' > '.join(self.names)}"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        actual = Trajectory.of(run_of(subject, self.kind)).call_names
        expected = self.names
        mode = self.mode
        if mode == ToolOrderMode.STRICT:
            ok = actual == expected
            longest = max(len(actual), len(expected))
            score = 1.0 if ok else lcs_length(expected, actual) / longest
        elif mode == ToolOrderMode.UNORDERED:
            longest = max(len(actual), len(expected))
            score = multiset_overlap(expected, actual) / longest if longest else 1.0
        elif mode == ToolOrderMode.SUBSET:
            score = lcs_length(expected, actual) / len(expected) if expected else 1.0
        else:
            allowed = set(expected)
            inside = sum(1 for name in actual if name in allowed)
            score = inside / len(actual) if actual else 1.0
        message = ""
        if score < 1.0:
            meaning = ToolOrderMode.MEANING[mode]
            message = f"mode {mode!r} ({meaning}): expected {expected!r}, actual {actual!r}"
        return self.result(score, message, mode=mode, expected=expected, actual=actual)
