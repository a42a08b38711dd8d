"""Outcome assertions: how the run ended (status, stop reason). See ARCHITECTURE.md,
"The assertion families".
"""

from __future__ import annotations

from typing import Any

import msgspec
from evalport.protocol import RunStatus

from .._core import AssertionResult, describe_error, run_errors
from ._base import Assertion, run_of


class _Status(Assertion):
    expected: str = RunStatus.COMPLETED

    def evaluate(self, subject: Any) -> AssertionResult:
        run = run_of(subject, self.kind)
        ok = run.status == self.expected
        message = "" if ok else f"status is {run.status!r}, expected {self.expected!r}"
        if not ok:
            data = {
                "errorDetails": msgspec.to_builtins(run.error_details),
                "steps": [{"errors": msgspec.to_builtins(step.errors)} for step in run.steps],
                "errors": run.errors,
            }
            message += "".join(f"; {describe_error(info)}" for info in run_errors(data)[:3])
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
