"""Small values every recording needs: ids, timestamps, JSON payloads and errors.

Rules:

- Ids are random version-4 UUIDs in canonical text (Instructor requires UUID ids). They
  name records, they are no secrets: the bits come from a generator seeded from the OS
  once per process (and again in a forked child), not from a system call per id.
- Timestamps are ISO-8601 UTC with milliseconds and a ``Z``: ``2026-01-31T12:00:00.123Z``.
- Payloads become JSON values with ``msgspec.to_builtins``; what it cannot convert is kept
  as its ``repr``, so recording never fails on an odd value.
- An exception becomes an :class:`~evalport.protocol._models.ErrorInfo`: its message, a
  neutral ``class`` (``"AgentError"`` or ``"ToolError"``, never a name a PHP client could
  instantiate) and the Python type in ``type``; never a traceback.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .._models import ErrorInfo

AGENT_ERROR_CLASS: Final = "AgentError"
TOOL_ERROR_CLASS: Final = "ToolError"

_VARIANT: Final = "89ab89ab89ab89ab"


_random = random.Random(os.urandom(32))
_bits = _random.getrandbits
os.register_at_fork(after_in_child=lambda: _random.seed(os.urandom(32)))


def new_id() -> str:
    """A random (version 4) UUID as canonical text: 122 random bits."""
    h = f"{_bits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16)]}{h[17:20]}-{h[20:]}"


_second: tuple[int, str] = (0, "")


def utc_now() -> str:
    """Now as ISO-8601 UTC with milliseconds, ``2026-01-31T12:00:00.123Z``."""
    global _second
    now = time.time()
    second = int(now)
    cached_second, prefix = _second
    if second != cached_second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = (second, prefix)
    return f"{prefix}.{int((now - second) * 1000):03d}Z"


def json_value(value: Any) -> Any:
    """``value`` as JSON data (its ``repr`` when it has no JSON form)."""
    try:
        return msgspec.to_builtins(value, str_keys=True)
    except (TypeError, ValueError, msgspec.EncodeError):
        return repr(value)


def arguments_of(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
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
