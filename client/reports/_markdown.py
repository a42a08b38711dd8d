"""A Markdown summary, sized for ``$GITHUB_STEP_SUMMARY``.

Rule: agent text is shown, never rendered: escaped, in code spans and fences it cannot
close. See ARCHITECTURE.md, "The Markdown summary".
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._core import CaseResult, Verdict, printable
from ._analytics import analytics_lines, first_token_cell
from ._base import Reporter, RunReport, agent_label
from ._compare import Comparison, compare
from ._summary import RunSummary, judgements, required_rate_note, trace_policy_note

ICONS = {
    Verdict.PASSED: "✅",
    Verdict.FAILED: "❌",
    Verdict.ERROR: "💥",
    Verdict.SKIPPED: "⏭️",
    Verdict.SCORED: "🟡",
}


_MARKDOWN = re.compile(r"([\\`*\[\]|~])")  # what starts a link, an image, code, a table cell
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _cell(text: str) -> str:
    """Text shown as it is, on one line of a list or in a table cell."""
    return _MARKDOWN.sub(r"\\\1", " ".join(printable(text).translate(_HTML).splitlines()))


def _fence(text: str) -> str:
    """Backticks that no run of backticks in ``text`` closes."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    return "`" * (longest + 1)


def _code(text: str) -> str:
    """A code span of ``text`` on one line (a table cell's ``|`` still escaped)."""
    text = " ".join(printable(text).splitlines()).replace("|", "\\|")
    fence = _fence(text)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


OUTPUT_CHARS = 200
"""How much of a recorded output a summary shows (the HTML report and ``view`` show it whole)."""
OUTPUTS_SHOWN = 3
"""How many distinct outputs of one case a summary shows."""


def _output_text(value: Any) -> str:
    """A recorded output as one short text: a string as it is, other data as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= OUTPUT_CHARS else text[: OUTPUT_CHARS - 1] + "…"


def recorded_outputs(result: CaseResult) -> tuple[list[tuple[str, int]], int]:
    """What a case's trials recorded as their output (``ctx.record_output``, an
    evaluator's ``run()``): the first :data:`OUTPUTS_SHOWN` distinct outputs, each as a
    short text with how many trials recorded it, and how many more distinct ones there
    were. Trials that recorded nothing are left out."""
    seen: dict[str, int] = {}
    for trial in result.trials:
        if trial.output is not None:
            text = _output_text(trial.output)
            seen[text] = seen.get(text, 0) + 1
    return list(seen.items())[:OUTPUTS_SHOWN], max(len(seen) - OUTPUTS_SHOWN, 0)


def _outputs(results: Sequence[CaseResult]) -> list[str]:
    lines = []
    for result in results:
        shown, more = recorded_outputs(result)
        for text, trials in shown:
            times = f" (×{trials})" if trials > 1 else ""
            lines.append(f"- {_code(result.case_id)}{times}: {_cell(text)}")
        if more:
            lines.append(f"- {_code(result.case_id)}: and {more} more distinct outputs")
    return ["", "### Recorded output", "", *lines] if lines else []


def _judged(results: Sequence[CaseResult]) -> list[str]:
    lines = []
    for result in results:
        for said in judgements(result):
            score = "not judged" if said.score is None else f"{said.score:.2f}"
            times = f" (×{said.trials})" if said.trials > 1 else ""
            evidence = " Evidence: " + ", ".join(f"“{_cell(q)}”" for q in said.evidence)
            lines.append(
                f"- {_code(result.case_id)} {_cell(said.criterion)} {score}{times}: "
                f"{_cell(said.reason)}{evidence if said.evidence else ''}"
            )
    return ["", "### What the judges said", "", *lines] if lines else []


def markdown_summary(
    summary: RunSummary,
    comparison: Comparison | None = None,
    *,
    results: Sequence[CaseResult] = (),
) -> str:
    """The Markdown text of a run (and of its comparison with a baseline); with the case
    ``results``, what the cases recorded as their output and what the judges said
    (reason and evidence)."""
    counts = summary.counts
    provenance = summary.provenance
    target = provenance.target
    lines = [
        "## evalport results",
        "",
        " · ".join(f"{ICONS[v]} {counts.get(v, 0)} {v}" for v in Verdict.ALL)
        + f" · {summary.total} cases, {summary.trials} trials"
        + (f", {summary.cached_trials} from the run cache" if summary.cached_trials else ""),
        "",
        f"Target `{target.get('location', '?')}` "
        f"({agent_label(target)}), "
        f"repeat {provenance.repeat}, {required_rate_note(provenance)}, "
        f"evalport {provenance.evalport_version}"
        + (f", git `{provenance.git_sha[:12]}`" if provenance.git_sha else "")
        + f", {trace_policy_note(provenance)}",
        "",
        f"Tokens: target {summary.target_tokens:,}, judge {summary.judge_tokens:,} "
        "(reported apart)",
        "",
    ]
    timed = any(case.first_token.count for case in summary.cases)
    first_token = (" first token p50 / p95 |", "---|") if timed else ("", "")
    lines += [
        f"| case | verdict | passes | 95% interval | pass@k | pass^k |{first_token[0]} notes |",
        f"|---|---|---|---|---|---|{first_token[1]}---|",
    ]
    for case in summary.cases:
        largest = max(case.pass_at_k, key=int) if case.pass_at_k else None
        notes = [word for word, on in (("flaky", case.flaky), ("cached", case.cached_trials)) if on]
        if case.judge_mean is not None:
            notes.append(f"judge {case.judge_mean:.2f}±{case.judge_std or 0:.2f}")
        lines.append(
            f"| {_code(case.case_id)} | {ICONS.get(case.verdict, '')} {case.verdict} "
            f"| {case.passes}/{case.samples} (need {case.required}) "
            f"| {case.wilson_low:.2f}..{case.wilson_high:.2f} "
            f"| {f'{case.pass_at_k[largest]:.2f} (k={largest})' if largest else '-'} "
            f"| {f'{case.pass_hat_k[largest]:.2f}' if largest else '-'} "
            + (f"| {first_token_cell(case.first_token)} " if timed else "")
            + f"| {', '.join(notes)} |"
        )
    troubled = [case for case in summary.cases if case.verdict not in (Verdict.PASSED,)]
    troubled = [case for case in troubled if case.failures or case.error]
    if troubled or summary.load_errors:
        lines += ["", "### What went wrong", ""]
        for error in summary.load_errors:
            lines.append(f"- load error: {_cell(error)}")
        for case in troubled:
            reasons = case.failures or [case.error or ""]
            lines.append(f"- {_code(case.case_id)}: " + "; ".join(_cell(r) for r in reasons[:3]))
    lines += _outputs(results)
    tags = {tag: (entry.passed, entry.cases) for tag, entry in summary.tags.items()}
    lines += ["", "### Analytics", ""]
    lines += [f"- {_cell(line)}" for line in analytics_lines(summary.analytics, tags)]
    lines += _judged(results)
    if comparison is not None:
        compared = comparison.lines()
        fence = max(_fence("\n".join(compared)), "```", key=len)
        lines += ["", "### Compared with the baseline", "", fence, *compared, fence]
    return "\n".join(lines) + "\n"


class MarkdownReporter(Reporter):
    """Writes the Markdown summary (appends to ``$GITHUB_STEP_SUMMARY``)."""

    def __init__(self, path: str | Path, baseline: RunSummary | None = None) -> None:
        self.path = Path(path)
        self.baseline = baseline

    def finish(self, report: RunReport) -> None:
        comparison = None if self.baseline is None else compare(self.baseline, report.summary)
        text = markdown_summary(report.summary, comparison, results=report.results)
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        append = bool(step_summary) and Path(step_summary or "").resolve() == self.path.resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a" if append else "w", encoding="utf-8") as file:
            file.write(text)
