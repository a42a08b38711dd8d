"""A self-contained HTML report: one file, no network, readable offline and in CI artifacts.

Rule: everything is inline, nothing fetched, every value escaped; a trial's panel is
``_html_trial``'s. See ARCHITECTURE.md, "The HTML report".
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from pathlib import Path

from .._core import (
    Verdict,
)
from ._analytics import OUTCOMES, Durations, first_token_cell
from ._base import Reporter, RunReport, agent_label
from ._files import case_slug
from ._html_trial import badge, case_details, escaped_text
from ._summary import CaseSummary, RunSummary, required_rate_note, trace_policy_note

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header,main{max-width:1100px;margin:0 auto;padding:16px}header{padding-bottom:0}main{padding-top:0}
main>h2:first-child{margin-top:8px}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:20px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e3e6eb;padding:5px 8px;text-align:left;vertical-align:top}
td,code,.lanelabel,.muted{overflow-wrap:anywhere}
table.assertions{table-layout:fixed}.assertions .mark{width:26px}.assertions .name{width:30%}
.assertions .score{width:130px}.assertions .severity{width:76px}
th{background:#eef0f4;font-weight:600}
.v{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;color:#fff}
.passed{background:#2e8540}.failed{background:#c62828}.error{background:#6a1b9a}
.skipped{background:#78909c}.scored{background:#e0a100}
.counts span{margin-right:14px}.muted{color:#66707f}
details.case{background:#fff;border:1px solid #e3e6eb;border-radius:6px;margin:8px 0;padding:6px 10px}
details.case>summary{cursor:pointer;font-weight:600}
.trial{border-top:1px dashed #d5d9e0;margin-top:8px;padding-top:6px}
.msg{margin:4px 0;padding:5px 8px;border-radius:5px;white-space:pre-wrap;word-break:break-word}
.user{background:#e8f0fe}.assistant{background:#f1f3f4}.tool{background:#fff8e1;font-family:monospace;font-size:12px}
.lane{position:relative;height:18px;background:#f1f3f4;margin:2px 0;border-radius:3px}
.bar{position:absolute;top:2px;height:14px;border-radius:3px;background:#5c6bc0;min-width:2px}
.bar.bad{background:#c62828}.lanelabel{font-size:12px;font-family:monospace}
.axis{position:relative;height:18px;border-top:1px solid #9aa3b0;margin-top:2px;font-size:11px;color:#66707f}
.axis span{position:absolute;top:1px;transform:translateX(-50%);white-space:nowrap}
.axis span:first-child{transform:none}.axis span:last-child{transform:translateX(-100%)}
.failure{background:#fdecea;border-left:3px solid #c62828}
.count{display:inline-block;padding:0 6px;border-radius:9px;background:#dfe3ea;font-size:12px}
.variants{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:12px}
.variants .assertions .name{width:24%}.variants .assertions .score,.variants .assertions .severity{width:120px}
.variants>.trial{min-width:0}.evidence{margin:2px 0 0 14px;padding:0}
.variants td,.variants code,.variants .msg,.variants .muted{overflow-wrap:break-word;word-break:normal}
.variants table.assertions,.variants table.assertions tbody{display:block}
.variants table.assertions tr{display:grid;grid-template-columns:26px minmax(0,1fr) minmax(120px,auto)}
.variants table.assertions :is(td,th):nth-child(4){grid-area:2/3}
.variants table.assertions :is(td,th):nth-child(5){grid-area:2/2;padding-top:0}
.variants table.assertions :is(td,th):nth-child(-n+3){border-bottom:0}
code{font-size:12px}.filters button{margin-right:6px}
"""

_SCRIPT = """
document.querySelectorAll('.filters button').forEach(function (button) {
  button.addEventListener('click', function () {
    var wanted = button.getAttribute('data-verdict');
    document.querySelectorAll('[data-case]').forEach(function (node) {
      var verdicts = node.getAttribute('data-verdict').split(' ');
      var show = wanted === 'all' || verdicts.indexOf(wanted) >= 0;
      node.style.display = show ? '' : 'none';
    });
  });
});
"""


def cases_table(cases: Iterable[CaseSummary], *, timed: bool | None = None) -> str:
    """One row per case: verdict, passes, interval, time to first token p50 / p95, flaky
    and cached marks, tags, tokens. The time to first token is a column when ``timed``
    (by default: when some of ``cases`` has one)."""
    cases = list(cases)
    if timed is None:
        timed = any(case.first_token.count for case in cases)
    rows = "".join(
        f'<tr data-case="1" data-verdict="{escape(case.verdict)}">'
        f'<td><a href="#{case_slug(case.case_id)}"><code>{escaped_text(case.case_id)}</code></a></td>'
        f"<td>{badge(case.verdict)}</td><td>{case.passes}/{case.samples} "
        f"(need {case.required})</td><td>{case.wilson_low:.2f}..{case.wilson_high:.2f}</td>"
        + (f'<td class="first-token">{first_token_cell(case.first_token)}</td>' if timed else "")
        + f"<td>{'flaky' if case.flaky else ''}{' cached' if case.cached_trials else ''}</td>"
        f"<td>{escaped_text(', '.join(case.tags))}</td><td>{case.target_tokens}</td></tr>"
        for case in cases
    )
    return (
        "<table><tr><th>case</th><th>verdict</th><th>passes</th><th>95% interval</th>"
        + ("<th>first token p50 / p95</th>" if timed else "")
        + f"<th>notes</th><th>tags</th><th>tokens</th></tr>{rows}</table>"
    )


def _overview(summary: RunSummary) -> str:
    verdicts: dict[str, set[str]] = {}  # tag -> the verdicts of its cases, for the filter
    for case in summary.cases:
        for tag in case.tags:
            verdicts.setdefault(tag, set()).add(case.verdict)
    tags = "".join(
        f'<tr data-case="1" data-verdict="{escape(" ".join(sorted(verdicts.get(tag, ()))))}">'
        f"<td>{escaped_text(tag)}</td><td>{entry.passed}/{entry.cases}</td>"
        f"<td>{entry.pass_rate:.0%}</td></tr>"
        for tag, entry in summary.tags.items()
    )
    return (
        f"<h2>Cases</h2>{cases_table(summary.cases)}<h2>Tags</h2><table><tr><th>tag</th><th>passed</th><th>pass rate</th></tr>"
        f"{tags or '<tr><td colspan=3 class=muted>no tags</td></tr>'}</table>"
        f"{_analytics(summary)}"
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _analytics(summary: RunSummary) -> str:
    figures = summary.analytics
    rates = " · ".join(
        f"{label} {'-' if rate is None else f'{rate:.0%}'}"
        for label, rate in (("cases", figures.pass_rate), ("trials", figures.trial_pass_rate))
    )

    def row(label: str, times: Durations) -> str:
        return (
            f"<tr><td>{label}</td><td>{times.count}</td><td>{_seconds(times.mean)}</td>"
            f"<td>{_seconds(times.p50)}</td><td>{_seconds(times.p95)}</td></tr>"
        )

    kinds = "".join(
        f"<tr><td><code>{escaped_text(kind)}</code></td>"
        + "".join(f"<td>{counts.get(outcome, 0)}</td>" for outcome in OUTCOMES)
        + "</tr>"
        for kind, counts in figures.assertions.items()
    )
    heads = "".join(f"<th>{outcome.replace('_', ' ')}</th>" for outcome in OUTCOMES)
    return (
        f'<h2>Analytics</h2><p class="analytics">pass rate: {rates}</p>'
        "<table><tr><th>durations</th><th>count</th><th>mean</th><th>p50</th><th>p95</th></tr>"
        f"{row('cases', figures.case_durations)}{row('trials', figures.trial_durations)}"
        + (row("first token (turns)", figures.first_token) if figures.first_token.count else "")
        + f"</table><table><tr><th>assertion</th>{heads}</tr>"
        f"{kinds or '<tr><td colspan=5 class=muted>no assertions</td></tr>'}</table>"
    )


def document(title: str, style: str, body: str) -> str:
    """A whole page: ``body`` under the head every page of evalport has (its icon an empty
    ``data:`` URL, so that nothing is fetched)."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>{escape(title)}</title><style>{style}</style>'
        f"</head><body>{body}</body></html>\n"
    )


def header(summary: RunSummary) -> str:
    """A run's counts and provenance, as every HTML page about one run shows them."""
    provenance = summary.provenance
    target = provenance.target
    counts = "".join(f"<span>{badge(v)} {summary.counts.get(v, 0)}</span>" for v in Verdict.ALL)
    return (
        f"<p class=counts>{counts}</p><p class=muted>"
        f"{summary.total} cases · {summary.trials} trials · {summary.cached_trials} cached · "
        f"{summary.duration:.2f}s · target {escaped_text(target.get('location', '?'))} "
        f"({escaped_text(agent_label(target))})"
        f" · {escaped_text(trace_policy_note(provenance))}"
        f" · repeat {provenance.repeat} · {required_rate_note(provenance)} · evalport "
        f"{escaped_text(provenance.evalport_version)} · git {escaped_text(provenance.git_sha or '-')} · "
        f"judge {escaped_text(provenance.judge_model or '-')} · started {escaped_text(provenance.started_at)}"
        f" · tokens: target {summary.target_tokens}, judge {summary.judge_tokens}</p>"
    )


def html_report(report: RunReport) -> str:
    """The complete HTML document of a run."""
    summary = report.summary
    results = {result.case_id: result for result in report.results}
    buttons = "".join(
        f'<button type="button" data-verdict="{v}">{v}</button>' for v in ("all", *Verdict.ALL)
    )
    load_errors = "".join(f'<p class="msg tool">{escaped_text(e)}</p>' for e in summary.load_errors)
    cases = "".join(case_details(case, results.get(case.case_id)) for case in summary.cases)
    return document(
        "evalport report",
        STYLE,
        f"<header><h1>evalport report</h1>{header(summary)}"
        f'<p class="filters">{buttons}</p></header><main>{load_errors}{_overview(summary)}'
        f"<h2>Transcripts</h2>{cases}</main><script>{_SCRIPT}</script>",
    )


class HtmlReporter(Reporter):
    """Writes the HTML report when the run finishes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def finish(self, report: RunReport) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(html_report(report), encoding="utf-8")
