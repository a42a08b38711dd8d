"""Step and token budgets. See ARCHITECTURE.md, "The assertion families"."""

from __future__ import annotations

from typing import Any, Final

from .._core import AssertionResult, Trajectory
from ._base import Assertion, run_of
from ._matchers import Count, as_count

TOKEN_KINDS: Final = ("input", "output", "cache_write", "cache_read", "reasoning")


class BudgetAssertion(Assertion):
    """An upper ``limit`` with partial credit above it: ``limit / actual``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def describe(self) -> str:
        return str(self.limit)

    def graded(self, used: int, what: str, cap: str = "budget", **context: Any) -> AssertionResult:
        """``used`` against the limit; over it, "<used> <what> exceed the <cap> of <limit>"."""
        if used <= self.limit:
            return self.result(1.0, "", **context)
        message = f"{used} {what} exceed the {cap} of {self.limit}"
        return self.result(self.limit / used if used else 0.0, message, **context)


class StepCount(Assertion):
    kind = "step_count"
    needs = "steps"

    def __init__(self, count: int | Count) -> None:
        self.count = as_count(count)

    def describe(self) -> str:
        return self.count.describe()

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        steps = len(run_of(subject, self.kind).steps)
        ok = self.count.check(steps)
        message = "" if ok else f"{steps} steps, expected {self.count.describe()}"
        return self.result(ok, message, steps=steps)


class MaxSteps(BudgetAssertion):
    kind = "max_steps"
    needs = "steps"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        steps = len(run_of(subject, self.kind).steps)
        return self.graded(steps, "steps", "limit", steps=steps)


class TotalTokensAtMost(BudgetAssertion):
    kind = "total_tokens_at_most"
    needs = "usage"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        total = Trajectory.of(run_of(subject, self.kind)).usage.total
        return self.graded(total, "tokens", tokens=total)


class TokensAtMost(BudgetAssertion):
    """A budget for one kind of token: input, output, cache_write, cache_read, reasoning."""

    kind = "tokens_at_most"
    needs = "usage"

    def __init__(self, kind: str, limit: int) -> None:
        if kind not in TOKEN_KINDS:
            raise ValueError(f"unknown token kind {kind!r}; use one of {', '.join(TOKEN_KINDS)}")
        super().__init__(limit)
        self.token_kind = kind

    def describe(self) -> str:
        return f"{self.token_kind}, {self.limit}"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        usage = Trajectory.of(run_of(subject, self.kind)).usage
        used = int(getattr(usage, self.token_kind))
        return self.graded(used, f"{self.token_kind} tokens", tokens=used)
