"""A tool execution in progress, and the block that records it (``ctx.tool_execution()``).

The recording rules are :mod:`evalport.protocol.runtime._context`'s; this module holds the two
objects a recorded call goes through: the :class:`ToolRun` the agent's code sets its
result on, and the block that opens it (approval first, when gated), consults the
session's fault plan, and closes it with the result or the error.
"""

from __future__ import annotations

from typing import Any

from .._models import ToolExecution


class ToolRun:
    """A tool execution in progress; set :attr:`result` before the block ends."""

    __slots__ = ("execution", "result")

    def __init__(self, execution: ToolExecution) -> None:
        self.execution = execution
        self.result: Any = None
