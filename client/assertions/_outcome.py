"""Outcome assertions: how the run ended.

Rules:

- ``Succeeded`` passes on status ``completed``; ``Stopped`` on ``stopped``; ``Failed``
  on ``failed`` (for cases that expect the agent to give up, e.g. on forbidden input).
- ``StopReasonIs`` reads the last turn's ``stopSignal.reason``; a run without a stop
  signal has no reason and fails it. Several accepted reasons may be given.
"""

from __future__ import annotations

from typing import Any

from evalport.protocol import RunStatus

from .._results import AssertionResult
from ._base import Assertion, run_of
from ._matchers import error_lines


class _Status(Assertion):
    expected: str = RunStatus.COMPLETED

    def evaluate(self, subject: Any) -> AssertionResult:
        run = run_of(subject, self.kind)
        ok = run.status == self.expected
        message = "" if ok else f"status is {run.status!r}, expected {self.expected!r}"
        if not ok and run.errors:
            message += f" (errors: {error_lines(run.errors)})"
        return self.result(ok, message, status=run.status)


class Succeeded(_Status):
    kind = "succeeded"
    expected = RunStatus.COMPLETED


class Stopped(_Status):
    kind = "stopped"
    expected = RunStatus.STOPPED


class Failed(_Status):
    kind = "failed"
    expected = RunStatus.FAILED


class StopReasonIs(Assertion):
    kind = "stop_reason"

    def __init__(self, *reasons: str) -> None:
        if not reasons:
            raise ValueError("stop_reason needs at least one reason")
        self.reasons = reasons

    def describe(self) -> str:
        return ", ".join(self.reasons)

    def evaluate(self, subject: Any) -> AssertionResult:
        run = run_of(subject, self.kind)
        reason = run.stop_signal.reason if run.stop_signal else None
        ok = reason in self.reasons
        wanted = " or ".join(repr(r) for r in self.reasons)
        message = "" if ok else f"stop reason is {reason!r}, expected {wanted}"
        return self.result(ok, message, reason=reason)
