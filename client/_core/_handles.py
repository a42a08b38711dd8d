"""Handles: how an assertion made inside a case is tuned and later collected. Rules: see
ARCHITECTURE.md, "Verdicts".
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, runtime_checkable

from ._results import AssertionResult, Severity


@runtime_checkable
class Expectation(Protocol):
    """Anything the context collects at the end of a case."""

    async def resolve(self) -> AssertionResult: ...


class Deferrable(Protocol):
    """An assertion that evaluates later (it needs I/O): what a DeferredHandle holds."""

    async def aevaluate(self, subject: Any) -> AssertionResult: ...


class AssertionHandle:
    """The handle of an assertion that was evaluated when it was made."""

    __slots__ = ("_result",)

    def __init__(self, result: AssertionResult) -> None:
        self._result = result

    @property
    def result(self) -> AssertionResult:
        return self._result

    @property
    def passed(self) -> bool:
        return self._result.passed

    def soft(self) -> AssertionHandle:
        """A failure lowers the trial's score instead of failing it."""
        self._result.severity = "soft"
        return self

    def gate(self) -> AssertionHandle:
        """A failure fails the trial (the default)."""
        self._result.severity = "gate"
        return self

    def at_least(self, threshold: float) -> AssertionHandle:
        """Pass when the score reaches ``threshold`` (in [0, 1])."""
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        result = self._result
        result.threshold = threshold
        result.passed = result.evaluated and result.score >= threshold
        return self

    def label(self, text: str) -> AssertionHandle:
        """A name for the assertion in reports."""
        self._result.label = text
        return self

    async def resolve(self) -> AssertionResult:
        return self._result

    def __await__(self) -> Generator[Any, None, Any]:
        raise TypeError(
            f"{self._result.name} is checked when it is made and returns no awaitable: "
            "drop the 'await'"
        )


class DeferredHandle:
    """The handle of an assertion evaluated later, once (same tuning as AssertionHandle)."""

    __slots__ = ("_assertion", "_label", "_result", "_severity", "_subject", "_threshold")

    def __init__(self, assertion: Deferrable, subject: Any) -> None:
        self._assertion = assertion
        self._subject = subject
        self._severity: Severity = "gate"
        self._threshold: float | None = None
        self._label: str | None = None
        self._result: AssertionResult | None = None

    def soft(self) -> DeferredHandle:
        self._severity = "soft"
        return self

    def gate(self) -> DeferredHandle:
        self._severity = "gate"
        return self

    def at_least(self, threshold: float) -> DeferredHandle:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        self._threshold = threshold
        return self

    def label(self, text: str) -> DeferredHandle:
        self._label = text
        return self

    async def resolve(self) -> AssertionResult:
        if self._result is None:
            self._result = await self._assertion.aevaluate(self._subject)
        result = self._result
        result.severity = self._severity
        if self._threshold is not None:
            result.threshold = self._threshold
        result.passed = result.evaluated and result.score >= result.threshold
        if self._label is not None:
            result.label = self._label
        return result
