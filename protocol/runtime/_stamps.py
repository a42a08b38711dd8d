"""Ids, timestamps, JSON payloads and error records that every recording needs.

Recording never fails on an odd value and never keeps a traceback. Rules: see
ARCHITECTURE.md, "Recording a turn".
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from .._models import ErrorInfo

AGENT_ERROR_CLASS: Final = "AgentError"
TOOL_ERROR_CLASS: Final = "ToolError"


def new_id() -> str:
    """A random (version 4) UUID as canonical text."""
    return str(uuid.uuid4())


def utc_now() -> str:
    """Now as ISO-8601 UTC with milliseconds, ``2026-01-31T12:00:00.123Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_value(value: Any) -> Any:
    """``value`` as JSON data (its ``repr`` when it has no JSON form)."""
    try:
        return msgspec.to_builtins(value, str_keys=True)
    except (TypeError, ValueError, msgspec.EncodeError):
        return repr(value)


def json_arguments(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Tool arguments as a JSON object (a non-map value lands under ``"value"``)."""
    if not arguments:
        return {}
    converted = json_value(dict(arguments))
    return converted if isinstance(converted, dict) else {"value": converted}


def error_info(error: BaseException, error_class: str = AGENT_ERROR_CLASS) -> ErrorInfo:
    """An exception as the run records it: message and type, no traceback."""
    kind = type(error)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    return ErrorInfo(message=str(error) or kind.__name__, error_class=error_class, type=name)
