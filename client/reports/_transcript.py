"""The transcript of one trial as lines of text (``evalport run -v``, ``evalport view``).

Rule: it renders the one walk of a run (``_core.walk``), values as the trace policy left
them. See ARCHITECTURE.md, "Transcripts: one walk".
"""

from __future__ import annotations

from typing import Any

from evalport.protocol import is_digest

from .._core import (
    Attachment,
    RunData,
    Spoken,
    ToolCalled,
    TranscriptPart,
    TrialResult,
    digest_text,
    walk,
)

WIDTH = 300


def _cut(text: str, width: int | None = WIDTH) -> str:
    text = text.replace("\n", " ⏎ ")
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _value(value: Any) -> str:
    if is_digest(value):
        return digest_text(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return repr(value)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, dict) and not is_digest(arguments):
        return ", ".join(f"{key}={_value(value)}" for key, value in arguments.items())
    return "" if arguments is None else _value(arguments)


def _line(part: TranscriptPart, width: int | None) -> str:
    if isinstance(part, Spoken):
        return _cut(f"{'user: ' if part.role == 'user' else 'agent:'} {part.text}", width)
    if isinstance(part, Attachment):  # images and files: never their bytes
        data = part.part
        size = f", {data['bytes']} bytes" if isinstance(data.get("bytes"), int) else ""
        where = f" {data['url']}" if str(data.get("url") or "").startswith("http") else ""
        return _cut(f"user:  [{data.get('type')} {data.get('mediaType')}{where}{size}]", width)
    if isinstance(part, ToolCalled):
        execution = part.execution
        call = f"tool   {execution.get('name', '?')}({_arguments(execution.get('arguments'))})"
        if execution.get("hasError"):
            return _cut(f"{call} -> error {_value(execution.get('error'))}", width)
        return _cut(f"{call} -> {_value(execution.get('result'))}", width)
    error = part.error
    return _cut(f"error  {error.get('type') or 'Error'}: {error.get('message')}", width)


def transcript_lines(trial: TrialResult, *, width: int | None = WIDTH) -> list[str]:
    """The conversation of ``trial`` as lines of text (ARCHITECTURE.md, "Transcripts: one walk")."""
    run = trial.run
    data = run.data() if isinstance(run, RunData) else run
    if not isinstance(data, dict):
        return ["(no run: the trial ended before the agent answered)"]
    lines = [_line(part, width) for part in walk(data)]
    stop = data.get("stopSignal") or {}
    reason = f", stopped: {stop.get('reason')}" if isinstance(stop, dict) and stop else ""
    lines.append(f"status {data.get('status', '?')}{reason}")
    return lines
