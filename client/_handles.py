"""Handles: how an assertion made inside a case is tuned and later collected.

Rules:

- Every assertion made through the eval context returns a handle and registers it with
  the context. The runner collects them when the case ends with ``await handle.resolve()``.
- Deterministic assertions evaluate **at once**, on the run accumulated so far, so an
  assertion written after the first ``send`` reads the first turn only. Their handle only
  re-grades the stored score when ``at_least`` changes the threshold.
- Judge expectations evaluate **lazily**: the judge runs at most once, the first time the
  result is read. They implement the same :class:`Expectation` protocol.
- ``soft()``/``gate()``/``at_least(t)``/``label(s)`` return the handle, for chaining.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ._results import AssertionResult


@runtime_checkable
class Expectation(Protocol):
    """Anything the context collects at the end of a case."""

    async def resolve(self) -> AssertionResult: ...


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
