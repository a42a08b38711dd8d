"""One AG-UI run read into evalport's run: the events an agent streams, the run they make.

A run that fails on the way changes nothing of the session. Rules: see ARCHITECTURE.md,
"An AG-UI run".
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Final

import jsonpatch
import msgspec
from ag_ui.core import (
    AssistantMessage,
    CustomEvent,
    Event,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from evalport.protocol import (
    AgentRun,
    Approval,
    ApprovalDecision,
    ApprovalState,
    ErrorInfo,
    ProtocolError,
    RunStatus,
    Step,
    StepType,
    StopReason,
    StopSignal,
    ToolExecution,
)
from evalport.protocol import Event as RunEvent
from evalport.protocol import Message as RunMessage
from evalport.protocol import ToolCall as RunToolCall
from evalport.protocol._reported import arguments_of
from evalport.protocol.runtime import utc_now

from ._agui_outcome import record_interrupts, record_usage, requested
from ._agui_wire import Conversation

AGENT_ERROR: Final = "AgentError"  # the error class the runtime gives an agent's failure
STATE_EVENT: Final = "state"


class RunReader:
    """Reads one AG-UI run's events into ``run`` (the session's verbatim run, turn
    ``turn``) and a copy of the conversation, committed by :meth:`finish`."""

    def __init__(
        self,
        run: AgentRun,
        conversation: Conversation,
        messages: list[Message],
        decisions: dict[str, ApprovalDecision] | None = None,
    ) -> None:
        self.run = run
        self.turn = run.turns
        self.conversation = conversation
        self.messages = messages  # this run's copy of the conversation
        self.state = conversation.state
        self.state_changed = False
        self.decisions = decisions or {}
        self.first_step = len(run.steps)
        self.step: Step | None = None
        self.step_started = 0.0
        self.after_result = False
        self.texts: dict[str, list[str]] = {}
        self.last_text_id: str | None = None
        self.calls: dict[str, tuple[Step, int, list[str]]] = {}  # id -> step, index, args
        self.last_call_id: str | None = None
        self.ended: set[str] = set()
        self.reply = ""
        self.known = {message.id for message in messages}  # the messages before this run
        self.unstreamed = ""
        self.finished: RunFinishedEvent | RunErrorEvent | None = None
        self._record_rejections()

    # -- reading -------------------------------------------------------------------------

    def feed(self, event: Event) -> bool:
        """Apply one event; ``True`` once the run's terminal event came."""
        if isinstance(event, RunFinishedEvent | RunErrorEvent):
            self.finished = event
            return True
        handler = self.HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)
        return False

    def _model_step(self) -> Step:
        """The step of the model call that is writing now (a new one after a tool result)."""
        if self.step is not None and not self.after_result:
            return self.step
        self._close_step()
        run = self.run
        step = Step(
            id=str(uuid.uuid4()),
            turn=self.turn,
            index=len(run.steps),
            type=StepType.FINAL_RESPONSE,
            started_at=utc_now(),
        )
        run.steps.append(step)
        self.step, self.step_started, self.after_result = step, time.perf_counter(), False
        return step

    def _close_step(self) -> None:
        step = self.step
        if step is not None and step.completed_at is None:
            step.completed_at = utc_now()
            step.duration = round(time.perf_counter() - self.step_started, 6)
            if step.finish_reason is None:
                step.finish_reason = "tool_calls" if step.requested_tool_calls else "stop"

    def _text_start(self, event: TextMessageStartEvent) -> None:
        if event.role not in (None, "assistant"):
            return
        self._model_step()
        self.texts[event.message_id] = []
        self.last_text_id = event.message_id
        self._message(event.message_id)

    def _text_content(self, event: TextMessageContentEvent) -> None:
        parts = self.texts.get(event.message_id)
        if parts is None:  # content without its start: the start is implied
            self._text_start(TextMessageStartEvent(message_id=event.message_id))
            parts = self.texts[event.message_id]
        parts.append(event.delta)

    def _text_end(self, event: TextMessageEndEvent) -> None:
        parts = self.texts.pop(event.message_id, None)
        if parts is None:
            return
        text = "".join(parts)
        message = self._message(event.message_id)
        message.content = text
        if text:
            step = self.step if self.step is not None else self._model_step()
            step.output_messages.append(RunMessage(role="assistant", content=text))
            self.reply = text

    def _text_chunk(self, event: TextMessageChunkEvent) -> None:
        # A chunk stands for start, content and end: a new id ends the previous message.
        message_id = event.message_id or self.last_text_id or uuid.uuid4().hex
        if message_id not in self.texts:
            if self.last_text_id in self.texts and self.last_text_id != message_id:
                self._text_end(TextMessageEndEvent(message_id=self.last_text_id or ""))
            self._text_start(TextMessageStartEvent(message_id=message_id, role=event.role))
        if event.delta and message_id in self.texts:
            self.texts[message_id].append(event.delta)

    def _call_start(self, event: ToolCallStartEvent) -> None:
        step = self._model_step()
        step.requested_tool_calls.append(
            RunToolCall(id=event.tool_call_id, name=event.tool_call_name, arguments={})
        )
        step.type = StepType.TOOL_EXECUTION
        self.calls[event.tool_call_id] = (step, len(step.requested_tool_calls) - 1, [])
        self.last_call_id = event.tool_call_id
        parent = self._message(event.parent_message_id or self.last_text_id or uuid.uuid4().hex)
        parent.tool_calls = [
            *(parent.tool_calls or ()),
            ToolCall(
                id=event.tool_call_id,
                function=FunctionCall(name=event.tool_call_name, arguments=""),
            ),
        ]

    def _call_args(self, event: ToolCallArgsEvent) -> None:
        held = self.calls.get(event.tool_call_id)
        if held is not None:
            held[2].append(event.delta)

    def _call_end(self, event: ToolCallEndEvent) -> None:
        held = self.calls.get(event.tool_call_id)
        if held is None or event.tool_call_id in self.ended:
            return
        self.ended.add(event.tool_call_id)
        text = "".join(held[2])
        self._arguments(event.tool_call_id, text)
        for message in self.messages:
            for call in getattr(message, "tool_calls", None) or ():
                if call.id == event.tool_call_id:
                    call.function.arguments = text

    def _arguments(self, call_id: str, text: str) -> None:
        """Set the arguments of call ``call_id`` (and of its execution, if it ran)."""
        step, index, _ = self.calls[call_id]
        arguments = arguments_of(text)
        step.requested_tool_calls[index].arguments = arguments
        for execution in step.tool_executions:
            if execution.tool_call_id == call_id:
                execution.arguments = arguments

    def _call_chunk(self, event: ToolCallChunkEvent) -> None:
        call_id = event.tool_call_id or self.last_call_id
        if call_id is None:
            return
        if call_id not in self.calls:
            if self.last_call_id is not None and self.last_call_id != call_id:
                self._call_end(ToolCallEndEvent(tool_call_id=self.last_call_id))
            self._call_start(
                ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=event.tool_call_name or "",
                    parent_message_id=event.parent_message_id,
                )
            )
        if event.delta:
            self.calls[call_id][2].append(event.delta)

    def _call_result(self, event: ToolCallResultEvent) -> None:
        self.messages.append(
            ToolMessage(id=event.message_id, tool_call_id=event.tool_call_id, content=event.content)
        )
        self.after_result = True
        found = requested(self.run, self.turn, event.tool_call_id)
        if found is None:
            return  # a result for a call this run never saw asked: nothing to attach it to
        step, call = found
        if any(item.tool_call_id == event.tool_call_id for item in step.tool_executions):
            return  # a rejected call, recorded when the rejection was sent
        now = utc_now()
        execution = ToolExecution(
            id=str(uuid.uuid4()),
            name=call.name,
            tool_call_id=call.id,
            arguments=call.arguments,
            result=_result(event.content),
            started_at=now,
            completed_at=now,
        )
        decision = self.decisions.get(event.tool_call_id)
        if decision is not None:
            execution.approval = Approval(
                state=ApprovalState.APPROVED, reason=decision.reason, decided_at=now
            )
        step.tool_executions.append(execution)

    def _record_rejections(self) -> None:
        """A rejected call is an execution that failed at once, whether or not the agent
        sends a result for it (as the runtime records a rejection)."""
        for call_id, decision in self.decisions.items():
            found = requested(self.run, self.turn, call_id)
            if decision.decision != "reject" or found is None:
                continue
            step, call = found
            now = utc_now()
            reason = decision.reason
            step.tool_executions.append(
                ToolExecution(
                    id=str(uuid.uuid4()),
                    name=call.name,
                    tool_call_id=call.id,
                    arguments=call.arguments,
                    has_error=True,
                    error=f"rejected by approver: {reason}" if reason else "rejected by approver",
                    started_at=now,
                    completed_at=now,
                    approval=Approval(state=ApprovalState.REJECTED, reason=reason, decided_at=now),
                )
            )

    def _state_snapshot(self, event: StateSnapshotEvent) -> None:
        self.state, self.state_changed = copy.deepcopy(event.snapshot), True

    def _state_delta(self, event: StateDeltaEvent) -> None:
        patch = [operation.model_dump(by_alias=True) for operation in event.delta]
        try:
            self.state = jsonpatch.apply_patch(self.state, patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise ProtocolError(
                f"an AG-UI STATE_DELTA does not apply to the state so far: {error}"
            ) from None
        self.state_changed = True

    def _messages_snapshot(self, event: MessagesSnapshotEvent) -> None:
        self.messages[:] = event.messages
        # Some agents stream a call's start and end but put its arguments only in the
        # snapshot (ag-ui-langgraph, for a model that sends them in one chunk).
        for message in event.messages:
            for call in getattr(message, "tool_calls", None) or ():
                held = self.calls.get(call.id)
                if held is not None and not held[2] and call.function.arguments:
                    held[2].append(call.function.arguments)
                    self._arguments(call.id, call.function.arguments)
        # An answer the agent did not stream (a LangGraph node's own message) is in the
        # snapshot only: the last message, from the assistant, new in this run.
        last = event.messages[-1] if event.messages else None
        if (
            isinstance(last, AssistantMessage)
            and isinstance(last.content, str)
            and last.content
            and last.id not in self.known
        ):
            self.unstreamed = last.content

    def _framework_step(self, event: StepStartedEvent | StepFinishedEvent) -> None:
        name = "step_started" if isinstance(event, StepStartedEvent) else "step_finished"
        self._event(name, {"name": event.step_name})

    def _custom(self, event: CustomEvent) -> None:
        self._event(event.name, event.value)

    def _event(self, name: str, data: Any) -> None:
        self.run.events.append(RunEvent(name=name, turn=self.turn, at=utc_now(), data=data))

    def _message(self, message_id: str) -> AssistantMessage:
        """The assistant message ``message_id`` of the conversation, added if new."""
        for message in reversed(self.messages):
            if message.id == message_id and isinstance(message, AssistantMessage):
                return message
        message = AssistantMessage(id=message_id)
        self.messages.append(message)
        return message

    # -- the end -------------------------------------------------------------------------

    def finish(self) -> None:
        """Record the run's outcome on ``run`` and commit the conversation (see
        ARCHITECTURE.md, "An AG-UI run")."""
        finished = self.finished
        if finished is None:
            raise ValueError("finish() before the run's terminal event")
        for message_id in list(self.texts):
            self._text_end(TextMessageEndEvent(message_id=message_id))
        if not self.reply and self.unstreamed:  # the answer came in a snapshot only
            step = self._model_step()
            step.output_messages.append(RunMessage(role="assistant", content=self.unstreamed))
            self.reply = self.unstreamed
        for call_id in list(self.calls):
            self._call_end(ToolCallEndEvent(tool_call_id=call_id))
        self._close_step()
        run = self.run
        record_usage(run, self.first_step, finished.usage)
        opened: dict[str, str] = {}
        if isinstance(finished, RunErrorEvent):
            self._failed(finished)
        elif isinstance(finished.outcome, RunFinishedInterruptOutcome):
            opened = record_interrupts(run, self.turn, finished.outcome.interrupts)
        elif isinstance(finished.outcome, RunFinishedCancelledOutcome):
            run.status, run.reply = RunStatus.STOPPED, self.reply
            run.stop_signal = StopSignal(
                reason=StopReason.STOP_REQUESTED, message="the AG-UI run was cancelled"
            )
        else:
            run.status, run.reply = RunStatus.COMPLETED, self.reply
            run.stop_signal = StopSignal(reason=StopReason.COMPLETED)
        if self.state_changed:
            self._event(STATE_EVENT, copy.deepcopy(self.state))
        run.sync_tools()
        run.sync_usage()
        conversation = self.conversation
        conversation.messages, conversation.state = self.messages, self.state
        conversation.open = opened

    def _failed(self, error: RunErrorEvent) -> None:
        run = self.run
        info = ErrorInfo(message=error.message, error_class=AGENT_ERROR, type=error.code)
        step = self.step if self.step is not None else self._model_step()
        self._close_step()
        step.type, step.finish_reason, step.has_errors = StepType.ERROR, "error", True
        step.errors.append(info)
        run.status, run.reply = RunStatus.FAILED, ""
        run.stop_signal = StopSignal(reason=StopReason.ERROR, message=error.message)
        run.error_details.append(info)
        text = f"{error.code or AGENT_ERROR}: {error.message}"
        run.errors = f"{run.errors}\n{text}" if run.errors else text

    # Plain functions, not bound methods: a table of these on the instance would be a
    # cycle per run, which only the collector frees (with the run's messages).
    HANDLERS: ClassVar[dict[type[Any], Callable[[RunReader, Any], None]]] = {
        TextMessageStartEvent: _text_start,
        TextMessageContentEvent: _text_content,
        TextMessageEndEvent: _text_end,
        TextMessageChunkEvent: _text_chunk,
        ToolCallStartEvent: _call_start,
        ToolCallArgsEvent: _call_args,
        ToolCallEndEvent: _call_end,
        ToolCallChunkEvent: _call_chunk,
        ToolCallResultEvent: _call_result,
        StateSnapshotEvent: _state_snapshot,
        StateDeltaEvent: _state_delta,
        MessagesSnapshotEvent: _messages_snapshot,
        StepStartedEvent: _framework_step,
        StepFinishedEvent: _framework_step,
        CustomEvent: _custom,
    }


def _result(content: Any) -> Any:
    """A tool result as the run records it (see ARCHITECTURE.md, "An AG-UI run")."""
    if isinstance(content, str):
        if content.lstrip()[:1] in ("{", "["):
            try:
                return msgspec.json.decode(content)
            except msgspec.DecodeError:
                return content
        return content
    return [part.model_dump(by_alias=True) for part in content]
