"""A self-contained HTML report: one file, no network, readable offline and in CI artifacts.

Rules: everything (styles, the small filter script, the data) is inline; nothing is
fetched. The page shows the counts and provenance, pass rates per tag, one row per case
with its pass rate and interval, and for each case its trials: the transcript (user
messages, assistant messages, tool calls), a tool-call timeline, the assertion results,
the judge records and the token cost. Every value is escaped: transcripts are untrusted
text. Only redacted runs reach this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

import msgspec
from evalport.protocol import is_digest

from .._results import CaseResult, RunData, TrialResult, Verdict
from ._base import Reporter, RunReport
from ._files import case_slug
from ._summary import CaseSummary, RunSummary, trace_policy_note

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header,main{max-width:1100px;margin:0 auto;padding:16px}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:20px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e3e6eb;padding:5px 8px;text-align:left;vertical-align:top}
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
code{font-size:12px}.filters button{margin-right:6px}
"""

_SCRIPT = """
document.querySelectorAll('.filters button').forEach(function (button) {
  button.addEventListener('click', function () {
    var wanted = button.getAttribute('data-verdict');
    document.querySelectorAll('[data-case]').forEach(function (node) {
      var show = wanted === 'all' || node.getAttribute('data-verdict') === wanted;
      node.style.display = show ? '' : 'none';
    });
  });
});
"""


def _badge(verdict: str) -> str:
    return f'<span class="v {escape(verdict)}">{escape(verdict)}</span>'


def _text(value: Any) -> str:
    if isinstance(value, str):
        return escape(value)
    return escape(msgspec.json.encode(value).decode())


def _payload(value: Any) -> str:
    """A tool payload for reading: a digest as its shape and short hash, maps key by key."""
    if is_digest(value):
        preview = str(value["preview"])
        if preview.startswith('"'):  # a JSON string: show its text
            with contextlib.suppress(msgspec.DecodeError):
                preview = str(msgspec.json.decode(preview))
        return escape(f"{preview} #{str(value['hash'])[7:15]}")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{escape(str(k))}: {_payload(v)}" for k, v in value.items()) + "}"
    return _text(value)


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _transcript(run: Mapping[str, Any]) -> str:
    users = run.get("userMessages") or []
    steps = run.get("steps") or []
    turns = max([int(run.get("turns") or 0), len(users)] + [int(s.get("turn") or 0) for s in steps])
    parts: list[str] = []
    for turn in range(1, turns + 1):
        if turn <= len(users):
            parts.append(f'<div class="msg user"><b>user</b> {_text(users[turn - 1])}</div>')
        for step in (s for s in steps if s.get("turn") == turn):
            for execution in step.get("toolExecutions") or []:
                approval = (execution.get("approval") or {}).get("state")
                state = f" ({approval})" if approval else ""
                state += " failed" if execution.get("hasError") else ""
                state += " [injected fault]" if execution.get("injected") else ""
                parts.append(
                    f'<div class="msg tool">tool {_text(execution.get("name", ""))}{state} '
                    f"args {_payload(execution.get('arguments'))} "
                    f"result {_payload(execution.get('result'))}</div>"
                )
            for message in step.get("outputMessages") or []:
                content = message.get("content")
                if message.get("role") == "assistant" and content:
                    parts.append(f'<div class="msg assistant"><b>agent</b> {_text(content)}</div>')
    if not any("assistant" in part for part in parts) and run.get("reply"):
        parts.append(f'<div class="msg assistant"><b>agent</b> {_text(run["reply"])}</div>')
    return "".join(parts) or '<p class="muted">no transcript</p>'


def _timeline(run: Mapping[str, Any]) -> str:
    tools = run.get("tools") or []
    spans = []
    for record in tools:
        start, end = _time(record.get("startedAt")), _time(record.get("completedAt"))
        if start is not None:
            spans.append((record, start, end if end is not None else start))
    if not spans:
        return '<p class="muted">no tool calls</p>'
    origin = min(start for _, start, _ in spans)
    width = max(end for _, _, end in spans) - origin or 1e-3
    rows = []
    for record, start, end in spans:
        name = (record.get("tool_call") or {}).get("name", "")
        bad = " bad" if record.get("error") else ""
        left, span = 100 * (start - origin) / width, max(100 * (end - start) / width, 0.5)
        rows.append(
            f'<div class="lanelabel">{_text(name)} · {1000 * (end - start):.1f} ms</div>'
            f'<div class="lane"><div class="bar{bad}" style="left:{left:.2f}%;'
            f'width:{min(span, 100 - left):.2f}%"></div></div>'
        )
    return "".join(rows)


def _assertions(trial: TrialResult) -> str:
    if not trial.assertions:
        return '<p class="muted">no assertions</p>'
    rows = "".join(
        f"<tr><td>{'✔' if result.passed else '✘'}</td>"
        f"<td>{_text(result.label or result.name)}</td><td>{result.score:.2f}"
        f" / {result.threshold:.2f}</td><td>{escape(result.severity)}</td>"
        f"<td>{_text(result.message)}</td></tr>"
        for result in trial.assertions
    )
    return (
        "<table><tr><th></th><th>assertion</th><th>score / threshold</th><th>severity</th>"
        f"<th>message</th></tr>{rows}</table>"
    )


def _judges(trial: TrialResult) -> str:
    if not trial.judges:
        return ""
    rows = "".join(
        f"<tr><td>{_text(judge.criterion)}</td><td>{_text(judge.score)}</td>"
        f"<td>{_text(judge.reason or judge.error or '')}</td>"
        f"<td>{judge.input_tokens + judge.output_tokens}</td></tr>"
        for judge in trial.judges
    )
    return (
        "<h4>judges</h4><table><tr><th>criterion</th><th>score</th><th>reason</th>"
        f"<th>tokens</th></tr>{rows}</table>"
    )


def _usage(run: Mapping[str, Any], trial: TrialResult) -> str:
    usage = run.get("usage") or {}
    judge = sum(j.input_tokens + j.output_tokens for j in trial.judges)
    parts = ", ".join(f"{key} {value}" for key, value in usage.items() if value)
    return f'<p class="muted">target tokens: {escape(parts or "0")}; judge tokens: {judge}</p>'


def _trial(trial: TrialResult) -> str:
    run = trial.run if isinstance(trial.run, RunData | dict) else {}
    flags = " · from the run cache" if trial.cached else ""
    error = (
        f'<p class="msg tool">{_text(trial.error_type or "error")}: {_text(trial.error)}</p>'
        if trial.error
        else ""
    )
    return (
        f'<div class="trial"><b>trial {trial.trial}</b> {_badge(trial.verdict)} '
        f'<span class="muted">{trial.duration:.3f}s · session {_text(trial.session_id or "-")}'
        f"{flags}</span>{error}<h4>transcript</h4>{_transcript(run)}"
        f"<h4>tool timeline</h4>{_timeline(run)}<h4>assertions</h4>{_assertions(trial)}"
        f"{_judges(trial)}{_usage(run, trial)}</div>"
    )


def _case(summary: CaseSummary, result: CaseResult | None) -> str:
    trials = "".join(_trial(trial) for trial in result.trials) if result else ""
    return (
        f'<details class="case" id="{case_slug(summary.case_id)}" data-case="1" '
        f'data-verdict="{escape(summary.verdict)}"><summary>{_badge(summary.verdict)} '
        f"<code>{_text(summary.case_id)}</code> {summary.passes}/{summary.samples}</summary>"
        f'<p class="muted">{_text(summary.description)}</p>{trials}</details>'
    )


def _overview(summary: RunSummary) -> str:
    rows = "".join(
        f'<tr data-case="1" data-verdict="{escape(case.verdict)}">'
        f'<td><a href="#{case_slug(case.case_id)}"><code>{_text(case.case_id)}</code></a></td>'
        f"<td>{_badge(case.verdict)}</td><td>{case.passes}/{case.samples} "
        f"(need {case.required})</td><td>{case.wilson_low:.2f}..{case.wilson_high:.2f}</td>"
        f"<td>{'flaky' if case.flaky else ''}{' cached' if case.cached_trials else ''}</td>"
        f"<td>{_text(', '.join(case.tags))}</td><td>{case.target_tokens}</td></tr>"
        for case in summary.cases
    )
    tags = "".join(
        f"<tr><td>{_text(tag)}</td><td>{entry.passed}/{entry.cases}</td>"
        f"<td>{entry.pass_rate:.0%}</td></tr>"
        for tag, entry in summary.tags.items()
    )
    return (
        "<h2>Cases</h2><table><tr><th>case</th><th>verdict</th><th>passes</th>"
        f"<th>95% interval</th><th>notes</th><th>tags</th><th>tokens</th></tr>{rows}</table>"
        "<h2>Tags</h2><table><tr><th>tag</th><th>passed</th><th>pass rate</th></tr>"
        f"{tags or '<tr><td colspan=3 class=muted>no tags</td></tr>'}</table>"
    )


def html_report(report: RunReport) -> str:
    """The complete HTML document of a run."""
    summary = report.summary
    results = {result.case_id: result for result in report.results}
    provenance = summary.provenance
    target = provenance.target
    counts = "".join(f"<span>{_badge(v)} {summary.counts.get(v, 0)}</span>" for v in Verdict.ALL)
    buttons = "".join(
        f'<button type="button" data-verdict="{v}">{v}</button>' for v in ("all", *Verdict.ALL)
    )
    load_errors = "".join(f'<p class="msg tool">{_text(e)}</p>' for e in summary.load_errors)
    cases = "".join(_case(case, results.get(case.case_id)) for case in summary.cases)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>evalport report</title><style>{_STYLE}</style></head><body><header>"
        f"<h1>evalport report</h1><p class=counts>{counts}</p><p class=muted>"
        f"{summary.total} cases · {summary.trials} trials · {summary.cached_trials} cached · "
        f"{summary.duration:.2f}s · target {_text(target.get('location', '?'))} "
        f"({_text(target.get('agent_name', '?'))} {_text(target.get('agent_version', '?'))})"
        f" · {_text(trace_policy_note(provenance))}"
        f" · repeat {provenance.repeat} · pass rate {provenance.pass_rate:g} · evalport "
        f"{_text(provenance.evalport_version)} · git {_text(provenance.git_sha or '-')} · "
        f"judge {_text(provenance.judge_model or '-')} · started {_text(provenance.started_at)}"
        f" · tokens: target {summary.target_tokens}, judge {summary.judge_tokens}</p>"
        f'<p class="filters">{buttons}</p></header><main>{load_errors}{_overview(summary)}'
        f"<h2>Transcripts</h2>{cases}</main><script>{_SCRIPT}</script></body></html>\n"
    )


class HtmlReporter(Reporter):
    """Writes the HTML report when the run finishes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def finish(self, report: RunReport) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(html_report(report), encoding="utf-8")
