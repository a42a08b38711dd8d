"""The pages of ``evalport view``: the runs under a folder, one run, two runs compared.
Every value is escaped and nothing is fetched or run in the page. See ARCHITECTURE.md,
"evalport view".
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from urllib.parse import quote, urlencode

from .._core import CaseResult, TrialResult, Verdict
from ._analytics import assertion_outcome
from ._base import RunReport, agent_label
from ._compare import compare
from ._html import STYLE, cases_table, document, header
from ._html_trial import badge, case_details
from ._summary import CaseSummary, RunSummary
from ._transcript import transcript_lines

_VIEW_STYLE = """
nav{background:#1d2330;padding:8px 16px}nav a{color:#fff;text-decoration:none;margin-right:16px}
nav b{color:#fff;margin-right:24px}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:8px 0}
form.filters input[type=search]{width:260px}
.problem{background:#fdecea;border-left:3px solid #c62828;padding:6px 10px}
.hits{margin:10px 0 0;font-size:13px}.hits code{white-space:pre-wrap}
mark{background:#ffe082}
table.diff{table-layout:fixed;margin:6px 0}
.diff td{font-family:monospace;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.diff td.gone{background:#eceff1;color:#55606e}.diff td.came{background:#fff4d6}
.diff td.none{background:#f6f7f9}
.kind{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;background:#dfe3ea}
.kind.regression{background:#c62828;color:#fff}.kind.fix{background:#2e8540;color:#fff}
.kind.slower{background:#e0a100;color:#fff}
"""

# The page may load nothing and run nothing: inline styles, data: images, its own forms.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)


@dataclass(frozen=True, slots=True)
class RunEntry:
    """A folder under the viewed path: a run (``summary``) or why it cannot be shown."""

    name: str
    summary: RunSummary | None = None
    problem: str | None = None


def _page(title: str, body: str) -> str:
    nav = '<nav><b>evalport view</b><a href="/">runs</a></nav>'
    return document(f"{title} · evalport view", STYLE + _VIEW_STYLE, nav + body)


def _run_link(name: str, label: str | None = None) -> str:
    return f'<a href="/run/{quote(name, safe="")}">{escape(label or name)}</a>'


def _rate(summary: RunSummary) -> str:
    rate = summary.analytics.pass_rate
    passed = summary.counts.get(Verdict.PASSED, 0)
    shown = "-" if rate is None else f"{rate:.0%}"
    return f"{shown} ({passed}/{summary.total})"


def _target(summary: RunSummary) -> str:
    target = summary.provenance.target
    agent = agent_label(target) if target.get("agent_name") else ""
    location = escape(target.get("location", "?"))
    return f"{location}<br><span class=muted>{escape(agent)}</span>" if agent else location


def problem_page(title: str, message: str) -> str:
    """A page that says why what was asked cannot be shown."""
    return _page(title, f'<main><h1>{escape(title)}</h1><p class="problem">{escape(message)}</p>')


def runs_page(root: str, entries: list[RunEntry]) -> str:
    """The runs under ``root``, newest first, and the folders that are not readable runs."""
    runs = [(e.name, e.summary) for e in entries if e.summary is not None and e.problem is None]
    rows = "".join(
        f"<tr><td>{_run_link(name)}</td><td>{escape(summary.provenance.started_at)}</td>"
        f"<td>{_target(summary)}</td><td>{_rate(summary)}</td><td class=counts>"
        + "".join(
            f"<span>{badge(v)} {summary.counts[v]}</span>"
            for v in Verdict.ALL
            if summary.counts.get(v)
        )
        + f"</td><td>{summary.trials}</td></tr>"
        for name, summary in runs
    )
    broken = "".join(
        f"<tr><td><code>{escape(entry.name)}</code></td><td>{escape(entry.problem)}</td></tr>"
        for entry in entries
        if entry.problem is not None
    )
    chooser = ""
    if len(runs) >= 2:  # newest as the new run, the one before it as the base
        names = [name for name, _ in runs]
        chooser = (
            '<form class="filters" action="/compare" method="get"><b>compare</b>'
            f"{_select('base', 'base', names[1], ((n, n) for n in names))}"
            f"{_select('new', 'new', names[0], ((n, n) for n in names))}"
            '<button type="submit">compare</button></form>'
        )
    table = (
        "<table><tr><th>run</th><th>started (UTC)</th><th>target</th><th>pass rate</th>"
        f"<th>cases</th><th>trials</th></tr>{rows}</table>"
        if runs
        else '<p class="muted">no run here yet: <code>evalport run</code> writes one</p>'
    )
    unreadable = (
        f"<h2>Not shown</h2><table><tr><th>folder</th><th>why</th></tr>{broken}</table>"
        if broken
        else ""
    )
    return _page(
        "runs",
        f"<header><h1>Runs</h1><p class=muted>{len(runs)} under <code>{escape(root)}</code></p>"
        f"{chooser}</header><main>{table}{unreadable}</main>",
    )


def _searchable(case: CaseSummary, result: CaseResult | None) -> list[str]:
    lines = [case.case_id, case.description, " ".join(case.tags)]
    for trial in result.trials if result else []:
        lines += transcript_lines(trial, width=None)
        lines += [f"{check.label or check.name}: {check.message}" for check in trial.assertions]
        lines += [f"{trial.error_type or 'error'}: {trial.error}"] if trial.error else []
    return [line for line in lines if line]


def _around(line: str, query: str, reach: int = 100) -> str:
    """The part of a long line around the first match."""
    found = line.lower().find(query.lower())
    start, end = max(0, found - reach), min(len(line), found + len(query) + reach)
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


def _marked(line: str, query: str) -> str:
    parts = re.split(f"({re.escape(query)})", line, flags=re.IGNORECASE)  # odd: the matches
    return "".join(f"<mark>{escape(p)}</mark>" if i % 2 else escape(p) for i, p in enumerate(parts))


def _select(name: str, label: str, chosen: str, choices: Iterable[tuple[str, str]]) -> str:
    options = "".join(
        f'<option value="{escape(value)}"{" selected" if value == chosen else ""}>'
        f"{escape(text)}</option>"
        for value, text in choices
    )
    return f'<label>{label} <select name="{name}">{options}</select></label>'


def run_page(
    name: str, report: RunReport, *, verdict: str = "", tag: str = "", query: str = ""
) -> str:
    """One run: its cases, filtered by ``verdict`` and ``tag``, searched for ``query``."""
    summary = report.summary
    results = {result.case_id: result for result in report.results}
    shown: list[tuple[CaseSummary, list[str]]] = []
    for case in summary.cases:
        if (verdict and case.verdict != verdict) or (tag and tag not in case.tags):
            continue
        hits: list[str] = []
        if query:
            lines = _searchable(case, results.get(case.case_id))
            hits = [line for line in lines if query.lower() in line.lower()]
            if not hits:
                continue
        shown.append((case, hits))
    verdicts = [("", "all verdicts")] + [
        (v, f"{v} ({summary.counts.get(v, 0)})") for v in Verdict.ALL
    ]
    tags = [("", "all tags")] + [(t, f"{t} ({e.cases})") for t, e in sorted(summary.tags.items())]
    form = (
        f'<form class="filters" action="/run/{quote(name, safe="")}" method="get">'
        f"{_select('verdict', 'verdict', verdict, verdicts)}{_select('tag', 'tag', tag, tags)}"
        '<label>search <input type="search" name="q" placeholder="transcripts, ids, messages" '
        f'value="{escape(query)}"></label><button type="submit">apply</button>'
        f"{_run_link(name, 'clear')}</form>"
    )
    timed = any(case.first_token.count for case in summary.cases)  # one column per run
    bodies = "".join(
        _hits(case, hits, query) + case_details(case, results.get(case.case_id))
        for case, hits in shown
    )
    listed = (
        f"{cases_table((case for case, _ in shown), timed=timed)}<h2>Transcripts</h2>{bodies}"
        if shown
        else '<p class="muted">no case matches these filters</p>'
    )
    errors = "".join(f'<p class="problem">load error: {escape(e)}</p>' for e in summary.load_errors)
    return _page(
        name,
        f"<header><h1>{escape(name)}</h1>{header(summary)}{form}</header><main>{errors}"
        f'<p class="muted shown">{len(shown)} of {summary.total} cases</p>{listed}</main>',
    )


def _hits(case: CaseSummary, hits: list[str], query: str) -> str:
    if not query:
        return ""
    counted = Counter(hits)  # trials that went alike match alike: each line once
    lines = "<br>".join(
        f"<code>{_marked(_around(line, query), query)}</code>"
        + (f" <span class=count>×{times}</span>" if times > 1 else "")
        for line, times in list(counted.items())[:8]
    )
    more = f" <span class=muted>and {len(counted) - 8} more</span>" if len(counted) > 8 else ""
    return f'<div class="hits"><b>{len(hits)} matching lines</b><br>{lines}{more}</div>'


def _shown_trial(report: RunReport, case_id: str) -> tuple[CaseSummary, TrialResult | None]:
    """A case of ``report`` and the trial shown of it: the first with the case's verdict."""
    case, result = report.case(case_id)
    if result is None or not result.trials:
        return case, None
    return case, next((t for t in result.trials if t.verdict == case.verdict), result.trials[0])


def _trial_lines(trial: TrialResult | None) -> list[str]:
    if trial is None:
        return ["(no trial saved)"]
    lines = [f"verdict {trial.verdict}"]
    if trial.output is not None:
        lines.append(f"output: {trial.output}")
    lines += transcript_lines(trial, width=None)
    for check in trial.assertions:
        outcome = assertion_outcome(check).upper().replace("_", " ")
        message = f": {check.message}" if check.message else ""
        lines.append(f"{outcome} {check.label or check.name}{message}")
    if trial.error:
        lines.append(f"{trial.error_type or 'error'}: {trial.error}")
    return lines


def _diff(base: list[str], new: list[str]) -> str:
    rows: list[str] = []
    matcher = difflib.SequenceMatcher(None, base, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = base[i1:i2], new[j1:j2]
        for index in range(max(len(left), len(right))):
            old = left[index] if index < len(left) else None
            now = right[index] if index < len(right) else None
            same = tag == "equal"
            rows.append(_cell(old, "" if same else "gone") + _cell(now, "" if same else "came"))
    return "".join(f"<tr>{row}</tr>" for row in rows)


def _cell(line: str | None, kind: str) -> str:
    if line is None:
        return '<td class="none"></td>'
    return f'<td class="{kind}">{escape(line)}</td>' if kind else f"<td>{escape(line)}</td>"


def compare_page(base_name: str, base: RunReport, new_name: str, new: RunReport) -> str:
    """Two runs side by side: what :func:`compare` found, then every case's transcripts
    diffed (see ARCHITECTURE.md, "evalport view")."""
    comparison = compare(base.summary, new.summary)
    kinds = {change.case_id: change.kind for change in comparison.changes}
    shared = [case.case_id for case in new.summary.cases if case.case_id not in comparison.added]
    alike = [case_id for case_id in shared if case_id not in kinds]
    rows = "".join(
        f'<tr><td><span class="kind {change.kind}">{change.kind}</span></td>'
        f'<td><a href="#c{number}"><code>{escape(change.case_id)}</code></a></td>'
        f"<td>{badge(change.base_verdict)} {change.base_passes}/{change.base_samples}</td>"
        f"<td>{badge(change.new_verdict)} {change.new_passes}/{change.new_samples}</td>"
        f"<td>{change.p_value:.3f}</td></tr>"
        for number, change in enumerate(comparison.changes)
    )
    table = (
        '<table class="changes"><tr><th>change</th><th>case</th><th>base</th><th>new</th>'
        f"<th>Fisher p</th></tr>{rows}</table>"
        if rows
        else '<p class="muted">no case changed its verdict or pass rate</p>'
    )
    sections = []
    for number, case_id in enumerate([*kinds, *alike]):
        kind = kinds.get(case_id, "alike")
        base_case, old = _shown_trial(base, case_id)
        new_case, now = _shown_trial(new, case_id)
        heads = "".join(
            f"<th>{escape(name)}: trial {trial.trial if trial else '-'} {badge(case.verdict)}</th>"
            for name, trial, case in ((base_name, old, base_case), (new_name, now, new_case))
        )
        sections.append(
            f'<details class="case" id="c{number}"{" open" if case_id in kinds else ""}>'
            f'<summary><span class="kind {kind}">{kind}</span> <code>{escape(case_id)}</code> '
            f"{badge(base_case.verdict)} → {badge(new_case.verdict)}</summary>"
            f'<table class="diff"><tr>{heads}</tr>{_diff(_trial_lines(old), _trial_lines(now))}'
            "</table></details>"
        )
    slow = "".join(
        f'<tr><td><span class="kind slower">slower</span></td><td><code>{escape(s.case_id)}'
        f"</code></td><td>{s.base_p95:.2f}s</td><td>{s.new_p95:.2f}s</td>"
        f"<td>+{s.growth:.0%}</td></tr>"
        for s in comparison.slower
    )
    slower = (
        f"<h2>Slower to first token</h2><p class=muted>time to first token "
        f"{escape(comparison.slower_rule())}</p><table "
        'class="slower"><tr><th>change</th><th>case</th><th>base p95</th><th>new p95</th>'
        f"<th>growth</th></tr>{slow}</table>"
        if slow
        else ""
    )
    only = "".join(
        f'<p class="muted">only in {escape(name)}: '
        + ", ".join(f"<code>{escape(case_id)}</code>" for case_id in ids)
        + "</p>"
        for name, ids in ((base_name, comparison.removed), (new_name, comparison.added))
        if ids
    )
    title = f"{base_name} → {new_name}"
    query = urlencode({"base": new_name, "new": base_name})
    return _page(
        title,
        f"<header><h1>{_run_link(base_name)} → {_run_link(new_name)}</h1><p class=muted>"
        f"pass rate {comparison.base_rate:.0%} → {comparison.new_rate:.0%} over the cases both "
        f"ran · {len(comparison.regressions)} regressions · {len(comparison.fixes)} fixes · "
        f'McNemar p {comparison.p_value:.3f} · <a href="/compare?{escape(query)}">swap</a>'
        f"</p></header><main><h2>Changed</h2>{table}{only}{slower}"
        "<h2>Transcripts, base | new</h2>"
        f"{''.join(sections)}</main>",
    )
