"""The transcript a judge reads: the one walk of a run (``_core.walk``) as plain text.

Rule: a digest reads as redacted (``digest_text``), never as a value; an attachment never
by its bytes; nothing here trusts the text. See ARCHITECTURE.md, "Transcripts: one
walk".
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec
from evalport.protocol import AgentRun, Step, compact_json, is_digest

from .._core import Attachment, Spoken, StepFailed, TranscriptPart, digest_text, step_parts, walk

_MAX_VALUE_CHARS = 2000
MAX_TRANSCRIPT_CHARS = 60_000


def render_value(value: Any) -> str:
    """A payload as text: verbatim JSON, or a digest spelled out as redacted."""
    if is_digest(value):
        return digest_text(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{key}: {render_value(item)}" for key, item in value.items())
        return "{" + inner + "}"
    text = value if isinstance(value, str) else compact_json(value).decode(errors="replace")
    if len(text) > _MAX_VALUE_CHARS:
        text = text[:_MAX_VALUE_CHARS] + f"... [{len(text) - _MAX_VALUE_CHARS} more chars]"
    return text


def _lines(part: TranscriptPart, run: AgentRun) -> list[str]:
    if isinstance(part, Spoken):
        return [f"{'USER' if part.role == 'user' else 'ASSISTANT'}: {part.text}"]
    if isinstance(part, Attachment):
        return [_attached(run, part.index)]
    if isinstance(part, StepFailed):
        return [f"STEP ERROR: {render_value(part.error.get('message'))}"]
    execution = part.execution
    lines = [f"TOOL CALL {execution.get('name')}({render_value(execution.get('arguments'))})"]
    approval = execution.get("approval")
    if isinstance(approval, dict):
        reason = f": {approval['reason']}" if approval.get("reason") else ""
        lines.append(f"  approval {approval.get('state')}{reason}")
    if execution.get("hasError"):
        lines.append(f"  error: {render_value(execution.get('error'))}")
    elif execution.get("result") is not None:
        lines.append(f"  result: {render_value(execution.get('result'))}")
    return lines


def step_lines(step: Step) -> list[str]:
    """One step as the judge reads it: its tool calls, what the assistant said, errors."""
    empty = AgentRun(reply="", status="completed")
    parts = step_parts(msgspec.to_builtins(step))
    return [line for part in parts for line in _lines(part, empty)]


def _attached(run: AgentRun, index: int) -> str:
    """An image or file by media type, name or URL, size and sha256: never its bytes,
    whatever the trace policy kept."""
    part = (run.user_parts or [])[index]
    about = [part.media_type or "unknown type"]
    if part.name:
        about.append(part.name)
    if part.url and not part.url.startswith("data:"):
        about.append(_bare_url(part.url))
    data = part.data
    size = len(data) if data is not None else part.size
    sha256 = hashlib.sha256(data).hexdigest() if data is not None else part.sha256
    if size is not None:
        about.append(f"{size} bytes")
    if sha256:
        about.append(f"sha256:{sha256}")
    return f"USER ATTACHED {part.type.upper()}: " + ", ".join(about)


def _bare_url(url: str) -> str:
    """``url`` without its query, fragment and user info."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<malformed URL>"
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port is not None else ""
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def run_lines(run: AgentRun, *, details: bool = True) -> list[str]:
    """The run turn by turn (:func:`~evalport.client._core.walk`); ``details=False``
    keeps only what the user and the assistant said."""
    parts = walk(msgspec.to_builtins(run))
    return [
        line for part in parts if details or isinstance(part, Spoken) for line in _lines(part, run)
    ]


def render_transcript(
    run: AgentRun, turns: Sequence[Any] = (), *, max_chars: int = MAX_TRANSCRIPT_CHARS
) -> str:
    """Render ``run`` as a transcript.

    ``turns`` are the context's :class:`~evalport.client.Turn` objects, when known: they
    give each turn's message and reply (by turn number); its steps are read from ``run``.
    Without turns the run's ``user_messages`` are used, and its reply closes the last turn.
    """
    messages = {turn.index: turn.message for turn in turns}
    replies = {turn.index: turn.reply for turn in turns if turn.reply}
    data = msgspec.to_builtins(run)
    parts = walk(data, messages=messages, replies=replies) if turns else walk(data)
    lines = [line for part in parts for line in _lines(part, run)]
    for pending in run.pending_approvals:
        lines.append(
            f"PENDING APPROVAL {pending.tool}({render_value(pending.arguments)}) "
            f"call {pending.call_id}"
        )
    if run.errors:
        lines.append(f"RUN ERRORS: {run.errors}")
    lines.append(f"RUN STATUS: {run.status}")
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    head, tail = max_chars // 3, max_chars - max_chars // 3
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"
