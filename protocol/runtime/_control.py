"""The runtime's handle on a turn's context: what the session and tool blocks do to it.

The agent's code never calls it, so none of it is on :class:`TurnContext`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._models import Approval, ApprovalState, ErrorInfo, Step, ToolExecution
from ._approvals import ApprovalRejected, ApprovalResult
from ._faults import FaultPlan
from ._stamps import utc_now
from ._tool_runs import ToolRun


class Recorder(Protocol):
    """What the control drives of a :class:`TurnContext` (its private half)."""

    _faults: FaultPlan | None

    def _activate(self) -> Any: ...
    def _close(self) -> None: ...
    def _reopen(self) -> None: ...
    def _final_step(self, reply: str) -> Step: ...
    def _error_step(self, info: ErrorInfo) -> Step: ...
    def _tool_block(
        self, name: str, arguments: Mapping[str, Any] | None, *, approval: bool, results: bool
    ) -> ToolExecutionBlock: ...
    def _inject(self, run: ToolRun, results: bool) -> None: ...
    def _finish_execution(self, run: ToolRun, error: BaseException | None) -> None: ...
    def _withhold(self, execution: ToolExecution) -> Step | None: ...
    def _decided(self, step: Step | None, execution: ToolExecution) -> None: ...
    async def request_approval(
        self, tool: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ApprovalResult: ...
    def request_approval_sync(
        self, tool: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ApprovalResult: ...


class TurnControl:
    """The runtime's handle on one turn's context."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: Recorder) -> None:
        self.ctx = ctx

    def activate(self) -> Any:
        """Make the context current (a context variable token)."""
        return self.ctx._activate()

    def close(self) -> None:
        """End recording: later steps, executions and events are discarded."""
        self.ctx._close()

    def reopen(self) -> None:
        """Record again (a timed-out turn's failure is recorded after it closed)."""
        self.ctx._reopen()

    def final_step(self, reply: str) -> Step:
        """Close the open step and record the final response step with ``reply``."""
        return self.ctx._final_step(reply)

    def error_step(self, info: ErrorInfo) -> Step:
        """Close the open step and record a step for the turn's error."""
        return self.ctx._error_step(info)

    def tool_block(
        self, name: str, arguments: Mapping[str, Any] | None, *, approval: bool = False
    ) -> ToolExecutionBlock:
        """:meth:`TurnContext.tool_execution` for ``@tool``, which skips the tool's body when
        a result fault applies, so one may."""
        return self.ctx._tool_block(name, arguments, approval=approval, results=True)

    @property
    def has_faults(self) -> bool:
        """Whether the session carries a fault plan."""
        return self.ctx._faults is not None

    async def gate(self, run: ToolRun) -> None:
        """Ask for approval of a tool execution and wait for the decision."""
        execution = run.execution
        execution.approval = Approval(state=ApprovalState.PENDING)
        step = self.ctx._withhold(execution)
        try:
            decision = await self.ctx.request_approval(
                execution.name,
                execution.arguments if isinstance(execution.arguments, dict) else None,
                call_id=execution.tool_call_id,
            )
        finally:
            self.ctx._decided(step, execution)
        _decided(run, decision)

    def gate_sync(self, run: ToolRun) -> None:
        """:meth:`gate` from a worker thread."""
        execution = run.execution
        execution.approval = Approval(state=ApprovalState.PENDING)
        step = self.ctx._withhold(execution)
        try:
            decision = self.ctx.request_approval_sync(
                execution.name,
                execution.arguments if isinstance(execution.arguments, dict) else None,
                call_id=execution.tool_call_id,
            )
        finally:
            self.ctx._decided(step, execution)
        _decided(run, decision)

    def inject(self, run: ToolRun, results: bool) -> None:
        """Apply the fault plan to a tool execution (``results``: a result may replace it)."""
        self.ctx._inject(run, results)

    def finish_execution(self, run: ToolRun, error: BaseException | None) -> None:
        """Record a tool execution's end, with its result or ``error``."""
        self.ctx._finish_execution(run, error)


def _decided(run: ToolRun, decision: ApprovalResult) -> None:
    execution = run.execution
    state = ApprovalState.APPROVED if decision.approved else ApprovalState.REJECTED
    execution.approval = Approval(state=state, reason=decision.reason, decided_at=utc_now())
    if not decision.approved:
        raise ApprovalRejected(execution.name, decision.reason)
    execution.started_at = utc_now()


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
