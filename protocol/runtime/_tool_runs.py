"""A tool execution in progress, and the block that records it (``ctx.tool_execution()``).

The recording rules are :mod:`evalport.protocol.runtime._context`'s; this module holds the two
objects a recorded call goes through: the :class:`ToolRun` the agent's code sets its
result on, and the block that opens it (approval first, when gated), consults the
session's fault plan, and closes it with the result or the error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._models import ToolExecution

if TYPE_CHECKING:
    from ._control import TurnControl


class ToolRun:
    """A tool execution in progress; set :attr:`result` before the block ends."""

    __slots__ = ("execution", "result")

    def __init__(self, execution: ToolExecution) -> None:
        self.execution = execution
        self.result: Any = None


class ToolExecutionBlock:
    """``with`` records a tool execution; ``async with`` may also ask for approval first."""

    __slots__ = ("_approval", "_control", "_results", "_run")

    def __init__(self, control: TurnControl, run: ToolRun, approval: bool, results: bool) -> None:
        self._control = control
        self._run = run
        self._approval = approval
        self._results = results  # whether the body can be skipped for a result fault (@tool)

    def __enter__(self) -> ToolRun:
        if self._approval:
            raise RuntimeError("a tool execution that needs approval must use 'async with'")
        if self._control.has_faults:
            self._control.inject(self._run, self._results)
        return self._run

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        self._control.finish_execution(self._run, error)

    async def __aenter__(self) -> ToolRun:
        if self._approval:
            try:
                await self._control.gate(self._run)
            except BaseException as error:
                self._control.finish_execution(self._run, error)
                raise
        if self._control.has_faults:
            self._control.inject(self._run, self._results)
        return self._run

    async def __aexit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        self._control.finish_execution(self._run, error)

    def gate_sync(self) -> None:
        """Ask for approval from a worker thread before ``with`` (a sync ``@tool``)."""
        try:
            self._control.gate_sync(self._run)
        except BaseException as error:
            self._control.finish_execution(self._run, error)
            raise
