"""Live console progress and the closing summary.

Rules: on a terminal one status line is redrawn as trials finish (done/total and the
counts of trial outcomes so far); elsewhere (CI logs) one line per finished case is
printed instead, so logs stay readable. The closing summary lists every case that did
not pass with its first reasons, then the five case counts, the cached trials and the
wall time. Nothing here decides an exit code.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .._results import CaseResult, TrialResult, Verdict
from ._base import Reporter, RunPlan, RunReport
from ._summary import CaseSummary, RunSummary, trace_policy_note

MARKS = {
    Verdict.PASSED: "PASS",
    Verdict.FAILED: "FAIL",
    Verdict.ERROR: "ERROR",
    Verdict.SKIPPED: "SKIP",
    Verdict.SCORED: "SCORED",
}


def summary_lines(summary: RunSummary) -> list[str]:
    """The closing summary as lines of text."""
    lines: list[str] = []
    for error in summary.load_errors:
        lines.append(f"LOAD ERROR {error}")
    for case in summary.cases:
        if case.verdict == Verdict.PASSED:
            continue
        lines.append(
            f"{MARKS.get(case.verdict, case.verdict.upper()):<7}{case.case_id} "
            f"({case.passes}/{case.samples} passed, needed {case.required})"
        )
        lines += [f"         {reason}" for reason in (case.failures or [])[:3]]
    counts = summary.counts
    cached = f", {summary.cached_trials} cached" if summary.cached_trials else ""
    lines.append(
        ", ".join(f"{counts.get(verdict, 0)} {verdict}" for verdict in Verdict.ALL)
        + f" — {summary.total} cases, {summary.trials} trials{cached} in {summary.duration:.2f}s"
    )
    return lines


class ConsoleReporter(Reporter):
    """Progress while running, a summary at the end."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.total = 0
        self.done = 0
        self.cached = 0
        self.counts = dict.fromkeys(Verdict.ALL, 0)
        self._last_draw = 0.0

    def start(self, plan: RunPlan) -> None:
        self.total = plan.trials
        target = plan.provenance.target
        self.stream.write(
            f"evalport: {plan.cases} cases, {plan.trials} trials against "
            f"{target.get('location', '?')} ({target.get('agent_name', '?')} "
            f"{target.get('agent_version', '?')}), {trace_policy_note(plan.provenance)}\n"
        )
        self.stream.flush()

    def trial_done(self, trial: TrialResult) -> None:
        self.done += 1
        self.cached += trial.cached
        self.counts[trial.verdict] = self.counts.get(trial.verdict, 0) + 1
        now = time.monotonic()
        if self.live and (now - self._last_draw > 0.1 or self.done == self.total):
            self._last_draw = now
            parts = " ".join(f"{self.counts[v]} {v}" for v in Verdict.ALL)
            cached = f" ({self.cached} cached)" if self.cached else ""
            self.stream.write(f"\r[{self.done}/{self.total}] {parts}{cached}\x1b[K")
            self.stream.flush()

    def case_done(self, result: CaseResult, summary: CaseSummary) -> None:
        if self.live:
            return
        cached = f", {summary.cached_trials} cached" if summary.cached_trials else ""
        self.stream.write(
            f"{MARKS.get(summary.verdict, summary.verdict):<7}{summary.case_id} "
            f"({summary.passes}/{summary.samples}{cached})\n"
        )

    def finish(self, report: RunReport) -> None:
        if self.live:
            self.stream.write("\n")
        self.stream.write("\n".join(summary_lines(report.summary)) + "\n")
        self.stream.flush()
