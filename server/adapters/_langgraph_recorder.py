"""What one LangGraph turn records, live, through LangChain callback handlers (the rules:
:class:`~._langgraph.LangGraphAgent`). A sync tool's callbacks run in its worker thread
and are handed to the turn's loop, so recording never races.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from evalport.protocol import ToolCall, require
from evalport.protocol.runtime import ApprovalResult, TurnContext, utc_now

from ._interrupts import InterruptPlan, ToolCallInfo, plan_interrupt
from ._recording import arguments_of, record_execution, recorded_call_ids, reply_text, step_usage

require("langgraph", "langgraph", "evalport.server.adapters._langgraph")

from langchain_core.callbacks import AsyncCallbackHandler  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, LLMResult  # noqa: E402
from langgraph.errors import GraphInterrupt  # noqa: E402
from langgraph.types import Interrupt  # noqa: E402


def reply_of(message: Any) -> str:
    if isinstance(message, BaseMessage):
        content = message.content
        if isinstance(content, str):
            return content
        return message.text or reply_text(content)
    return reply_text(message)


def content_value(content: Any) -> Any:
    """A tool message's content; JSON text LangChain made of a dict or list is parsed back."""
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


class Attempt(AsyncCallbackHandler):
    """One invocation of the graph: hands its tool runs to the turn's recorder while it is
    the current one. A sync tool's callbacks run in its worker thread: each is handed
    over on the turn's event loop, so recording never races."""

    raise_error = True

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.loop = asyncio.get_running_loop()

    def _hand(self, record: Callable[..., None], *args: Any) -> None:
        def hand() -> None:
            if self.recorder.current is self:
                record(*args)

        self.loop.call_soon_threadsafe(hand)

    async def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._hand(self.recorder.tool_started, serialized, input_str, run_id, inputs, kwargs)

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._hand(self.recorder.tool_ended, output, run_id)

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._hand(self.recorder.tool_failed, error, run_id)


class Recorder(AsyncCallbackHandler):
    """Records chat model responses and tool runs into the turn context as they happen."""

    raise_error = True

    def __init__(self, ctx: TurnContext, reviews: str = "approvals") -> None:
        self.ctx = ctx
        self.reviews = reviews
        self.decisions: dict[str, ApprovalResult] = {}
        self._model_started: dict[UUID, str] = {}
        self._tools: dict[UUID, tuple[str, dict[str, Any], str | None, str]] = {}
        self._interrupted: dict[str, ToolCallInfo] = {}
        self._last_calls: list[ToolCall] = []
        self.current: Attempt | None = None
        self.responses = 0  # model responses recorded

    def attempt(self) -> Attempt:
        """The callback handler of the graph's next invocation, whose tool runs are recorded."""
        self.current = Attempt(self)
        return self.current

    def superseded(self) -> None:
        """The graph stopped at an interrupt: tool runs still under way belong to an attempt
        it will run again on resume; their late starts and ends are not recorded."""
        self.current = None
        self._tools.clear()

    def plan_for(self, interrupt: Interrupt) -> InterruptPlan:
        """The approvals one interrupt asks for (see :mod:`._interrupts`)."""
        return plan_interrupt(
            interrupt.id,
            interrupt.value,
            raised_in=self._interrupted.get(interrupt.id),
            pending_calls=self._last_calls,
            reviews=self.reviews,
        )

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self._model_started[run_id] = utc_now()

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        started_at = self._model_started.pop(run_id, None)
        for generations in response.generations:
            for generation in generations:
                if isinstance(generation, ChatGeneration) and isinstance(
                    generation.message, AIMessage
                ):
                    self._step(generation.message, started_at)

    def _step(self, message: AIMessage, started_at: str | None) -> None:
        calls = [
            ToolCall(id=call.get("id") or None, name=call["name"], arguments=dict(call["args"]))
            for call in message.tool_calls
        ]
        usage: Mapping[str, Any] = message.usage_metadata or {}
        inputs = usage.get("input_token_details") or {}
        outputs = usage.get("output_token_details") or {}
        metadata = message.response_metadata or {}
        content = message.content if isinstance(message.content, str) else message.text
        self._last_calls = calls
        self.responses += 1
        self.ctx.model_step(
            content=content or None,
            tool_calls=calls,
            finish_reason=metadata.get("finish_reason") or metadata.get("stop_reason"),
            usage=step_usage(
                usage.get("input_tokens"),
                usage.get("output_tokens"),
                cache_read=inputs.get("cache_read"),
                cache_write=inputs.get("cache_creation"),
                reasoning=outputs.get("reasoning"),
            ),
            started_at=started_at,
        )
        model = metadata.get("model_name") or metadata.get("model")
        if isinstance(model, str) and model:
            provider = metadata.get("model_provider") or metadata.get("ls_provider")
            self.ctx.llm_profile(
                driver=provider if isinstance(provider, str) else None, model=model
            )

    def tool_started(
        self,
        serialized: dict[str, Any],
        input_str: str,
        run_id: UUID,
        inputs: dict[str, Any] | None,
        kwargs: Mapping[str, Any],
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        arguments = dict(inputs) if inputs is not None else arguments_of(input_str)
        call_id = kwargs.get("tool_call_id")
        self._tools[run_id] = (str(name), arguments, call_id, utc_now())

    def tool_ended(self, output: Any, run_id: UUID) -> None:
        started = self._tools.pop(run_id, None)
        if started is None:
            return
        name, arguments, call_id, started_at = started
        result, error = output, None
        if isinstance(output, ToolMessage):
            result = content_value(output.content)
            if output.status == "error":
                result, error = None, reply_of(output)
        self._record(name, arguments, call_id, started_at, result=result, error=error)

    def tool_failed(self, error: BaseException, run_id: UUID) -> None:
        started = self._tools.pop(run_id, None)
        if started is None:
            return
        name, arguments, call_id, started_at = started
        if isinstance(error, GraphInterrupt):
            # Not a failure: the tool waits for a decision and runs again after it.
            for interrupt in error.args[0] if error.args else ():
                self._interrupted[interrupt.id] = ToolCallInfo(name, arguments, call_id)
            return
        self._record(name, arguments, call_id, started_at, error=error)

    def _record(
        self,
        name: str,
        arguments: dict[str, Any],
        call_id: str | None,
        started_at: str,
        *,
        result: Any = None,
        error: str | BaseException | None = None,
    ) -> None:
        decision = self.decisions.get(call_id or "")
        if (
            decision is not None
            and not decision.approved
            and call_id in recorded_call_ids(self.ctx)
        ):
            return  # the rejection is recorded already (the middleware did not run it)
        record_execution(
            self.ctx,
            name,
            arguments,
            call_id=call_id,
            result=result,
            error=error,
            decision=decision,
            started_at=started_at,
            replace=True,
        )
