"""A self-contained HTML report: one file, no network, readable offline and in CI artifacts.

Rules: everything (styles, the small filter script, the data) is inline; nothing is
fetched. The page shows the counts and provenance, pass rates per tag, one row per case
with its pass rate and interval (and its time to first token p50 / p95 when some turn of
the run streamed, a dash for a case without one), and for each case its trials: each
one's duration and its turns' times to first token, the transcript (user messages,
assistant messages, tool calls), a tool-call timeline, the assertion results, the judge
records and the token cost. An analytics section gives the pass rates, the case and
trial durations (mean, p50, p95), the time to first token over the streamed turns (when
there are some) and the assertion totals by kind and outcome. The
verdict filter shows the cases with that verdict (in the Cases table and among the
transcripts) and the tags that have at least one of them. Every value is escaped:
transcripts are untrusted text. Only redacted runs reach this module.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

import msgspec
from evalport.protocol import is_digest

from .._core import (
    CaseResult,
    JudgeRecord,
    RunData,
    TrialResult,
    Verdict,
    error_message,
    error_title,
    run_errors,
)
from ._analytics import OUTCOMES, Durations, failed_at, first_token_cell, first_tokens
from ._base import Reporter, RunReport, agent_label
from ._files import case_slug
from ._summary import CaseSummary, RunSummary, judge_read, required_rate_note, trace_policy_note

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


def badge(verdict: str) -> str:
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
    by_turn: dict[int, list[Mapping[str, Any]]] = {}
    for step in steps:  # the turns that hold something, never the count the run claims
        by_turn.setdefault(int(step.get("turn") or 0), []).append(step)
    parts: list[str] = []
    for turn in sorted({*range(1, len(users) + 1), *(t for t in by_turn if t > 0)}):
        if turn <= len(users):
            parts.append(f'<div class="msg user"><b>user</b> {_text(users[turn - 1])}</div>')
        for step in by_turn.get(turn, []):
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
            parts += [_failure(info) for info in step.get("errors") or [] if isinstance(info, dict)]
    if not any("assistant" in part for part in parts) and run.get("reply"):
        parts.append(f'<div class="msg assistant"><b>agent</b> {_text(run["reply"])}</div>')
    if run.get("status") == "failed" and not any('class="msg failure"' in p for p in parts):
        parts += [_failure(info) for info in run_errors(run)]  # no step named its errors
    return "".join(parts) or '<p class="muted">no transcript</p>'


def _failure(info: Mapping[str, Any]) -> str:
    """The transcript row of an agent error: type, error id, message as the policy shows it."""
    error_id = info.get("errorId")
    ident = f" · error id <code>{_text(error_id)}</code>" if error_id else ""
    message = error_message(info.get("message"))
    return (
        f'<div class="msg failure"><b>{_text(error_title(info))}</b>{ident}'
        f"{': ' + _text(message) if message else ''}</div>"
    )


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
    return "".join(rows) + _axis(1000 * width)


def _axis(total_ms: float) -> str:
    """The time axis under the lanes: milliseconds since the first tool call started, at
    round steps (1, 2 or 5 times a power of ten), the end of the span last."""
    step = 10 ** math.floor(math.log10(total_ms / 4)) if total_ms > 0 else 1.0
    step *= next((m for m in (1, 2, 5, 10) if total_ms / (step * m) <= 5), 10)
    ticks = [i * step for i in range(int(total_ms / step) + 1) if i * step < total_ms * 0.9]
    digits = 0 if step >= 1 else min(3, -math.floor(math.log10(step)))
    spans = "".join(
        f'<span style="left:{100 * tick / total_ms:.2f}%">{tick:.{digits}f} ms</span>'
        for tick in [*ticks, total_ms]
    )
    return f'<div class="axis" title="milliseconds since the first tool call">{spans}</div>'


def _breakable(name: str) -> str:
    """An assertion's name that may wrap after ``(`` and ``,`` (between its kind and its
    arguments), never inside an identifier."""
    return _text(name).replace("(", "(<wbr>").replace(",", ",<wbr>")


def _assertions(trial: TrialResult) -> str:
    if not trial.assertions:
        return '<p class="muted">no assertions</p>'
    rows = "".join(
        f"<tr><td>{'✔' if result.passed else '✘'}</td>"
        f"<td>{_breakable(result.label or result.name)}</td><td>{result.score:.2f}"
        f" / {result.threshold:.2f}</td><td>{escape(result.severity)}</td>"
        f"<td>{_text(result.message)}{_text(failed_at(result))}</td></tr>"
        for result in trial.assertions
    )
    return (
        '<table class="assertions"><colgroup><col class="mark"><col class="name">'
        '<col class="score"><col class="severity"><col></colgroup><tr><th></th><th>assertion'
        f"</th><th>score / threshold</th><th>severity</th><th>message</th></tr>{rows}</table>"
    )


def _judges(trial: TrialResult) -> str:
    if not trial.judges:
        return ""
    rows = "".join(
        f"<tr><td>{_text(judge.criterion)}</td>"
        f"<td>{'not judged' if judge.score is None else _text(judge.score)}</td>"
        f"<td>{_text(judge.reason or judge.error or '')}{_evidence(judge.evidence)}"
        f"{_reads(judge)}</td>"
        f"<td>{judge.input_tokens + judge.output_tokens}</td></tr>"
        for judge in trial.judges
    )
    return (
        "<h4>judges</h4><table><tr><th>criterion</th><th>score</th><th>reason and evidence"
        f"</th><th>tokens</th></tr>{rows}</table>"
    )


def _reads(judge: JudgeRecord) -> str:
    if not judge.tool_calls:
        return ""
    reads = ", ".join(judge_read(call) for call in judge.tool_calls)
    return f'<div class="reads">judge read ({judge.steps} steps): {_text(reads)}</div>'


def _evidence(quotes: list[str]) -> str:
    if not quotes:
        return ""
    items = "".join(f"<li>“{_text(quote)}”</li>" for quote in quotes)
    return f'<ul class="evidence">{items}</ul>'


def _usage(run: Mapping[str, Any], trial: TrialResult) -> str:
    usage = run.get("usage") or {}
    judge = sum(j.input_tokens + j.output_tokens for j in trial.judges)
    parts = ", ".join(f"{key} {value}" for key, value in usage.items() if value)
    return f'<p class="muted">target tokens: {escape(parts or "0")}; judge tokens: {judge}</p>'


def _run_of(trial: TrialResult) -> Mapping[str, Any]:
    return trial.run if isinstance(trial.run, RunData | dict) else {}


def _error_ids(trial: TrialResult) -> list[str]:
    return [str(info["errorId"]) for info in run_errors(_run_of(trial)) if info.get("errorId")]


_TIMES = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s)\b")
"""A duration in a message (``0.104s``, ``131 ms``): trials differing only in these are alike."""


def _sameness(trial: TrialResult) -> bytes:
    """What two trials must share to be shown as one: verdict, error, transcript, assertions
    and judges; session ids, timings (durations in messages too), usage and the agent's
    error ids may differ."""
    ids = _error_ids(trial)

    def plain(text: str) -> str:
        for error_id in ids:
            text = text.replace(error_id, "")
        return _TIMES.sub("", text)

    return msgspec.json.encode(
        [
            trial.verdict,
            trial.error_type,
            trial.error,
            trial.skip_reason,
            trial.output,
            plain(_transcript(_run_of(trial))),
            [(a.label or a.name, a.passed, a.score, plain(a.message)) for a in trial.assertions],
            [(j.criterion, j.score, j.reason, j.error, j.evidence) for j in trial.judges],
        ]
    )


def _output(trial: TrialResult) -> str:
    """What the case recorded as its output (an evaluator's ``run()``), when it did."""
    if trial.output is None:
        return ""
    return f"<h4>output</h4><p>{_payload(trial.output)}</p>"


def _first_tokens(trial: TrialResult) -> str:
    """`` · first token 0.120s, 0.300s``: each streamed turn's, empty when none streamed."""
    times = ", ".join(f"{time:.3f}s" for time in first_tokens(trial))
    return f" · first token {times}" if times else ""


def _group(trials: list[TrialResult]) -> str:
    """Trials that went alike, shown once: the first one's transcript, timeline, assertions
    and judges, with each trial's own session, duration and error ids listed."""
    first = trials[0]
    run = _run_of(first)
    if len(trials) == 1:
        title = f"trial {first.trial}"
    else:
        numbers = ", ".join(str(trial.trial) for trial in trials)
        title = f'trials {numbers} <span class="count">×{len(trials)}</span> identical'
    each = "<br>".join(
        f"trial {trial.trial}: {trial.duration:.3f}s{_first_tokens(trial)}"
        f" · session {_text(trial.session_id or '-')}"
        + "".join(f" · error id {_text(error_id)}" for error_id in _error_ids(trial))
        + (" · from the run cache" if trial.cached else "")
        for trial in trials
    )
    error = (
        f'<p class="msg failure">{_text(first.error_type or "error")}: {_text(first.error)}</p>'
        if first.error
        else ""
    )
    return (
        f'<div class="trial"><b>{title}</b> {badge(first.verdict)}'
        f'<p class="muted">{each}</p>{error}{_output(first)}<h4>transcript</h4>{_transcript(run)}'
        f"<h4>tool timeline</h4>{_timeline(run)}<h4>assertions</h4>{_assertions(first)}"
        f"{_judges(first)}{_usage(run, first)}</div>"
    )


def _trials(trials: list[TrialResult]) -> str:
    """A case's trials: identical ones once with their count, differing ones side by side."""
    groups: dict[bytes, list[TrialResult]] = {}
    for trial in trials:
        groups.setdefault(_sameness(trial), []).append(trial)
    shown = "".join(_group(group) for group in groups.values())
    if len(groups) < 2:
        return shown
    return (
        f'<p class="muted">{len(groups)} different outcomes, side by side</p>'
        f'<div class="variants">{shown}</div>'
    )


def case_details(summary: CaseSummary, result: CaseResult | None) -> str:
    trials = _trials(result.trials) if result else ""
    return (
        f'<details class="case" id="{case_slug(summary.case_id)}" data-case="1" '
        f'data-verdict="{escape(summary.verdict)}"><summary>{badge(summary.verdict)} '
        f"<code>{_text(summary.case_id)}</code> {summary.passes}/{summary.samples}</summary>"
        f'<p class="muted">{_text(summary.description)}</p>{trials}</details>'
    )


def cases_table(cases: Iterable[CaseSummary], *, timed: bool | None = None) -> str:
    """One row per case: verdict, passes, interval, time to first token p50 / p95, flaky
    and cached marks, tags, tokens. The time to first token is a column when ``timed``
    (by default: when some of ``cases`` has one)."""
    cases = list(cases)
    if timed is None:
        timed = any(case.first_token.count for case in cases)
    rows = "".join(
        f'<tr data-case="1" data-verdict="{escape(case.verdict)}">'
        f'<td><a href="#{case_slug(case.case_id)}"><code>{_text(case.case_id)}</code></a></td>'
        f"<td>{badge(case.verdict)}</td><td>{case.passes}/{case.samples} "
        f"(need {case.required})</td><td>{case.wilson_low:.2f}..{case.wilson_high:.2f}</td>"
        + (f'<td class="first-token">{first_token_cell(case.first_token)}</td>' if timed else "")
        + f"<td>{'flaky' if case.flaky else ''}{' cached' if case.cached_trials else ''}</td>"
        f"<td>{_text(', '.join(case.tags))}</td><td>{case.target_tokens}</td></tr>"
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
        f"<td>{_text(tag)}</td><td>{entry.passed}/{entry.cases}</td>"
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
        f"<tr><td><code>{_text(kind)}</code></td>"
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
        f"{summary.duration:.2f}s · target {_text(target.get('location', '?'))} "
        f"({_text(agent_label(target))})"
        f" · {_text(trace_policy_note(provenance))}"
        f" · repeat {provenance.repeat} · {required_rate_note(provenance)} · evalport "
        f"{_text(provenance.evalport_version)} · git {_text(provenance.git_sha or '-')} · "
        f"judge {_text(provenance.judge_model or '-')} · started {_text(provenance.started_at)}"
        f" · tokens: target {summary.target_tokens}, judge {summary.judge_tokens}</p>"
    )


def html_report(report: RunReport) -> str:
    """The complete HTML document of a run."""
    summary = report.summary
    results = {result.case_id: result for result in report.results}
    buttons = "".join(
        f'<button type="button" data-verdict="{v}">{v}</button>' for v in ("all", *Verdict.ALL)
    )
    load_errors = "".join(f'<p class="msg tool">{_text(e)}</p>' for e in summary.load_errors)
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
