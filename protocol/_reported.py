"""Tool arguments and token counts as model APIs and agent frameworks report them.

Rules: see ARCHITECTURE.md, "Shared below the server and the client".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, overload

from ._models import Usage


@overload
def arguments_of(value: Any, *, keep_text: Literal[False] = False) -> dict[str, Any]: ...
@overload
def arguments_of(value: Any, *, keep_text: Literal[True]) -> dict[str, Any] | str: ...
def arguments_of(value: Any, *, keep_text: bool = False) -> dict[str, Any] | str:
    """Tool arguments as a dict: JSON text is parsed, a non-object is kept under ``value``
    (or, with ``keep_text``, text that holds no JSON object stays that text)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str | bytes):
        text = value if isinstance(value, str) else value.decode(errors="replace")
        try:
            value = json.loads(value)
        except ValueError:
            return text if keep_text else {"value": text}
        if keep_text and not isinstance(value, Mapping):
            return text
    if isinstance(value, Mapping):
        return dict(value)
    return {"value": value}


def step_usage(
    input: int | None,
    output: int | None,
    *,
    cache_read: int | None = 0,
    cache_write: int | None = 0,
    reasoning: int | None = 0,
) -> Usage:
    """A step's disjoint usage from inclusive counts (``None`` counts as 0)."""
    read, write, thought = cache_read or 0, cache_write or 0, reasoning or 0
    return Usage(
        input=max((input or 0) - read - write, 0),
        output=max((output or 0) - thought, 0),
        cache_read=read,
        cache_write=write,
        reasoning=thought,
    )
