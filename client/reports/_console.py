"""Live console progress and the closing summary.

Rule: case lines come in discovery order whatever order cases finish in; every text of
the run is printed ``printable``. See ARCHITECTURE.md, "The console reporter".
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .._core import CaseResult, TrialResult, Verdict, printable
from ._analytics import (
    analytics_lines,
    assertion_outcome,
    durations,
    failed_at,
    first_token_text,
    first_tokens,
)
from ._base import Reporter, RunPlan, RunReport, agent_label
from ._summary import CaseSummary, RunSummary, judgements, trace_policy_note
from ._transcript import transcript_lines

MARKS = {
    Verdict.PASSED: "PASS",
    Verdict.FAILED: "FAIL",
    Verdict.ERROR: "ERROR",
    Verdict.SKIPPED: "SKIP",
    Verdict.SCORED: "SCORED",
}


def case_lines(case: CaseSummary) -> list[str]:
    """A case that did not pass: its mark, passes against what it needed, first reasons."""
    cached = f", {case.cached_trials} cached" if case.cached_trials else ""
    return [
        f"{MARKS.get(case.verdict, case.verdict.upper()):<7}{case.case_id} "
        f"({case.passes}/{case.samples} passed, needed {case.required}{cached})",
        *(f"         {reason}" for reason in (case.failures or [])[:3]),
    ]


def summary_lines(summary: RunSummary, *, named: frozenset[str] = frozenset()) -> list[str]:
    """The closing summary as lines of text; the cases in ``named`` (already printed with
    their reasons) are not repeated."""
    lines = [f"LOAD ERROR {error}" for error in summary.load_errors]
    for case in summary.cases:
        if case.verdict != Verdict.PASSED and case.case_id not in named:
            lines += case_lines(case)
    tags = {tag: (entry.passed, entry.cases) for tag, entry in summary.tags.items()}
    lines += analytics_lines(summary.analytics, tags)
    counts = summary.counts
    cached = f", {summary.cached_trials} cached" if summary.cached_trials else ""
    failed_files = len(summary.load_errors)
    unloaded = f", {failed_files} eval file(s) failed to load" if failed_files else ""
    lines.append(
        ", ".join(f"{counts.get(verdict, 0)} {verdict}" for verdict in Verdict.ALL)
        + f" — {summary.total} cases, {summary.trials} trials{cached} in {summary.duration:.2f}s"
        + unloaded
    )
    return lines


def detail_lines(result: CaseResult) -> list[str]:
    """``-v``: the case's time to first token, every trial's duration, times to first token,
    output, ``ctx.log()`` lines and assertions, and the transcript of every trial that did
    not pass."""
    times = first_token_text(durations(t for trial in result.trials for t in first_tokens(trial)))
    lines = [f"CASE   {result.case_id}" + (f" (first token {times})" if times else "")]
    for trial in result.trials:
        cached = ", cached" if trial.cached else ""
        turns = ", ".join(f"{time:.2f}s" for time in first_tokens(trial))
        first = f"; first token {turns}" if turns else ""
        lines.append(
            f"  trial {trial.trial}: {trial.verdict} ({trial.duration:.2f}s{first}{cached})"
        )
        if trial.error:
            lines.append(f"    {trial.error_type or 'Error'}: {trial.error}")
        if trial.output is not None:
            lines.append(f"    output: {trial.output}")
        lines += [f"    log: {line}" for line in trial.logs]
        for check in trial.assertions:
            outcome = assertion_outcome(check).upper().replace("_", " ")
            message = f": {check.message}" if check.message else ""
            lines.append(
                f"    {outcome:<13} {check.severity:<4} {check.score:.2f}/{check.threshold:.2f} "
                f"{check.label or check.name}{message}{failed_at(check)}"
            )
        if trial.verdict != Verdict.PASSED:
            lines += ["    transcript:", *(f"      {line}" for line in transcript_lines(trial))]
    return lines


def judge_lines(result: CaseResult) -> list[str]:
    """What the judges said about one case: score, reason and evidence, each distinct
    judgement once (``×3`` when three trials got it)."""
    said = judgements(result)
    lines = [f"JUDGE  {result.case_id}"] if said else []
    for judgement in said:
        times = f" (×{judgement.trials})" if judgement.trials > 1 else ""
        score = "not judged" if judgement.score is None else f"{judgement.score:.2f}"
        lines.append(f"         {judgement.criterion} {score}{times}: {judgement.reason}")
        lines += [f"           “{quote}”" for quote in judgement.evidence]
        if judgement.reads:
            lines.append("           judge read: " + ", ".join(judgement.reads))
    return lines


class ConsoleReporter(Reporter):
    """Progress while running, a summary at the end."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        verbose: bool = False,
        quiet: bool = False,
    ) -> None:
        self.stream = stream or sys.stdout
        self.live = not quiet and (self.stream.isatty() if live is None else live)
        self.verbose = verbose
        self.quiet = quiet
        self.total = 0
        self.done = 0
        self.cached = 0
        self.counts = dict.fromkeys(Verdict.ALL, 0)
        self._last_draw = 0.0
        self._order: list[str] = []  # case ids still to print, in discovery order
        self._finished: dict[str, str] = {}  # case id -> its line, until its turn
        self._named: set[str] = set()  # cases not passed, printed with their reasons

    def start(self, plan: RunPlan) -> None:
        self.total = plan.trials
        self._order = list(plan.case_ids)
        if self.quiet:
            return
        target = plan.provenance.target
        self.stream.write(
            printable(
                f"evalport: {plan.cases} cases, {plan.trials} trials against "
                f"{target.get('location', '?')} ({agent_label(target)}), "
                f"{trace_policy_note(plan.provenance)}"
            )
            + "\n"
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
        if self.live or self.quiet:
            return
        if summary.verdict == Verdict.PASSED:
            cached = f", {summary.cached_trials} cached" if summary.cached_trials else ""
            line = f"PASS   {summary.case_id} ({summary.passes}/{summary.samples}{cached})\n"
        else:  # named here with its reasons, so the closing summary does not repeat it
            line = "".join(f"{text}\n" for text in case_lines(summary))
            self._named.add(summary.case_id)
        line = printable(line)
        if summary.case_id not in self._order:  # not in the plan: print it as it comes
            self.stream.write(line)
            return
        self._finished[summary.case_id] = line
        while self._order and self._order[0] in self._finished:
            self.stream.write(self._finished.pop(self._order.pop(0)))
        self.stream.flush()

    def finish(self, report: RunReport) -> None:
        if self.live:
            self.stream.write("\n")
        lines = summary_lines(report.summary, named=frozenset(self._named))
        if self.verbose:
            details = [
                line
                for result in report.results
                for line in (*detail_lines(result), *judge_lines(result))
            ]
            lines = details + lines
        self.stream.write(printable("\n".join(lines)) + "\n")
        self.stream.flush()
