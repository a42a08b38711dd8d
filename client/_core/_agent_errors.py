"""How an agent's failure reads in assertion messages and reports: its type and error id
always, its message only as the trace policy left it. Rules: see ARCHITECTURE.md, "Agent
text in messages and reports".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from evalport.protocol import is_digest

HIDDEN = (
    "message hidden by the safe trace policy (run with --trace-policy verbatim to see it, "
    "or find the error id in the agent's log: the server's, or stderr under --local)"
)


def _digested_text(text: str) -> bool:
    if not text.startswith('{"hash":'):
        return False
    try:
        return is_digest(msgspec.json.decode(text))
    except msgspec.DecodeError:
        return False


def error_message(message: Any) -> str:
    """An error message as reports show it: its text, or :data:`HIDDEN` for a digest."""
    if is_digest(message) or (isinstance(message, str) and _digested_text(message)):
        return HIDDEN
    if isinstance(message, str):
        return message
    return "" if message is None else msgspec.json.encode(message).decode()


def error_title(info: Mapping[str, Any]) -> str:
    """``agent error <type>``: an error's headline without its id or message."""
    return f"agent error {info.get('type') or info.get('class') or 'of unknown type'}"


def describe_error(info: Mapping[str, Any], *, with_id: bool = True) -> str:
    """One error (``ErrorInfo`` as JSON data) in a line: type, id, message (see
    ARCHITECTURE.md, "Agent text in messages and reports")."""
    line = error_title(info)
    if with_id and info.get("errorId"):
        line += f" (error id {info['errorId']})"
    message = error_message(info.get("message"))
    return f"{line}: {message}" if message else line


def run_errors(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run's errors as ``ErrorInfo`` data: ``errorDetails``, else the steps' errors,
    else one entry per line of the ``errors`` text (without type or id)."""
    details = [info for info in run.get("errorDetails") or [] if isinstance(info, dict)]
    if details:
        return details
    for step in run.get("steps") or []:
        details += [info for info in step.get("errors") or [] if isinstance(info, dict)]
    if details:
        return details
    text = run.get("errors") or ""
    return [{"message": line} for line in text.split("\n") if line] if isinstance(text, str) else []
