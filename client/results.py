"""Results: of one assertion, of one trial of a case, of a case over its trials.

Rules (the verdicts follow Instructor's, so reports mean the same thing in both):

- An assertion yields a score in [0, 1]; it passes when ``score >= threshold`` (default
  1.0). An assertion that could not be evaluated (``evaluated=False``) never passes.
- Severity is ``gate`` (a failure fails the trial; the default for deterministic
  assertions) or ``soft`` (a failure only lowers the score; the default for judges).
- A trial's verdict, first match wins: an error -> ``error``; a failed gate -> ``failed``;
  skipped -> ``skipped``; a failed soft assertion -> ``scored``; else ``passed``.
  ``error`` counts as a failure for exit codes but stays distinct in every report.
- A case repeated N times with pass rate r needs ``clamp(ceil(r*N - 1e-9), 1, N)`` passed
  trials; only ``passed`` trials count; all trials skipped -> the case is skipped.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

__all__ = [
    "AssertionResult",
    "CaseResult",
    "JudgeRecord",
    "Severity",
    "TrialResult",
    "Verdict",
    "case_verdict",
    "required_passes",
    "trial_verdict",
]

Severity = Literal["gate", "soft"]


class Verdict:
    """The five outcomes, kept distinct everywhere."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    SCORED = "scored"
    ALL = (PASSED, FAILED, ERROR, SKIPPED, SCORED)


class AssertionResult(msgspec.Struct, kw_only=True):
    """The outcome of evaluating one assertion."""

    name: str
    score: float
    passed: bool
    message: str = ""
    severity: Severity = "gate"
    threshold: float = 1.0
    label: str | None = None
    evaluated: bool = True
    context: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def failed_gate(self) -> bool:
        return self.severity == "gate" and not self.passed

    @property
    def failed_soft(self) -> bool:
        return self.severity == "soft" and not self.passed


class JudgeRecord(msgspec.Struct, kw_only=True):
    """What one judge call saw and said (kept for reports, redacted like the run)."""

    criterion: str
    score: float | None
    reason: str = ""
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached: bool = False
    error: str | None = None


class TrialResult(msgspec.Struct, kw_only=True):
    """One execution of a case."""

    case_id: str
    trial: int = 0
    verdict: str = Verdict.PASSED
    assertions: list[AssertionResult] = msgspec.field(default_factory=list)
    error: str | None = None
    error_type: str | None = None
    skip_reason: str | None = None
    duration: float = 0.0
    session_id: str | None = None
    cached: bool = False
    judges: list[JudgeRecord] = msgspec.field(default_factory=list)
    logs: list[str] = msgspec.field(default_factory=list)
    run: Any = None  # the redacted AgentRun as plain JSON data, for reports


class CaseResult(msgspec.Struct, kw_only=True):
    """A case over all its trials."""

    case_id: str
    description: str = ""
    tags: list[str] = msgspec.field(default_factory=list)
    verdict: str = Verdict.PASSED
    trials: list[TrialResult] = msgspec.field(default_factory=list)
    pass_rate: float = 1.0
    required: int = 1
    passes: int = 0


def trial_verdict(
    assertions: list[AssertionResult], *, error: bool = False, skipped: bool = False
) -> str:
    """A trial's verdict from its assertions (see the module rules)."""
    if error:
        return Verdict.ERROR
    if any(result.failed_gate for result in assertions):
        return Verdict.FAILED
    if skipped:
        return Verdict.SKIPPED
    if any(result.failed_soft for result in assertions):
        return Verdict.SCORED
    return Verdict.PASSED


def required_passes(trials: int, pass_rate: float) -> int:
    """How many passed trials a case of ``trials`` repetitions needs."""
    if trials <= 0:
        return 0
    return min(max(math.ceil(pass_rate * trials - 1e-9), 1), trials)


def case_verdict(verdicts: list[str], pass_rate: float = 1.0) -> str:
    """A case's verdict over its trials' verdicts.

    With one trial the trial's verdict stands. With several, the case passes when enough
    trials passed; otherwise it is ``error`` when every trial that missed was an error
    (the agent was never really judged), else ``failed``.
    """
    if not verdicts:
        return Verdict.SKIPPED
    if all(verdict == Verdict.SKIPPED for verdict in verdicts):
        return Verdict.SKIPPED
    if len(verdicts) == 1:
        return verdicts[0]
    passes = sum(verdict == Verdict.PASSED for verdict in verdicts)
    if passes >= required_passes(len(verdicts), pass_rate):
        return Verdict.PASSED
    misses = [v for v in verdicts if v not in (Verdict.PASSED, Verdict.SKIPPED)]
    if misses and all(verdict == Verdict.ERROR for verdict in misses):
        return Verdict.ERROR
    return Verdict.FAILED
