"""The transcript a judge reads: a run rendered as plain text, turn by turn.

Rules:

- Turn by turn: the user's message, each step's tool calls with arguments, results,
  errors and approval decisions (state and reason), then the assistant's reply. Pending
  approvals and run errors close the transcript.
- Runs arrive already redacted by the trace policy. A digest is shown as what it is,
  ``<redacted sha256:1f2e3d4c... 23 bytes, shape {"card":"<string:23>"}>``, never as if it
  were the value; an argument map shows its keys in clear.
- An image or file of a turn is named by media type, name, URL, size and sha256, never by
  its bytes; its URL is shown without query, fragment or user info (where a presigned
  URL keeps its token), whatever the trace policy kept.
- Payloads longer than 2,000 characters are cut; a transcript longer than ``max_chars``
  keeps its first third and its last two thirds of the budget, with the cut marked.
- The transcript is data for the judge; :mod:`.prompts` fences it. Nothing here trusts it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evalport.protocol import AgentRun, Step, compact_json, is_digest

_MAX_VALUE_CHARS = 2000
MAX_TRANSCRIPT_CHARS = 60_000


def render_value(value: Any) -> str:
    """A payload as text: verbatim JSON, or a digest spelled out as redacted."""
    if is_digest(value):
        digest_hash = str(value["hash"])
        short = digest_hash[: len("sha256:") + 12] + "..."
        return f"<redacted {short} {value['bytes']} bytes, shape {value['preview']}>"
    if isinstance(value, dict):
        inner = ", ".join(f"{key}: {render_value(item)}" for key, item in value.items())
        return "{" + inner + "}"
    text = value if isinstance(value, str) else compact_json(value).decode(errors="replace")
    if len(text) > _MAX_VALUE_CHARS:
        text = text[:_MAX_VALUE_CHARS] + f"... [{len(text) - _MAX_VALUE_CHARS} more chars]"
    return text


def step_lines(step: Step) -> list[str]:
    lines: list[str] = []
    for execution in step.tool_executions:
        lines.append(f"TOOL CALL {execution.name}({render_value(execution.arguments)})")
        approval = execution.approval
        if approval is not None:
            reason = f": {approval.reason}" if approval.reason else ""
            lines.append(f"  approval {approval.state}{reason}")
        if execution.has_error:
            lines.append(f"  error: {render_value(execution.error)}")
        elif execution.result is not None:
            lines.append(f"  result: {render_value(execution.result)}")
    for error in step.errors:
        lines.append(f"STEP ERROR: {render_value(error.message)}")
    return lines


def assistant_text(step: Step) -> list[str]:
    return [
        message.content
        for message in step.output_messages
        if message.role == "assistant" and isinstance(message.content, str) and message.content
    ]


def _attached(run: AgentRun, turn: int) -> list[str]:
    """The turn's images and files, each by media type, name or URL, size and sha256:
    never their bytes, whatever the trace policy kept."""
    lines = []
    for part in run.user_parts or ():
        if part.turn != turn or part.type == "text":
            continue
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
        lines.append(f"USER ATTACHED {part.type.upper()}: " + ", ".join(about))
    return lines


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
    """The run turn by turn from its own record: the user messages, the steps by turn
    number, the run's reply closing the last turn; ``details=False`` keeps only what the
    user and the assistant said (no attachments, tool calls or step errors)."""
    lines: list[str] = []
    # the turns that hold something, never the count the run claims (a server may say 1e12)
    numbers = sorted({step.turn for step in run.steps} | {*range(1, len(run.user_messages) + 1)})
    numbers = numbers or [1]
    for position, number in enumerate(numbers):
        if 0 < number <= len(run.user_messages):
            lines.append(f"USER: {run.user_messages[number - 1]}")
        steps = run.steps_of_turn(number)
        if details:
            lines += _attached(run, number)
            lines += [line for step in steps for line in step_lines(step)]
        said = [text for step in steps for text in assistant_text(step)]
        if position == len(numbers) - 1 and run.reply and run.reply not in said:
            said.append(run.reply)
        lines += [f"ASSISTANT: {text}" for text in said]
    return lines


def render_transcript(
    run: AgentRun, turns: Sequence[Any] = (), *, max_chars: int = MAX_TRANSCRIPT_CHARS
) -> str:
    """Render ``run`` as a transcript.

    ``turns`` are the context's :class:`~evalport.client.Turn` objects, when known:
    they give each turn's message and reply; its steps are read from ``run`` by turn
    number (complete even for a turn resumed after an approval), else from the turn.
    Without turns the run's ``user_messages`` and the steps' ``turn`` numbers are used,
    and the run's reply closes the last turn.
    """
    lines: list[str] = []
    if turns:
        shown: set[int] = set()
        for turn in turns:
            if turn.message:
                lines.append(f"USER: {turn.message}")
            lines += _attached(run, turn.index)
            steps = [] if turn.index in shown else run.steps_of_turn(turn.index)
            shown.add(turn.index)
            for step in steps or turn.steps:
                lines += step_lines(step)
            if turn.reply:
                lines.append(f"ASSISTANT: {turn.reply}")
    else:
        lines = run_lines(run)
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
