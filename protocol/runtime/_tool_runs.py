"""A tool execution in progress, and the block that records it (``ctx.tool_execution()``)."""

from __future__ import annotations

from typing import Any

from .._models import ToolExecution


class ToolRun:
    """A tool execution in progress; set :attr:`result` before the block ends."""

    __slots__ = ("execution", "result")

    def __init__(self, execution: ToolExecution) -> None:
        self.execution = execution
        self.result: Any = None
