"""Result analytics: pass rates, durations and assertion totals of a run.

Rules:

- The run's ``pass_rate`` is passed cases over cases that were not skipped;
  ``trial_pass_rate`` the same over trials. ``None`` when nothing was judged. Each tag's
  pass rate is in ``RunSummary.tags``.
- Durations are in seconds: ``case_durations`` over the cases (a case's duration is the
  sum of its trials'), ``trial_durations`` over every trial; each gives the count, the
  mean and the p50/p95 of :func:`~evalport.client._stats.percentile`. A case's own
  ``trial_durations`` are over its trials.
- An assertion's kind is its name up to the first ``(``: ``contains('A1050')`` is of kind
  ``contains``. Its outcome is one of :data:`OUTCOMES`: ``passed``; ``failed`` (a gate
  below its threshold); ``soft_failed`` (a soft assertion below its threshold, the trial
  is only scored); ``not_evaluated`` (it could not be evaluated, e.g. the judge was down).
  Every outcome key is present in the totals.
- Each trial keeps its verdict, duration, whether it was replayed, and the agent's final
  reply: the run's ``reply``, which every trace policy leaves in clear. The dataset row a
  case was expanded from is the case's ``row`` (every trial of a case runs the same row);
  rows are the suite's own inputs and are kept in clear like the user's messages.
- Everything is computed from the case summaries, so a merged run (``evalport merge``)
  gets the same figures as one run of all its cases.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from .._core import AssertionResult, RunData, TrialResult, percentile

OUTCOMES = ("passed", "failed", "soft_failed", "not_evaluated")


class Durations(msgspec.Struct, kw_only=True, gc=False):
    """Count, mean and percentiles of some durations, in seconds."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None


class TrialSummary(msgspec.Struct, kw_only=True, gc=False):
    """One trial of a case, for the reports."""

    trial: int
    verdict: str
    duration: float = 0.0
    cached: bool = False
    reply: str | None = None  # the agent's final reply (in clear under every trace policy)


class Analytics(msgspec.Struct, kw_only=True, gc=False):
    """Figures of a whole run (see the module rules)."""

    pass_rate: float | None = None
    trial_pass_rate: float | None = None
    case_durations: Durations = msgspec.field(default_factory=Durations)
    trial_durations: Durations = msgspec.field(default_factory=Durations)
    assertions: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    assertion_outcomes: dict[str, int] = msgspec.field(default_factory=dict)


def durations(values: Iterable[float]) -> Durations:
    data = list(values)
    if not data:
        return Durations()
    return Durations(
        count=len(data),
        mean=sum(data) / len(data),
        p50=percentile(data, 50),
        p95=percentile(data, 95),
    )


def assertion_kind(result: AssertionResult) -> str:
    return result.name.split("(", 1)[0].strip() or result.name


def assertion_outcome(result: AssertionResult) -> str:
    if result.passed:
        return "passed"
    if not result.evaluated:
        return "not_evaluated"
    return "soft_failed" if result.severity == "soft" else "failed"


def failed_at(result: AssertionResult) -> str:
    """`` (at file:line)`` of the eval code that made a failed assertion, else empty."""
    return f" (at {result.location})" if result.location and not result.passed else ""


def count_assertions(trials: Iterable[TrialResult]) -> dict[str, dict[str, int]]:
    """Assertion counts by kind, then by outcome (every outcome key present)."""
    kinds: dict[str, dict[str, int]] = {}
    for trial in trials:
        for result in trial.assertions:
            entry = kinds.setdefault(assertion_kind(result), dict.fromkeys(OUTCOMES, 0))
            entry[assertion_outcome(result)] += 1
    return dict(sorted(kinds.items()))


def trial_summary(trial: TrialResult) -> TrialSummary:
    run = trial.run
    value = None
    if isinstance(run, RunData):
        value = run.reply()
    elif isinstance(run, dict):
        value = run.get("reply")
    reply = value if isinstance(value, str) else None
    return TrialSummary(
        trial=trial.trial,
        verdict=trial.verdict,
        duration=trial.duration,
        cached=trial.cached,
        reply=reply,
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def analytics_lines(figures: Analytics, tags: dict[str, tuple[int, int]]) -> list[str]:
    """The compact analytics section of the console and Markdown summaries; ``tags`` maps
    each tag to (passed, cases)."""
    trials = figures.trial_durations
    lines = [
        f"pass rate {_percent(figures.pass_rate)} of cases, "
        f"{_percent(figures.trial_pass_rate)} of trials; trial time mean "
        f"{_seconds(trials.mean)}, p50 {_seconds(trials.p50)}, p95 {_seconds(trials.p95)}"
    ]
    if tags:
        lines.append(
            "by tag: "
            + ", ".join(
                f"{tag} {passed}/{total} ({passed / total:.0%})" if total else f"{tag} 0/0"
                for tag, (passed, total) in tags.items()
            )
        )
    outcomes = figures.assertion_outcomes
    if any(outcomes.values()):
        missed = [
            f"{kind} {sum(counts.values()) - counts.get('passed', 0)}/{sum(counts.values())}"
            for kind, counts in figures.assertions.items()
            if sum(counts.values()) > counts.get("passed", 0)
        ]
        lines.append(
            "assertions: "
            + ", ".join(f"{outcomes.get(outcome, 0)} {outcome}" for outcome in OUTCOMES)
            + (f" (not passed by kind: {', '.join(missed)})" if missed else "")
        )
    return lines
