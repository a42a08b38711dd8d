"""The run summary: what every report shows, computed once from the case results. It shows
the core's verdict and never changes it; a field added to a saved summary has a default.
See ARCHITECTURE.md, "The run summary".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from .._core import (
    CaseResult,
    JudgeToolCall,
    RunData,
    TrialResult,
    Verdict,
    describe_error,
    enc_hook,
    flaky,
    k_values,
    lower_bound_miss,
    mean_std,
    pass_at_k,
    pass_hat_k,
    run_errors,
    wilson,
)
from ._analytics import (
    OUTCOMES,
    Analytics,
    Durations,
    TrialSummary,
    count_assertions,
    durations,
    failed_at,
    trial_summary,
)

SCHEMA = "evalport.run/1"


class Provenance(msgspec.Struct, kw_only=True, gc=False):
    """Where a run's results come from."""

    evalport_version: str
    started_at: str
    finished_at: str | None = None
    git_sha: str | None = None
    target: dict[str, str] = msgspec.field(default_factory=dict)
    trace_policy: str | None = None  # TracePolicy.describe() of the target: "safe()", "verbatim"
    judge_model: str | None = None
    repeat: int = 1
    pass_rate: float = 1.0
    min_lower_bound: float | None = None
    concurrency: int = 1
    strict: bool = False
    shard: str | None = None
    python: str | None = None
    command: list[str] = msgspec.field(default_factory=list)


def required_rate_note(provenance: Provenance) -> str:
    """The ``--pass-rate`` setting as every report's header states it: the share of each
    case's trials that must pass, named so that nobody takes it for the measured rate."""
    return f"required pass rate {provenance.pass_rate * 100:g}% per case"


def trace_policy_note(provenance: Provenance) -> str:
    """The trace policy as every report's header states it."""
    policy = provenance.trace_policy
    if policy is None:
        return "trace policy not recorded"
    if policy == "verbatim":
        return "trace policy verbatim (payloads as the agent sent them)"
    return (
        f"trace policy {policy.removesuffix('()')} (payloads shown as digests; "
        "--trace-policy verbatim shows them)"
    )


class CaseSummary(msgspec.Struct, kw_only=True, gc=False):
    """One case, over its trials."""

    case_id: str
    verdict: str
    description: str = ""
    tags: list[str] = msgspec.field(default_factory=list)
    trials: int = 0
    samples: int = 0
    passes: int = 0
    required: int = 1
    pass_rate: float = 1.0
    trial_verdicts: list[str] = msgspec.field(default_factory=list)
    wilson_low: float = 0.0
    wilson_high: float = 1.0
    pass_at_k: dict[str, float] = msgspec.field(default_factory=dict)
    pass_hat_k: dict[str, float] = msgspec.field(default_factory=dict)
    flaky: bool = False
    judge_mean: float | None = None
    judge_std: float | None = None
    cached_trials: int = 0
    duration: float = 0.0
    target_tokens: int = 0
    judge_tokens: int = 0
    error: str | None = None
    failures: list[str] = msgspec.field(default_factory=list)
    row: dict[str, Any] | None = None  # the dataset row of the case (see _analytics)
    trial_durations: Durations = msgspec.field(default_factory=Durations)
    first_token: Durations = msgspec.field(default_factory=Durations)  # over streamed turns
    trial_details: list[TrialSummary] = msgspec.field(default_factory=list)
    assertions: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)


class TagSummary(msgspec.Struct, kw_only=True, gc=False):
    """Pass figures of the cases that carry one tag."""

    cases: int = 0
    passed: int = 0
    pass_rate: float = 0.0


class RunSummary(msgspec.Struct, kw_only=True, gc=False):
    """``summary.json``: provenance, counts, and one :class:`CaseSummary` per case."""

    schema: str = SCHEMA
    provenance: Provenance
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    total: int = 0
    trials: int = 0
    cached_trials: int = 0
    duration: float = 0.0
    target_tokens: int = 0
    judge_tokens: int = 0
    tags: dict[str, TagSummary] = msgspec.field(default_factory=dict)
    cases: list[CaseSummary] = msgspec.field(default_factory=list)
    load_errors: list[str] = msgspec.field(default_factory=list)
    analytics: Analytics = msgspec.field(default_factory=Analytics)

    @property
    def ok(self) -> bool:
        """No case failed or errored (``scored`` counts as a failure under ``strict``)."""
        bad = self.counts.get(Verdict.FAILED, 0) + self.counts.get(Verdict.ERROR, 0)
        if self.provenance.strict:
            bad += self.counts.get(Verdict.SCORED, 0)
        return bad == 0 and not self.load_errors


def trial_tokens(trial: TrialResult) -> int:
    """Tokens the target spent in one trial (from its redacted run's usage)."""
    run = trial.run
    if isinstance(run, RunData | dict):
        usage = run.usage() if isinstance(run, RunData) else run.get("usage")
        if isinstance(usage, dict):
            return sum(
                value
                for value in usage.values()
                if isinstance(value, int) and not isinstance(value, bool)
            )
    return 0


def _failures(trial: TrialResult, seen: dict[str, list[str]]) -> None:
    """Collect the reasons ``trial`` did not pass: its error, the agent's errors (unless a
    failed assertion names them already) and its failed assertions. A reason is kept
    without the agent's error ids, so that trials failing alike count as one reason; the
    ids are collected beside it."""
    texts = [f"{trial.error_type or 'Error'}: {trial.error}"] if trial.error else []
    failed = [
        f"{result.label or result.name}: {result.message}".rstrip(": ") + failed_at(result)
        for result in trial.assertions
        if not result.passed
    ]
    ids: list[str] = []
    if isinstance(trial.run, RunData | dict) and trial.run.get("status") == "failed":
        errors = run_errors(trial.run)
        texts += [
            line for line in map(describe_error, errors) if not any(line in text for text in failed)
        ]
        ids = [str(info["errorId"]) for info in errors if info.get("errorId")]
    for text in texts + failed:
        found = ""
        for error_id in ids:
            if f" (error id {error_id})" in text:
                text = text.replace(f" (error id {error_id})", "")
                found = found or error_id
        seen.setdefault(text, []).append(found)


def _reasons(seen: dict[str, list[str]]) -> list[str]:
    """Each reason once, with how many trials gave it and the agent's first error id."""
    reasons = []
    for text, found in seen.items():
        ids = [error_id for error_id in found if error_id]
        notes = [f"×{len(found)}"] if len(found) > 1 else []
        if ids:
            more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
            notes.append(f"error id {ids[0]}{more}")
        reasons.append(f"{text} ({'; '.join(notes)})" if notes else text)
    return reasons


def summarize_case(result: CaseResult, *, min_lower_bound: float | None = None) -> CaseSummary:
    """Statistics of one case, with the verdict the core gave it (``case_verdict``);
    ``min_lower_bound``, the run's, names the reason a case that met its pass rate failed."""
    verdicts: list[str] = []
    seen: dict[str, list[str]] = {}
    scores: list[float] = []
    n = c = cached = target_tokens = judge_tokens = 0
    duration = 0.0
    error: str | None = None
    for trial in result.trials:
        verdict = trial.verdict
        verdicts.append(verdict)
        if verdict != Verdict.SKIPPED:
            n += 1
            if verdict == Verdict.PASSED:
                c += 1
            elif len(seen) < 20:
                _failures(trial, seen)
        cached += trial.cached
        duration += trial.duration
        if trial.run is not None:
            target_tokens += trial_tokens(trial)
        for judge in trial.judges:
            judge_tokens += judge.input_tokens + judge.output_tokens
            if judge.score is not None:
                scores.append(judge.score)
        if error is None and trial.error:
            error = trial.error
    failures = _reasons(seen)
    details = [trial_summary(trial) for trial in result.trials]
    low, high = wilson(c, n)
    judge_mean, judge_std = mean_std(scores) if scores else (None, None)
    verdict = result.verdict
    miss = lower_bound_miss(verdicts, min_lower_bound)
    if miss and verdict == Verdict.FAILED and result.passes >= result.required:
        failures.insert(0, miss)
    return CaseSummary(
        case_id=result.case_id,
        verdict=verdict,
        description=result.description,
        tags=list(result.tags),
        trials=len(verdicts),
        samples=n,
        passes=c,
        required=result.required,
        pass_rate=result.pass_rate,
        trial_verdicts=verdicts,
        wilson_low=low,
        wilson_high=high,
        pass_at_k={str(k): pass_at_k(n, c, k) for k in k_values(n)},
        pass_hat_k={str(k): pass_hat_k(n, c, k) for k in k_values(n)},
        flaky=flaky(c, n),
        judge_mean=judge_mean,
        judge_std=judge_std,
        cached_trials=cached,
        duration=duration,
        target_tokens=target_tokens,
        judge_tokens=judge_tokens,
        error=error,
        failures=failures,
        row=result.row,
        trial_durations=durations(trial.duration for trial in result.trials),
        first_token=durations(time for trial in details for time in trial.first_tokens),
        trial_details=details,
        assertions=count_assertions(result.trials),
    )


class Judgement(msgspec.Struct, frozen=True, gc=False):
    """One distinct thing the judges said about a case, and how many trials got it."""

    criterion: str
    score: float | None
    reason: str
    evidence: tuple[str, ...] = ()
    trials: int = 1
    reads: tuple[str, ...] = ()  # an agent-loop judge's own tool calls, not the agent's


def judge_read(call: JudgeToolCall) -> str:
    """One read of an agent-loop judge as text: ``read_step(index=2)``."""
    arguments = ", ".join(f"{key}={value!r}" for key, value in call.arguments.items())
    return f"{call.tool}({arguments})" + (f" failed: {call.error}" if call.error else "")


def judgements(result: CaseResult) -> list[Judgement]:
    """What the judges said about a case over its trials, each distinct judgement once."""
    said: dict[Judgement, int] = {}
    for trial in result.trials:
        for judge in trial.judges:
            key = Judgement(
                criterion=judge.criterion,
                score=judge.score,
                reason=judge.reason or judge.error or "",
                evidence=tuple(judge.evidence),
                reads=tuple(judge_read(call) for call in judge.tool_calls),
            )
            said[key] = said.get(key, 0) + 1
    return [msgspec.structs.replace(key, trials=count) for key, count in said.items()]


def count_verdicts(verdicts: list[str]) -> dict[str, int]:
    """How many of each of the five outcomes (every key present)."""
    return dict.fromkeys(Verdict.ALL, 0) | Counter(verdicts)


def _tags(cases: list[CaseSummary]) -> dict[str, TagSummary]:
    tags: dict[str, TagSummary] = {}
    for case in cases:
        for tag in case.tags:
            entry = tags.setdefault(tag, TagSummary())
            entry.cases += 1
            entry.passed += case.verdict == Verdict.PASSED
    for entry in tags.values():
        entry.pass_rate = entry.passed / entry.cases if entry.cases else 0.0
    return dict(sorted(tags.items()))


def summarize(
    cases: list[CaseSummary],
    provenance: Provenance,
    *,
    duration: float = 0.0,
    load_errors: list[str] | None = None,
) -> RunSummary:
    """The run summary over already summarized cases (also used to merge shards)."""
    return RunSummary(
        provenance=provenance,
        counts=count_verdicts([case.verdict for case in cases]),
        total=len(cases),
        trials=sum(case.trials for case in cases),
        cached_trials=sum(case.cached_trials for case in cases),
        duration=duration,
        target_tokens=sum(case.target_tokens for case in cases),
        judge_tokens=sum(case.judge_tokens for case in cases),
        tags=_tags(cases),
        cases=cases,
        load_errors=list(load_errors or []),
        analytics=analytics(cases),
    )


def to_builtins(value: Any) -> Any:
    """Plain JSON data of a Struct (for templates and custom reporters)."""
    return msgspec.to_builtins(value, enc_hook=enc_hook)


def verdict_rate(verdicts: Iterable[str]) -> float | None:
    """Passed over the verdicts that are not ``skipped``; ``None`` when all were skipped."""
    judged = [verdict for verdict in verdicts if verdict != Verdict.SKIPPED]
    if not judged:
        return None
    return sum(verdict == Verdict.PASSED for verdict in judged) / len(judged)


def analytics(cases: Sequence[CaseSummary]) -> Analytics:
    """The run's figures over its case summaries."""
    kinds: dict[str, Counter[str]] = {}
    totals = Counter(dict.fromkeys(OUTCOMES, 0))
    for case in cases:
        for kind, outcomes in case.assertions.items():
            kinds.setdefault(kind, Counter(dict.fromkeys(OUTCOMES, 0))).update(outcomes)
            totals.update(outcomes)
    return Analytics(
        pass_rate=verdict_rate(case.verdict for case in cases),
        trial_pass_rate=verdict_rate(v for case in cases for v in case.trial_verdicts),
        case_durations=durations(case.duration for case in cases),
        trial_durations=durations(trial.duration for case in cases for trial in case.trial_details),
        first_token=durations(
            time for case in cases for trial in case.trial_details for time in trial.first_tokens
        ),
        assertions={kind: dict(kinds[kind]) for kind in sorted(kinds)},
        assertion_outcomes=dict(totals),
    )
