"""A trial in the HTML report: its transcript, tool-call timeline, assertions, judge
records and cost; identical trials shown once.

Rule: every value is escaped (transcripts are untrusted text). See ARCHITECTURE.md, "The
HTML report".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from html import escape
from typing import Any

import msgspec
from evalport.protocol import is_digest

from .._core import (
    Attachment,
    CaseResult,
    JudgeRecord,
    RunData,
    Spoken,
    ToolCalled,
    TranscriptPart,
    TrialResult,
    digest_text,
    error_message,
    error_title,
    run_errors,
    walk,
)
from ._analytics import failed_at, first_tokens
from ._files import case_slug
from ._summary import CaseSummary, judge_read


def badge(verdict: str) -> str:
    return f'<span class="v {escape(verdict)}">{escape(verdict)}</span>'


def escaped_text(value: Any) -> str:
    if isinstance(value, str):
        return escape(value)
    return escape(msgspec.json.encode(value).decode())


def _payload(value: Any) -> str:
    """A tool payload for reading: a digest as its shape and short hash, maps key by key."""
    if is_digest(value):
        return escape(digest_text(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{escape(str(k))}: {_payload(v)}" for k, v in value.items()) + "}"
    return escaped_text(value)


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _part(part: TranscriptPart) -> str:
    if isinstance(part, Spoken):
        role, who = ("user", "user") if part.role == "user" else ("assistant", "agent")
        return f'<div class="msg {role}"><b>{who}</b> {escaped_text(part.text)}</div>'
    if isinstance(part, Attachment):  # images and files: never their bytes
        data = part.part
        size = f", {data['bytes']} bytes" if isinstance(data.get("bytes"), int) else ""
        about = f"{data.get('type')} {data.get('mediaType')}{size}"
        return f'<div class="msg user"><b>user</b> [{escaped_text(about)}]</div>'
    if isinstance(part, ToolCalled):
        execution = part.execution
        approval = (execution.get("approval") or {}).get("state")
        state = f" ({approval})" if approval else ""
        state += " failed" if execution.get("hasError") else ""
        state += " [injected fault]" if execution.get("injected") else ""
        return (
            f'<div class="msg tool">tool {escaped_text(execution.get("name", ""))}{state} '
            f"args {_payload(execution.get('arguments'))} "
            f"result {_payload(execution.get('result'))}</div>"
        )
    return _failure(part.error)


def _transcript(run: Mapping[str, Any]) -> str:
    parts = [_part(part) for part in walk(run)]
    if run.get("status") == "failed" and not any('class="msg failure"' in p for p in parts):
        parts += [_failure(info) for info in run_errors(run)]  # no step named its errors
    return "".join(parts) or '<p class="muted">no transcript</p>'


def _failure(info: Mapping[str, Any]) -> str:
    """The transcript row of an agent error: type, error id, message as the policy shows it."""
    error_id = info.get("errorId")
    ident = f" · error id <code>{escaped_text(error_id)}</code>" if error_id else ""
    message = error_message(info.get("message"))
    return (
        f'<div class="msg failure"><b>{escaped_text(error_title(info))}</b>{ident}'
        f"{': ' + escaped_text(message) if message else ''}</div>"
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
            f'<div class="lanelabel">{escaped_text(name)} · {1000 * (end - start):.1f} ms</div>'
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
    return escaped_text(name).replace("(", "(<wbr>").replace(",", ",<wbr>")


def _assertions(trial: TrialResult) -> str:
    if not trial.assertions:
        return '<p class="muted">no assertions</p>'
    rows = "".join(
        f"<tr><td>{'✔' if result.passed else '✘'}</td>"
        f"<td>{_breakable(result.label or result.name)}</td><td>{result.score:.2f}"
        f" / {result.threshold:.2f}</td><td>{escape(result.severity)}</td>"
        f"<td>{escaped_text(result.message)}{escaped_text(failed_at(result))}</td></tr>"
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
        f"<tr><td>{escaped_text(judge.criterion)}</td>"
        f"<td>{'not judged' if judge.score is None else escaped_text(judge.score)}</td>"
        f"<td>{escaped_text(judge.reason or judge.error or '')}{_evidence(judge.evidence)}"
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
    return f'<div class="reads">judge read ({judge.steps} steps): {escaped_text(reads)}</div>'


def _evidence(quotes: list[str]) -> str:
    if not quotes:
        return ""
    items = "".join(f"<li>“{escaped_text(quote)}”</li>" for quote in quotes)
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
        f" · session {escaped_text(trial.session_id or '-')}"
        + "".join(f" · error id {escaped_text(error_id)}" for error_id in _error_ids(trial))
        + (" · from the run cache" if trial.cached else "")
        for trial in trials
    )
    error = (
        f'<p class="msg failure">{escaped_text(first.error_type or "error")}: {escaped_text(first.error)}</p>'
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
        f"<code>{escaped_text(summary.case_id)}</code> {summary.passes}/{summary.samples}</summary>"
        f'<p class="muted">{escaped_text(summary.description)}</p>{trials}</details>'
    )
