"""Comparing two runs (flips, pass-rate changes, cases slower to first token), and merging
shard results. A passing case the new run lacks is a regression. See ARCHITECTURE.md,
"Comparing and merging runs".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import msgspec

from .._core import ConfigError, Verdict, fisher_exact, mcnemar_exact, rank_sum_greater
from ._summary import CaseSummary, RunSummary, summarize, verdict_rate

TTFT_TOLERANCE = 0.2
"""By default a time to first token (p95) more than 20% above the base's is slower."""

TTFT_FLOOR = 0.05
"""A time to first token (p95) that grew by 50 ms or less is never slower."""


@dataclass(slots=True)
class Change:
    """One case that differs between the base and the new run."""

    case_id: str
    base_verdict: str
    new_verdict: str
    base_passes: int
    base_samples: int
    new_passes: int
    new_samples: int
    p_value: float

    @property
    def base_rate(self) -> float | None:
        return self.base_passes / self.base_samples if self.base_samples else None

    @property
    def new_rate(self) -> float | None:
        return self.new_passes / self.new_samples if self.new_samples else None

    @property
    def kind(self) -> str:
        """``regression``, ``fix``, ``changed`` (verdict) or ``rate`` (same verdict)."""
        if self.base_verdict == Verdict.PASSED and self.new_verdict != Verdict.PASSED:
            return "regression"
        if self.base_verdict != Verdict.PASSED and self.new_verdict == Verdict.PASSED:
            return "fix"
        if self.base_verdict != self.new_verdict:
            return "changed"
        return "rate"


@dataclass(slots=True)
class Slower:
    """One case whose time to first token (p95, in seconds) grew past the tolerance."""

    case_id: str
    base_p95: float
    new_p95: float
    p_value: float = 0.0  # one-sided rank sum, new over base

    @property
    def growth(self) -> float:
        """How much the p95 grew, as a share of the base's (``1.0`` is twice as slow)."""
        return self.new_p95 / self.base_p95 - 1 if self.base_p95 else math.inf


@dataclass(slots=True)
class Comparison:
    """The differences between two runs."""

    changes: list[Change] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    p_value: float = 1.0
    alpha: float = 0.05
    base_rate: float = 0.0
    new_rate: float = 0.0
    slower: list[Slower] = field(default_factory=list)
    ttft_tolerance: float = TTFT_TOLERANCE
    removed_passing: list[str] = field(default_factory=list)
    """The removed cases that passed in the base run: regressions for
    ``--fail-on-regression``."""

    @property
    def regressions(self) -> list[Change]:
        return [change for change in self.changes if change.kind == "regression"]

    @property
    def fixes(self) -> list[Change]:
        return [change for change in self.changes if change.kind == "fix"]

    def significant(self, change: Change) -> bool:
        return change.p_value < self.alpha

    def slower_rule(self) -> str:
        """When a case counts as slower, both thresholds named."""
        return (
            f"p95 up more than {self.ttft_tolerance:.0%} and {TTFT_FLOOR * 1000:g} ms, "
            f"rank-sum p < {self.alpha:g}"
        )

    def lines(self) -> list[str]:
        """A plain-text rendering, one finding per line."""
        out = [
            f"cases passed: {self.base_rate:.1%} -> {self.new_rate:.1%}; "
            f"{len(self.regressions)} regressed, {len(self.fixes)} fixed "
            f"(McNemar p={self.p_value:.3g})"
            + (
                f"; {len(self.slower)} slower to first token ({self.slower_rule()})"
                if self.slower
                else ""
            )
        ]
        for change in self.changes:
            mark = " *" if self.significant(change) else ""
            out.append(
                f"  {change.kind:<10} {change.case_id}: {change.base_verdict} -> "
                f"{change.new_verdict}, {change.base_passes}/{change.base_samples} -> "
                f"{change.new_passes}/{change.new_samples} (p={change.p_value:.3g}){mark}"
            )
        out += [
            f"  {'slower':<10} {slow.case_id}: first token p95 {slow.base_p95:.2f}s -> "
            f"{slow.new_p95:.2f}s (+{slow.growth:.0%}, p={slow.p_value:.3g})"
            for slow in self.slower
        ]
        out += [f"  added      {case_id}" for case_id in self.added]
        out += [
            f"  removed    {case_id}" + (" (it passed)" if case_id in self.removed_passing else "")
            for case_id in self.removed
        ]
        if any(self.significant(change) for change in self.changes):
            out.append(f"  * significant at alpha={self.alpha}")
        return out


def ttft_regression(
    base: CaseSummary, new: CaseSummary, tolerance: float, alpha: float = 0.05
) -> Slower | None:
    """The case as :class:`Slower` when its time to first token regressed (see the
    rules), else ``None``."""
    before, after = base.first_token.p95, new.first_token.p95
    if before is None or after is None:
        return None
    if after <= before * (1 + tolerance) or after - before <= TTFT_FLOOR:
        return None
    p_value = rank_sum_greater(_first_tokens(base), _first_tokens(new))
    if p_value >= alpha:
        return None
    return Slower(case_id=new.case_id, base_p95=before, new_p95=after, p_value=p_value)


def _first_tokens(case: CaseSummary) -> list[float]:
    return [time for trial in case.trial_details for time in trial.first_tokens]


def compare(
    base: RunSummary,
    new: RunSummary,
    *,
    alpha: float = 0.05,
    ttft_tolerance: float = TTFT_TOLERANCE,
) -> Comparison:
    """What changed from ``base`` to ``new``."""
    base_cases = {case.case_id: case for case in base.cases}
    new_cases = {case.case_id: case for case in new.cases}
    shared = [case_id for case_id in new_cases if case_id in base_cases]
    comparison = Comparison(
        added=[case_id for case_id in new_cases if case_id not in base_cases],
        removed=[case_id for case_id in base_cases if case_id not in new_cases],
        removed_passing=[
            case_id
            for case_id, case in base_cases.items()
            if case_id not in new_cases and case.verdict == Verdict.PASSED
        ],
        alpha=alpha,
        ttft_tolerance=ttft_tolerance,
        base_rate=verdict_rate(base_cases[case_id].verdict for case_id in shared) or 0.0,
        new_rate=verdict_rate(new_cases[case_id].verdict for case_id in shared) or 0.0,
    )
    for case_id in shared:
        old, now = base_cases[case_id], new_cases[case_id]
        slowed = ttft_regression(old, now, ttft_tolerance, alpha)
        if slowed is not None:
            comparison.slower.append(slowed)
        same_rate = old.passes * now.samples == now.passes * old.samples
        if old.verdict == now.verdict and same_rate:
            continue
        comparison.changes.append(
            Change(
                case_id=case_id,
                base_verdict=old.verdict,
                new_verdict=now.verdict,
                base_passes=old.passes,
                base_samples=old.samples,
                new_passes=now.passes,
                new_samples=now.samples,
                p_value=fisher_exact(old.passes, old.samples, now.passes, now.samples),
            )
        )
    order = {"regression": 0, "changed": 1, "fix": 2, "rate": 3}
    comparison.changes.sort(key=lambda change: (order[change.kind], change.p_value))
    comparison.slower.sort(key=lambda slow: -slow.growth)
    comparison.p_value = mcnemar_exact(len(comparison.regressions), len(comparison.fixes))
    return comparison


def merge(shards: list[RunSummary]) -> RunSummary:
    """One summary from the summaries of several shards of the same run."""
    if not shards:
        raise ConfigError("merge: give at least one results file")
    seen: set[str] = set()
    cases: list[CaseSummary] = []
    for shard in shards:
        for case in shard.cases:
            if case.case_id in seen:
                raise ConfigError(
                    f"merge: case {case.case_id!r} appears in two shards; "
                    "merge the results of one sharded run (--shard I/N with the same N)"
                )
            seen.add(case.case_id)
            cases.append(case)
    first = shards[0].provenance
    finished = [shard.provenance.finished_at for shard in shards if shard.provenance.finished_at]
    provenance = msgspec.structs.replace(
        first,
        started_at=min(shard.provenance.started_at for shard in shards),
        finished_at=max(finished) if finished else None,
        shard=None,
    )
    load_errors = list(dict.fromkeys(e for shard in shards for e in shard.load_errors))
    duration = max(shard.duration for shard in shards)
    return summarize(cases, provenance, duration=duration, load_errors=load_errors)
