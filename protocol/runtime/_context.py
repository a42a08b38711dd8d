"""TurnContext: what an agent records about one turn, straight into its session's run.

Every execution has its requested call in its step, so ``tools`` derived from the steps
never disagrees with them. Rules: see ARCHITECTURE.md, "Recording a turn".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from .._messages import ContentPart, TextPart, ToolFault
from .._models import (
    AgentRun,
    ErrorInfo,
    Event,
    LlmProfile,
    Message,
    PendingApproval,
    PendingInterrupt,
    Step,
    StepType,
    StopSignal,
    ToolCall,
    ToolExecution,
    Usage,
)
from .._stream import (
    ApprovalRequested,
    InterruptRequested,
    StepCompleted,
    StepStarted,
    StreamEvent,
    TextDelta,
    ToolCompleted,
    ToolStarted,
    TurnFailed,
    TurnStarted,
)
from ._approvals import ApprovalRejected, ApprovalResult, Approvals
from ._control import ToolExecutionBlock, TurnControl
from ._faults import FaultPlan
from ._stamps import TOOL_ERROR_CLASS, error_info, json_arguments, json_value, new_id, utc_now
from ._suspension import approval_request, interrupt_request
from ._tool_runs import ToolRun

Listener = Callable[[StreamEvent], None]
"""What a host streaming a turn is told each event with (ARCHITECTURE.md, "Recording a turn")."""

_current: ContextVar[TurnContext | None] = ContextVar("evalport_turn_context", default=None)


def current_context() -> TurnContext | None:
    """The context of the turn running in this task or thread, if any."""
    return _current.get()


class TurnContext:
    """Records one turn of an agent into the session's accumulated :class:`AgentRun`.

    ``state`` is a dict that lives as long as the session (the same object every turn);
    ``history`` holds the earlier user and assistant messages of the session. ``message``
    is the turn's text; ``parts`` its content parts in order (:class:`TextPart`,
    :class:`ImagePart`, :class:`FilePart`; a turn without images or files has one text
    part).
    """

    __slots__ = (
        "_approvals",
        "_chunks",
        "_closed",
        "_faults",
        "_last_end",
        "_listen",
        "_loop",
        "_step",
        "_step_started",
        "history",
        "message",
        "parts",
        "run",
        "session_id",
        "started_at",
        "state",
        "stop_signal",
        "turn",
    )

    def __init__(
        self,
        *,
        run: AgentRun,
        turn: int,
        message: str,
        parts: Sequence[ContentPart] = (),
        session_id: str = "",
        history: list[Message] | None = None,
        state: dict[str, Any] | None = None,
        approvals: Approvals | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        faults: Sequence[ToolFault] = (),
        listen: Listener | None = None,
    ) -> None:
        self.run = run
        self.turn = turn
        self.message = message
        self.parts = tuple(parts) or (TextPart(text=message),)
        self.session_id = session_id
        self.history: list[Message] = history if history is not None else []
        self.state: dict[str, Any] = state if state is not None else {}
        self.stop_signal: StopSignal | None = None
        self.started_at = utc_now()
        self._approvals = approvals
        self._loop = loop
        self._step: Step | None = None
        self._step_started = time.perf_counter()
        self._last_end = self.started_at
        self._closed = False
        self._faults = FaultPlan(faults, session_id) if faults else None
        self._listen = listen
        self._chunks: list[str] = []
        if listen is not None:
            listen(TurnStarted(turn=turn))

    # -- steps --------------------------------------------------------------------------

    def model_step(
        self,
        *,
        content: Any = None,
        tool_calls: list[ToolCall] | None = None,
        finish_reason: str | None = None,
        usage: Usage | None = None,
        started_at: str | None = None,
    ) -> Step:
        """Record a model response; tool executions that follow attach to this step."""
        self._close_step()
        calls = list(tool_calls or ())
        for call in calls:
            if not call.id:
                call.id = new_id()
            call.arguments = (
                json_arguments(call.arguments)
                if isinstance(call.arguments, dict)
                else call.arguments
            )
        step = self._open_step(started_at)
        if content is not None or calls:
            step.output_messages.append(
                Message(role="assistant", content=json_value(content), tool_calls=calls or None)
            )
        step.requested_tool_calls.extend(calls)
        if calls:
            step.type = StepType.TOOL_EXECUTION
        step.finish_reason = finish_reason or ("tool_calls" if calls else None)
        if usage is not None:
            step.usage = step.usage + usage
        return step

    def request_tool_call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> ToolCall:
        """Record a tool call the model requested in the open step; returns it (with its id)."""
        call = ToolCall(id=call_id or new_id(), name=name, arguments=json_arguments(arguments))
        step = self._current_step()
        step.requested_tool_calls.append(call)
        step.type = StepType.TOOL_EXECUTION
        return call

    def usage(
        self,
        input: int = 0,
        output: int = 0,
        *,
        cache_write: int = 0,
        cache_read: int = 0,
        reasoning: int = 0,
    ) -> None:
        """Add token usage to the open step."""
        step = self._current_step()
        step.usage = step.usage + Usage(
            input=input,
            output=output,
            cache_write=cache_write,
            cache_read=cache_read,
            reasoning=reasoning,
        )

    def llm_profile(
        self,
        *,
        driver: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        context_length: int | None = None,
        max_output_length: int | None = None,
    ) -> None:
        """Declare the model behind the agent (kept on the run)."""
        self.run.llm_profile = LlmProfile(
            driver=driver,
            model=model,
            max_tokens=max_tokens,
            context_length=context_length,
            max_output_length=max_output_length,
        )

    def event(self, name: str, data: Any = None) -> None:
        """Record a named event of this turn."""
        if not self._closed:
            self.run.events.append(
                Event(name=name, turn=self.turn, at=utc_now(), data=json_value(data))
            )

    def text_delta(self, text: str) -> None:
        """Stream the next chunk of the reply as the model produces it; a turn that returns
        nothing replies with the chunks' concatenation. Without a streaming host this
        records nothing but that reply."""
        if not isinstance(text, str):
            raise TypeError(f"a reply chunk is a str, got {type(text).__name__}")
        text = str(text)  # a str subclass (a framework's) as plain text, for the wire
        if text and not self._closed:
            self._chunks.append(text)
            self._tell(TextDelta(turn=self.turn, text=text, chars=len(text)))

    @property
    def streamed(self) -> str:
        """The reply's chunks streamed so far, joined."""
        return "".join(self._chunks)

    def stop(
        self, reason: str, message: str = "", *, context: Mapping[str, Any] | None = None
    ) -> None:
        """Signal why the agent stopped; a turn that ends with a stop signal is ``stopped``.

        ``reason`` should be one of :class:`~evalport.protocol._models.StopReason`.
        """
        self.stop_signal = StopSignal(
            reason=reason, message=message, context=json_arguments(context), source="agent"
        )

    # -- tools --------------------------------------------------------------------------

    def tool_execution(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        approval: bool = False,
    ) -> ToolExecutionBlock:
        """Record a tool execution around a block: ``with ctx.tool_execution(...) as run:``.

        Set ``run.result`` in the block; an exception is recorded as the execution's error
        and propagates. With ``approval=True`` use ``async with``: the turn suspends until
        a decision arrives, and a rejection raises :class:`ApprovalRejected`.
        """
        return self._tool_block(name, arguments, call_id=call_id, approval=approval)

    def _tool_block(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        call_id: str | None = None,
        approval: bool = False,
        results: bool = False,
    ) -> ToolExecutionBlock:
        """:meth:`tool_execution`; ``results``: the caller (``@tool``) skips the tool's body
        when a result fault applies, so one may."""
        run = self._start_execution(name, arguments, call_id)
        return ToolExecutionBlock(TurnControl(self), run, approval, results)

    async def request_approval(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        reason: str | None = None,
    ) -> ApprovalResult:
        """Suspend the turn until someone approves or rejects this call; returns the decision."""
        result: ApprovalResult = await self._wait(
            approval_request(self.turn, tool, arguments, call_id, reason)
        )
        return result

    def request_approval_sync(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        reason: str | None = None,
    ) -> ApprovalResult:
        """:meth:`request_approval` for sync agents (they run in a worker thread)."""
        result: ApprovalResult = self._wait_sync(
            approval_request(self.turn, tool, arguments, call_id, reason), "request_approval_sync"
        )
        return result

    async def interrupt(self, kind: str, payload: Any = None) -> Any:
        """Stop the turn to ask something that is not a tool approval (``kind`` names it:
        ``"clarification"``, ``"choice"``, ``"form"``...; ``payload`` is any JSON value);
        returns the answer, once the session's owner posts it. The turn suspends as it does
        on an approval request; the answer is recorded in the run's ``interrupts``."""
        return await self._wait(interrupt_request(self.turn, kind, payload))

    def interrupt_sync(self, kind: str, payload: Any = None) -> Any:
        """:meth:`interrupt` for sync agents (they run in a worker thread)."""
        return self._wait_sync(interrupt_request(self.turn, kind, payload), "interrupt_sync")

    async def _wait(self, pending: PendingApproval | PendingInterrupt) -> Any:
        if self._approvals is None:
            raise RuntimeError("this turn cannot suspend: its runtime takes no approvals")
        self._tell(
            ApprovalRequested(approval=pending)
            if isinstance(pending, PendingApproval)
            else InterruptRequested(interrupt=pending)
        )
        if self._loop is not None and _running_loop() is not self._loop:
            # A sync agent in a worker thread: wait on the event loop that owns the session.
            future = asyncio.run_coroutine_threadsafe(self._register(pending), self._loop)
            return await asyncio.wrap_future(future)
        return await self._register(pending)

    def _wait_sync(self, pending: PendingApproval | PendingInterrupt, name: str) -> Any:
        if self._loop is None or _running_loop() is not None:
            raise RuntimeError(f"{name} works only in a sync agent's worker thread")
        return asyncio.run_coroutine_threadsafe(self._wait(pending), self._loop).result()

    async def _register(self, pending: PendingApproval | PendingInterrupt) -> Any:
        assert self._approvals is not None
        return await self._approvals.register(pending)

    def _start_execution(
        self, name: str, arguments: Mapping[str, Any] | None, call_id: str | None
    ) -> ToolRun:
        args = json_arguments(arguments)
        step = self._current_step()
        if call_id is None:
            call_id = _unexecuted_call(step, name)
        if call_id is None or not any(call.id == call_id for call in step.requested_tool_calls):
            call = ToolCall(id=call_id or new_id(), name=name, arguments=args)
            step.requested_tool_calls.append(call)
            call_id = call.id
        step.type = StepType.TOOL_EXECUTION
        execution = ToolExecution(
            id=new_id(), name=name, tool_call_id=call_id, arguments=args, started_at=utc_now()
        )
        if not self._closed:
            step.tool_executions.append(execution)
            self._tell(
                ToolStarted(turn=self.turn, call_id=call_id or "", name=name, arguments=args)
            )
        return ToolRun(execution)

    def _withhold(self, execution: ToolExecution) -> Step | None:
        """Take a gated execution off its step while it waits for a decision (a call
        waiting for approval is requested, never executed, on the wire: a client that
        knows nothing of approvals must not read it as run); returns that step."""
        for step in (self._step, *reversed(self.run.steps)):
            if step is not None and any(item is execution for item in step.tool_executions):
                step.tool_executions = [i for i in step.tool_executions if i is not execution]
                return step
        return None

    def _decided(self, step: Step | None, execution: ToolExecution) -> None:
        """Put a decided execution back on its step (see :meth:`_withhold`)."""
        if step is not None and not self._closed:
            step.tool_executions.append(execution)

    def _inject(self, run: ToolRun, results: bool) -> None:
        # The session's fault plan decides the call (ARCHITECTURE.md, "Tool faults").
        assert self._faults is not None
        error = self._faults.apply(self.run, run, self.turn, results=results)
        if error is not None:
            self._finish_execution(run, error)
            raise error

    def _finish_execution(self, run: ToolRun, error: BaseException | None) -> None:
        if self._closed:
            return
        execution = run.execution
        execution.completed_at = utc_now()
        if isinstance(error, ApprovalRejected):
            execution.has_error = True
            execution.error = (
                f"rejected by approver: {error.reason}" if error.reason else "rejected by approver"
            )
        elif error is not None:
            execution.has_error = True
            execution.error = str(error) or type(error).__name__
            if self._step is not None and not self._closed:
                self._step.errors.append(error_info(error, TOOL_ERROR_CLASS))
                self._step.has_errors = True
        else:
            execution.result = json_value(run.result)
        self._tell(ToolCompleted(turn=self.turn, execution=execution))

    # -- internals used by the runtime ---------------------------------------------------

    def _open_step(self, started_at: str | None = None) -> Step:
        step = Step(
            id=new_id(),
            turn=self.turn,
            index=len(self.run.steps),
            type=StepType.FINAL_RESPONSE,
            started_at=started_at or self._last_end,
        )
        if not self._closed:
            self.run.steps.append(step)
            self._tell(StepStarted(turn=self.turn, index=step.index, id=step.id))
        self._step = step
        self._step_started = time.perf_counter()
        return step

    def _current_step(self) -> Step:
        return self._step if self._step is not None else self._open_step()

    def _close_step(self) -> None:
        step = self._step
        if step is None:
            return
        now = utc_now()
        step.completed_at = now
        step.duration = round(time.perf_counter() - self._step_started, 6)
        self._last_end = now
        self._step = None
        if not self._closed:
            self._tell(StepCompleted(step=step))

    def _final_step(self, reply: str) -> Step:
        """Close the turn's steps so that its last step is the final response."""
        step = self._step
        if step is None or step.type != StepType.FINAL_RESPONSE:
            self._close_step()
            step = self._open_step()
            step.finish_reason = "stop"
        if not step.output_messages:
            step.output_messages.append(Message(role="assistant", content=reply))
        if step.finish_reason is None:
            step.finish_reason = "stop"
        step.stop_signal = self.stop_signal
        self._close_step()
        return step

    def _error_step(self, info: ErrorInfo) -> Step:
        step = self._step
        if step is None:
            step = self._open_step()
        step.type = StepType.ERROR
        step.finish_reason = "error"
        step.errors.append(info)
        step.has_errors = True
        step.stop_signal = self.stop_signal
        self._tell(TurnFailed(turn=self.turn, error=info))
        self._close_step()
        return step

    def _tell(self, event: StreamEvent) -> None:
        """Tell the streaming host ``event``, on the session's loop."""
        listen = self._listen
        if listen is None:
            return
        loop = self._loop
        if loop is not None and _running_loop() is not loop:  # a sync agent's thread
            loop.call_soon_threadsafe(listen, event)
        else:
            listen(event)

    def _activate(self) -> Any:
        return _current.set(self)

    def _close(self) -> None:
        self._closed = True
        self._step = None

    def _reopen(self) -> None:
        # The runtime records a timeout into a turn whose agent was cut off.
        self._closed = False


def _unexecuted_call(step: Step, name: str) -> str | None:
    """The first call of ``name`` the step requested that has no execution yet."""
    executed = {execution.tool_call_id for execution in step.tool_executions}
    for call in step.requested_tool_calls:
        if call.name == name and call.id not in executed:
            return call.id
    return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
