"""Serve a pydantic-ai ``Agent`` (:class:`PydanticAIAgent`, ``evalport[pydantic-ai]``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evalport.protocol import AgentRun, ImagePart, Message, TextPart, ToolCall, require
from evalport.protocol.runtime import ApprovalResult, SessionInfo, TurnContext, utc_now

from ._recording import (
    ApprovalAsk,
    ask_all,
    cannot_stream,
    finish_turn,
    mark_decision,
    record_rejections,
    reply_text,
    save_state,
    saved_states,
    step_usage,
    steps_limit,
    unreadable_state,
    whole_reply,
)

require("pydantic_ai", "pydantic-ai", "evalport.server.adapters._pydantic_ai")

import pydantic_core  # noqa: E402
from pydantic_ai import Agent, RunContext, UsageLimitExceeded  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability, on_event  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPartDelta,
    ToolCallPart,
    UserContent,
)
from pydantic_ai.messages import TextPart as ResponseText  # noqa: E402
from pydantic_ai.models import Model  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402
from pydantic_ai.tools import (  # noqa: E402
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402
from pydantic_ai.usage import UsageLimits  # noqa: E402

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext


_DENIED = "The tool call was denied."
FRAMEWORK = "pydantic-ai"


class PydanticAIAgent:
    """A session factory serving a pydantic-ai ``Agent``; one message history per session.

    It goes wherever evalport takes an agent (``EvalAdapter(PydanticAIAgent(agent),
    token=...)``, ``LocalTarget(...)``).

    - Each session keeps its own message history (``result.all_messages()`` of its last
      turn) and passes it to the next run; ``deps`` (a callable taking the
      :class:`~evalport.protocol.runtime.SessionInfo`) gives each session its own dependencies.
    - The run streams when its model can: the recording capability then listens to
      pydantic-ai's event stream (``on_event``), which makes ``agent.run`` stream every model
      request, and each text chunk of a response goes to ``ctx.text_delta`` as it arrives.
      A model that cannot stream (one without ``request_stream``, a ``FunctionModel``
      without a ``stream_function``) runs as before, its reply arriving whole, as one text
      delta (:func:`~._recording.whole_reply`); so does, from then on, a model whose streaming
      raised ``NotImplementedError`` before it answered anything (that turn runs again whole). Every
      response's text streams, also text beside tool calls, which the reply (the last
      response's text) leaves out.
    - Recording is live, through a pydantic-ai capability added to every run: each model
      response is a step (its text, its function tool calls with their ids and arguments,
      its finish reason and token usage, the model and provider names as the run's LLM
      profile); each tool execution is recorded around the tool itself, with its result or
      the error it raised (a ``ModelRetry`` or ``ToolFailed`` counts as an error). Output
      tools are pydantic-ai's way of returning structured output, not tool calls, so they
      are left out.
    - Approvals: the run also accepts ``DeferredToolRequests`` as output. When tools ask for
      approval (``requires_approval=True`` or ``ApprovalRequired``), every such call becomes
      a pending approval of the turn at once; after the decisions the run resumes with
      ``DeferredToolResults`` in the same turn. A rejection sends the approver's reason to
      the model as ``ToolDenied`` and is recorded on the call; an approval is recorded on the
      execution that follows. Calls deferred for *external* execution cannot be served and
      fail the turn with a clear error.
    - State kept with the session: the messages each completed turn added to the history
      (pydantic-ai's own JSON form, ``ModelMessagesTypeAdapter``); ``restore`` joins them
      again on another replica. ``deps`` are made anew there from the session's info.
    - ``usage_limits`` go to every run; a ``UsageLimitExceeded`` (``request_limit``, say)
      stops the turn with the ``steps_limit`` stop reason.
    - A reply that is not ``str`` (structured output) is sent as compact JSON.
    - A turn's images and files (``ctx.parts``) go to the run as pydantic-ai user content,
      in order: inline bytes as ``BinaryContent``, URLs as ``ImageUrl`` / ``DocumentUrl``,
      text as ``str``. A text-only turn's prompt stays its message.
    """

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        deps: Callable[[SessionInfo], Any] | None = None,
        usage_limits: UsageLimits | None = None,
        name: str | None = None,
        version: str | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(
                f"PydanticAIAgent serves a pydantic_ai.Agent, not {type(agent).__qualname__}"
            )
        self.agent = agent
        self.deps = deps
        self.usage_limits = usage_limits
        self.agent_name = name or agent.name or "pydantic-ai-agent"
        self.agent_version = version or "0"
        self.streams = True
        """Whether runs may stream; false once the model raised ``NotImplementedError`` for it."""
        self._output_type = _with_deferred(agent.output_type)

    def declared_tools(self) -> list[str]:
        """The function tools of the agent's toolsets: what ``/health`` lists."""
        return sorted(
            name
            for toolset in self.agent.toolsets
            if isinstance(toolset, FunctionToolset)
            for name in toolset.tools
        )

    def __call__(self, info: SessionInfo) -> _Session:
        return _Session(self, self.deps(info) if self.deps is not None else None)


class _Session:
    """One session: its message history and dependencies."""

    __slots__ = ("_adapter", "_unreadable", "deps", "history")

    def __init__(self, adapter: PydanticAIAgent, deps: Any) -> None:
        self._adapter = adapter
        self.deps = deps
        self.history: list[ModelMessage] = []
        self._unreadable: RuntimeError | None = None

    def restore(self, history: list[Message], run: AgentRun) -> None:
        """Rebuild the message history from the states the session's turns saved."""
        try:
            self.history = [
                message
                for state in saved_states(run, FRAMEWORK)
                for message in ModelMessagesTypeAdapter.validate_python(state.get("messages", []))
            ]
        except (ValueError, TypeError) as error:
            self._unreadable = unreadable_state(FRAMEWORK, error)

    async def turn(self, message: str, ctx: TurnContext) -> str:
        if self._unreadable is not None:
            raise self._unreadable
        agent = self._adapter.agent
        streams = self._adapter.streams and _streams(agent.model)
        recorder = (_StreamingRecorder if streams else _Recorder)(ctx)
        prompt: str | list[UserContent] | None = _prompt(message, ctx)
        history = self.history
        results: DeferredToolResults | None = None
        try:
            while True:
                try:
                    result = await agent.run(
                        prompt,
                        message_history=history,
                        deferred_tool_results=results,
                        output_type=self._adapter._output_type,
                        deps=self.deps,
                        usage_limits=self._adapter.usage_limits,
                        capabilities=[recorder],
                    )
                except Exception as error:
                    if not streams or recorder.responses or not cannot_stream(error):
                        raise
                    # the model answered nothing: it cannot stream after all, run it whole
                    self._adapter.streams = streams = False
                    recorder = _Recorder(ctx)
                    continue
                history = result.all_messages()
                output = result.output
                if not isinstance(output, DeferredToolRequests):
                    break
                results = await _decide(ctx, output, recorder)
                prompt = None
        except UsageLimitExceeded as error:
            return steps_limit(ctx, error)
        finally:
            finish_turn(ctx)
        added = history[len(self.history) :]
        self.history = history
        save_state(
            ctx, FRAMEWORK, {"messages": ModelMessagesTypeAdapter.dump_python(added, mode="json")}
        )
        return whole_reply(ctx, reply_text(pydantic_core.to_jsonable_python(output)))


def _prompt(message: str, ctx: TurnContext) -> str | list[UserContent]:
    """The turn's user content (see :class:`PydanticAIAgent`)."""
    if all(isinstance(part, TextPart) for part in ctx.parts):
        return message
    content: list[UserContent] = []
    for part in ctx.parts:
        if isinstance(part, TextPart):
            content.append(part.text)
        elif isinstance(part.data, bytes):
            content.append(BinaryContent(data=part.data, media_type=str(part.media_type)))
        else:
            media_type = part.media_type or None
            made = ImageUrl if isinstance(part, ImagePart) else DocumentUrl
            content.append(made(url=str(part.url), media_type=media_type))
    return content


async def _decide(
    ctx: TurnContext, requests: DeferredToolRequests, recorder: _Recorder
) -> DeferredToolResults:
    if requests.calls:
        names = ", ".join(sorted({call.tool_name for call in requests.calls}))
        raise RuntimeError(
            f"the agent deferred {names} for external execution, which a served agent cannot "
            "do; let the tool run in process or ask for approval instead"
        )
    asks = [
        ApprovalAsk(
            call.tool_call_id,
            call.tool_name,
            call.args_as_dict(),
            _reason(requests.metadata.get(call.tool_call_id)),
        )
        for call in requests.approvals
    ]
    decisions = await ask_all(ctx, asks)
    recorder.decisions.update(decisions)
    record_rejections(ctx, asks, decisions)
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {
        call_id: True if decision.approved else ToolDenied(decision.reason or _DENIED)
        for call_id, decision in decisions.items()
    }
    return DeferredToolResults(approvals=approvals)


def _reason(metadata: dict[str, Any] | None) -> str | None:
    reason = (metadata or {}).get("reason")
    return reason if isinstance(reason, str) else None


def _with_deferred(output_type: Any) -> Any:
    """The agent's output type, also accepting ``DeferredToolRequests``."""
    types = list(output_type) if isinstance(output_type, list | tuple) else [output_type]
    if DeferredToolRequests in types:
        return output_type
    return [*types, DeferredToolRequests]


def _streams(model: object) -> bool:
    """Whether the agent's model streams (a model named by a string always does)."""
    if not isinstance(model, Model):
        return True
    method = type(model).request_stream
    if isinstance(model, FunctionModel) and method is FunctionModel.request_stream:
        return model.stream_function is not None
    return method is not Model.request_stream


class _Recorder(AbstractCapability[Any]):
    """Records model responses and tool executions into the turn context as they happen."""

    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        self.decisions: dict[str, ApprovalResult] = {}
        self.responses = 0  # model responses recorded

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: Any,
    ) -> ModelResponse:
        started_at = utc_now()
        response: ModelResponse = await handler(request_context)
        self.responses += 1
        output_tools = {tool.name for tool in request_context.model_request_parameters.output_tools}
        calls = [
            ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_dict())
            for part in response.parts
            if isinstance(part, ToolCallPart) and part.tool_name not in output_tools
        ]
        usage = response.usage
        self.ctx.model_step(
            content=response.text,
            tool_calls=calls,
            finish_reason=response.finish_reason,
            usage=step_usage(
                usage.input_tokens,
                usage.output_tokens,
                cache_read=usage.cache_read_tokens,
                cache_write=usage.cache_write_tokens,
                reasoning=usage.output_reasoning_tokens,
            ),
            started_at=started_at,
        )
        if response.model_name:
            self.ctx.llm_profile(driver=response.provider_name, model=response.model_name)
        return response

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: Any,
        args: Any,
        handler: Any,
    ) -> Any:
        block = self.ctx.tool_execution(
            call.tool_name, call.args_as_dict(), call_id=call.tool_call_id
        )
        with block as run:
            mark_decision(run.execution, self.decisions.get(call.tool_call_id))
            run.result = await handler(args)
        return run.result


class _StreamingRecorder(_Recorder):
    """:class:`_Recorder`, and each text chunk of a response streams as it arrives (the
    event listeners make pydantic-ai stream the run)."""

    @on_event(PartStartEvent)
    async def _text_started(self, ctx: RunContext[Any], event: PartStartEvent) -> None:
        if isinstance(event.part, ResponseText):
            self.ctx.text_delta(event.part.content)

    @on_event(PartDeltaEvent)
    async def _text_went_on(self, ctx: RunContext[Any], event: PartDeltaEvent) -> None:
        if isinstance(event.delta, TextPartDelta):
            self.ctx.text_delta(event.delta.content_delta)
