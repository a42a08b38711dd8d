"""Result analytics of a run: pass rates, durations, time to first token, assertion totals.
Everything is computed from the case summaries, so a merged run gets the figures of one
run of all its cases. See ARCHITECTURE.md, "The run summary".
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
    first_tokens: list[float] = msgspec.field(default_factory=list)  # of its streamed turns


class Analytics(msgspec.Struct, kw_only=True, gc=False):
    """Figures of a whole run (see ARCHITECTURE.md, "The run summary")."""

    pass_rate: float | None = None
    trial_pass_rate: float | None = None
    case_durations: Durations = msgspec.field(default_factory=Durations)
    trial_durations: Durations = msgspec.field(default_factory=Durations)
    first_token: Durations = msgspec.field(default_factory=Durations)  # over streamed turns
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


def first_tokens(trial: TrialResult) -> list[float]:
    """Each turn's time to first token, in order, of the turns of ``trial`` that streamed."""
    return [timing.first_token for timing in trial.timings if timing.first_token is not None]


def first_token_text(times: Durations) -> str:
    """``p50 0.12s, p95 0.30s`` of a time to first token; empty when nothing streamed."""
    if not times.count:
        return ""
    return f"p50 {_seconds(times.p50)}, p95 {_seconds(times.p95)}"


def first_token_cell(times: Durations) -> str:
    """``0.12s / 0.30s`` (p50 / p95) of a time to first token in a table; ``-`` when
    nothing streamed."""
    return f"{_seconds(times.p50)} / {_seconds(times.p95)}" if times.count else "-"


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
        first_tokens=first_tokens(trial),
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def analytics_lines(figures: Analytics, tags: dict[str, tuple[int, int]]) -> list[str]:
    """The compact analytics section of the console and Markdown summaries; ``tags`` maps
    each tag to (passed, cases)."""
    trials = figures.trial_durations
    first_token = first_token_text(figures.first_token)
    lines = [
        f"pass rate {_percent(figures.pass_rate)} of cases, "
        f"{_percent(figures.trial_pass_rate)} of trials; trial time mean "
        f"{_seconds(trials.mean)}, p50 {_seconds(trials.p50)}, p95 {_seconds(trials.p95)}"
        + (f"; first token {first_token}" if first_token else "")
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
