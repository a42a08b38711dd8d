"""The transcript of one trial, as ``evalport run -v`` prints it for trials that did not pass.

Rules: one block per turn, in order: the user's message (and each image or file sent
with it, by type, media type, URL and size: never its bytes), then each step of that turn (its
tool executions as ``tool name(key=value, …) -> result``, an error mark when one failed,
and the assistant's text messages), then the run's status and stop reason. Values are
shown as the trace policy left them: a digest prints as its preview with the start of its
hash (``<digest "<string:5>" 156f3d9c>``), so ``-v`` never shows more than the reports
do. Long texts are cut at :data:`WIDTH` characters (``width=None``: never; ``evalport
view`` searches and diffs whole lines). A trial without a run (an error
before the first turn) has a one-line transcript saying so.
"""

from __future__ import annotations

from typing import Any

from .._core import RunData, TrialResult

WIDTH = 300


def _cut(text: str, width: int | None = WIDTH) -> str:
    text = text.replace("\n", " ⏎ ")
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _value(value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("hash"), str) and "preview" in value:
        return f"<digest {value['preview']} {value['hash'].removeprefix('sha256:')[:8]}>"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return repr(value)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, dict) and not ("hash" in arguments and "preview" in arguments):
        return ", ".join(f"{key}={_value(value)}" for key, value in arguments.items())
    return "" if arguments is None else _value(arguments)


def _step_lines(step: dict[str, Any], width: int | None) -> list[str]:
    lines = []
    for execution in step.get("toolExecutions") or []:
        name = execution.get("name", "?")
        call = f"tool   {name}({_arguments(execution.get('arguments'))})"
        if execution.get("hasError"):
            lines.append(_cut(f"{call} -> error {_value(execution.get('error'))}", width))
        else:
            lines.append(_cut(f"{call} -> {_value(execution.get('result'))}", width))
    for message in step.get("outputMessages") or []:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content:
            lines.append(_cut(f"agent: {content}", width))
    for error in step.get("errors") or []:
        message = f"error  {error.get('type') or 'Error'}: {error.get('message')}"
        lines.append(_cut(message, width))
    return lines


def transcript_lines(trial: TrialResult, *, width: int | None = WIDTH) -> list[str]:
    """The conversation of ``trial`` as lines of text (see the module rules)."""
    run = trial.run
    data = run.data() if isinstance(run, RunData) else run
    if not isinstance(data, dict):
        return ["(no run: the trial ended before the agent answered)"]
    steps = [step for step in data.get("steps") or [] if isinstance(step, dict)]
    users = [text for text in data.get("userMessages") or [] if isinstance(text, str)]
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for step in steps:  # the turns that hold something, never a count the run claims
        by_turn.setdefault(int(step.get("turn") or 0), []).append(step)
    parts_by_turn: dict[object, list[dict[str, Any]]] = {}
    for part in data.get("userParts") or []:
        if isinstance(part, dict):
            parts_by_turn.setdefault(part.get("turn"), []).append(part)
    lines: list[str] = []
    said = False
    for turn in sorted({*range(1, len(users) + 1), *(t for t in by_turn if t > 0)}):
        if turn <= len(users):
            lines.append(_cut(f"user:  {users[turn - 1]}", width))
        for part in parts_by_turn.get(turn, []):  # images and files: never their bytes
            if part.get("type") != "text":
                size = f", {part['bytes']} bytes" if isinstance(part.get("bytes"), int) else ""
                where = f" {part['url']}" if str(part.get("url") or "").startswith("http") else ""
                lines.append(
                    _cut(f"user:  [{part.get('type')} {part.get('mediaType')}{where}{size}]", width)
                )
        for step in by_turn.get(turn, []):
            step_lines = _step_lines(step, width)
            said = said or any(line.startswith("agent:") for line in step_lines)
            lines += step_lines
    if not said and data.get("reply"):
        lines.append(_cut(f"agent: {data['reply']}", width))
    stop = data.get("stopSignal") or {}
    reason = f", stopped: {stop.get('reason')}" if isinstance(stop, dict) and stop else ""
    lines.append(f"status {data.get('status', '?')}{reason}")
    return lines
