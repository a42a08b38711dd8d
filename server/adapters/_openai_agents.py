"""Serve an OpenAI Agents SDK ``Agent`` (:class:`OpenAIAgentsAgent`,
``evalport[openai-agents]``).
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from evalport.protocol import AgentRun, ImagePart, Message, TextPart, ToolCall, require
from evalport.protocol.runtime import ApprovalResult, SessionInfo, ToolRun, TurnContext, utc_now

from ._recording import (
    ApprovalAsk,
    arguments_of,
    ask_all,
    cannot_stream,
    finish_turn,
    mark_decision,
    record_execution,
    record_rejections,
    reply_text,
    save_state,
    saved_states,
    step_usage,
    steps_limit,
    unreadable_state,
    whole_reply,
)

require("agents", "openai-agents", "evalport.server.adapters._openai_agents")

import pydantic_core  # noqa: E402
from agents import (  # noqa: E402
    Agent,
    RawResponsesStreamEvent,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunResult,
    RunResultStreaming,
)
from agents.exceptions import AgentsException, MaxTurnsExceeded  # noqa: E402
from agents.handoffs import Handoff  # noqa: E402
from agents.items import ModelResponse, ToolApprovalItem, TResponseInputItem  # noqa: E402
from agents.run_config import ToolErrorFormatterArgs  # noqa: E402
from agents.tool import Tool  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseTextDeltaEvent,
)

FRAMEWORK = "openai-agents"


class OpenAIAgentsAgent:
    """A session factory serving an Agents SDK ``Agent``; one conversation per session.

    It goes wherever evalport takes an agent (``EvalAdapter(OpenAIAgentsAgent(agent),
    token=...)``, ``LocalTarget(...)``).

    - Each session keeps its own conversation (``result.to_input_list()`` of its last turn)
      and sends it, with the new message, as the next run's input; ``context`` (a callable
      taking the :class:`~evalport.protocol.runtime.SessionInfo`) gives each session its own run
      context object.
    - The run streams (``Runner.run_streamed``): each text delta of a model response
      (``ResponseTextDeltaEvent``) goes to ``ctx.text_delta`` as it arrives. Every response's
      text streams, also text beside tool calls, which the reply (the final output) leaves out.
      A model whose ``stream_response`` raises ``NotImplementedError`` (scripted and custom
      models often do) is run whole (``Runner.run``) from then on: the turn that found out
      runs again whole when the model had answered nothing yet, and a reply that streamed
      nothing goes as one text delta (:func:`~._recording.whole_reply`).
    - Recording is live, through the SDK's run hooks: each model response (``on_llm_end``)
      is a step with its text, function calls (call ids, arguments), token usage and the
      response id; each local tool invocation (``on_tool_start`` / ``on_tool_end``) is an
      execution with its result. A tool that raised is recorded as failed with the exception's
      text: the adapter wraps ``RunConfig.tool_error_formatter`` (yours still decides what the
      model sees). Tools with their own ``failure_error_function`` report failures as results.
    - Hand-offs: each is an event (``handoff`` with ``from`` and ``to``) and an execution of
      the model's transfer call (its result is what the SDK tells the model,
      ``{"assistant": name}``); the agent handed off to answers the session's next turns
      (the SDK's ``last_agent``). The model is the run's LLM profile when the agent names it.
    - State kept with the session: the input items each completed turn added
      (``to_input_list()``) and the name of the current agent. On another replica
      ``restore`` joins the items and finds the agent by name among those reachable from the
      starting agent through handoffs, or among ``agents=`` (needed for a handoff declared
      with ``handoff(...)``, whose agent the SDK does not expose); a name found in neither
      fails the next turn with a message naming it.
    - ``MaxTurnsExceeded`` stops the turn with the ``steps_limit`` stop reason. A tool that
      raised is recorded with its own exception (type and message), not the SDK's
      ``UserError`` around it; so is the turn's error when the tool's failure ends the run.
    - Approvals: when a run stops with ``interruptions`` (tools with ``needs_approval``),
      every pending call becomes a pending approval of the turn at once; the decisions go to
      ``RunState.approve`` / ``reject`` (the approver's reason is the rejection message the
      model sees) and the run resumes in the same turn. The rejection is recorded on the
      call; an approval on the execution that follows.
    - A final output that is not ``str`` is sent as compact JSON.
    - A turn's images and files (``ctx.parts``) go to the run as the user item's content
      list, in order: ``input_text``, ``input_image`` (``image_url``: the URL, or a ``data:``
      URL of the inline bytes; ``detail`` ``auto``) and ``input_file`` (``file_url``, or
      ``file_data`` as a ``data:`` URL with the file's name). A text-only turn's content stays
      its message.
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        context: Callable[[SessionInfo], Any] | None = None,
        run_config: RunConfig | None = None,
        max_turns: int | None = None,
        agents: Iterable[Agent[Any]] = (),
        name: str | None = None,
        version: str | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(
                f"OpenAIAgentsAgent serves an agents.Agent, not {type(agent).__qualname__}"
            )
        self.agent = agent
        self.agents = list(agents)
        self.context = context
        self.run_config = run_config or RunConfig()
        self.max_turns = max_turns
        self.agent_name = name or agent.name
        self.agent_version = version or "0"
        self.streams = True
        """Whether runs stream; false once the model raised ``NotImplementedError`` for it."""

    def __call__(self, info: SessionInfo) -> _Session:
        return _Session(self, self.context(info) if self.context is not None else None)

    def find_agent(self, name: str) -> Agent[Any] | None:
        """The agent called ``name``: among ``agents``, or reachable through handoffs."""
        queue = [*self.agents, self.agent]
        seen: set[int] = set()
        while queue:
            agent = queue.pop(0)
            if id(agent) in seen:
                continue
            seen.add(id(agent))
            if agent.name == name:
                return agent
            queue.extend(item for item in agent.handoffs if isinstance(item, Agent))
        return None

    def declared_tools(self) -> list[str]:
        """The tools of the agents this one reaches (``agents`` too, and through handoffs),
        and its handoffs' transfer tools: what ``/health`` lists."""
        names: set[str] = set()
        queue, seen = [*self.agents, self.agent], set()
        while queue:
            agent = queue.pop(0)
            if id(agent) in seen:
                continue
            seen.add(id(agent))
            names.update(str(getattr(tool, "name", "")) for tool in agent.tools)
            names.update(_handoff_targets(agent))
            queue.extend(item for item in agent.handoffs if isinstance(item, Agent))
        return sorted(name for name in names if name)


class _Session:
    """One session: its conversation items, current agent and run context."""

    __slots__ = ("_adapter", "_lost_agent", "_unreadable", "agent", "context", "history")

    def __init__(self, adapter: OpenAIAgentsAgent, context: Any) -> None:
        self._adapter = adapter
        self.context = context
        self.history: list[TResponseInputItem] = []
        self.agent: Agent[Any] = adapter.agent
        self._lost_agent: str | None = None
        self._unreadable: RuntimeError | None = None

    def restore(self, history: list[Message], run: AgentRun) -> None:
        """Rebuild the conversation and the current agent from the session's saved states."""
        states = saved_states(run, FRAMEWORK)
        items: list[TResponseInputItem] = []
        for state in states:
            part = state.get("items")
            if not isinstance(part, list):
                self._unreadable = unreadable_state(FRAMEWORK, TypeError("items are not a list"))
                return
            items.extend(part)
        self.history = items
        name = states[-1].get("agent") if states else None
        if isinstance(name, str) and name != self.agent.name:
            found = self._adapter.find_agent(name)
            if found is None:
                self._lost_agent = name
            else:
                self.agent = found

    async def turn(self, message: str, ctx: TurnContext) -> str:
        if self._unreadable is not None:
            raise self._unreadable
        if self._lost_agent is not None:
            raise LookupError(
                f"the session continues with agent {self._lost_agent!r}, which is not reachable "
                f"from {self._adapter.agent.name!r} through Agent handoffs: pass it in "
                "OpenAIAgentsAgent(..., agents=[...])"
            )
        adapter = self._adapter
        hooks = _Hooks(ctx)
        config = dataclasses.replace(
            adapter.run_config,
            tool_error_formatter=_formatter(hooks, adapter.run_config.tool_error_formatter),
        )
        options: dict[str, Any] = {"hooks": hooks, "run_config": config, "context": self.context}
        if adapter.max_turns is not None:
            options["max_turns"] = adapter.max_turns
        first: list[TResponseInputItem] = [{"role": "user", "content": _content(message, ctx)}]
        try:
            result = await self._run(ctx, [*self.history, *first], options, hooks)
            while result.interruptions:
                state = result.to_state()
                await _decide(ctx, state, result.interruptions, hooks)
                result = await self._run(ctx, state, options, hooks)
        except MaxTurnsExceeded as error:
            hooks.abandon(error)
            return steps_limit(ctx, error)
        except Exception as error:
            own = tool_error(error)
            hooks.abandon(own)
            if own is not error:
                raise own from None
            raise
        finally:
            finish_turn(ctx)
        items = result.to_input_list()
        added = pydantic_core.to_jsonable_python(items[len(self.history) :])
        self.history = items
        self.agent = result.last_agent
        save_state(ctx, FRAMEWORK, {"items": added, "agent": self.agent.name})
        return whole_reply(ctx, reply_text(pydantic_core.to_jsonable_python(result.final_output)))

    async def _run(
        self, ctx: TurnContext, given: Any, options: dict[str, Any], hooks: _Hooks
    ) -> RunResult | RunResultStreaming:
        """One run of the SDK: streamed while the model can stream, else whole."""
        adapter = self._adapter
        if adapter.streams:
            try:
                return await _streamed(ctx, Runner.run_streamed(self.agent, given, **options))
            except Exception as error:
                if not cannot_stream(error) or hooks.responses:
                    raise
                adapter.streams = False  # the model answered nothing: run it whole from now on
        return await Runner.run(self.agent, given, **options)


async def _streamed(ctx: TurnContext, result: RunResultStreaming) -> RunResultStreaming:
    """Run ``result``'s streamed run to its end, streaming its text; returns it."""
    async for event in result.stream_events():
        if isinstance(event, RawResponsesStreamEvent) and isinstance(
            event.data, ResponseTextDeltaEvent
        ):
            ctx.text_delta(event.data.delta)
    return result


def tool_error(error: BaseException) -> BaseException:
    """The tool's own exception inside the SDK's wrapper (``UserError ... from e``), else ``error``."""
    cause = error.__cause__
    if (
        isinstance(error, AgentsException)
        and cause is not None
        and not isinstance(cause, AgentsException)
    ):
        return cause
    return error


def _content(message: str, ctx: TurnContext) -> Any:
    """The user item's content (see :class:`OpenAIAgentsAgent`)."""
    if all(isinstance(part, TextPart) for part in ctx.parts):
        return message
    content: list[dict[str, Any]] = []
    for part in ctx.parts:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
            continue
        url = part.url
        if isinstance(part.data, bytes):
            url = f"data:{part.media_type};base64,{base64.b64encode(part.data).decode()}"
        if isinstance(part, ImagePart):
            content.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif isinstance(part.data, bytes):
            name = part.name or "file"
            content.append({"type": "input_file", "file_data": url, "filename": name})
        else:
            content.append({"type": "input_file", "file_url": url})
    return content


async def _decide(
    ctx: TurnContext, state: Any, items: list[ToolApprovalItem], hooks: _Hooks
) -> None:
    asks = [
        ApprovalAsk(item.call_id or "", item.name or "tool", arguments_of(item.arguments))
        for item in items
    ]
    decisions = await ask_all(ctx, asks)
    hooks.decisions.update(decisions)
    record_rejections(ctx, asks, decisions)
    for ask, item in zip(asks, items, strict=True):
        decision = decisions[ask.call_id]
        if decision.approved:
            state.approve(item)
        else:
            state.reject(item, rejection_message=decision.reason)


def _formatter(hooks: _Hooks, inner: Any) -> Callable[[ToolErrorFormatterArgs[Any]], Any]:
    async def format_error(args: ToolErrorFormatterArgs[Any]) -> str | None:
        if args.kind == "tool_exception" and args.error is not None:
            hooks.failures[args.call_id] = tool_error(args.error)
        if inner is None:
            return None
        message = inner(args)
        if inspect.isawaitable(message):
            message = await message
        return message if isinstance(message, str) else None

    return format_error


class _Hooks(RunHooks[Any]):
    """Records model responses, tool invocations and hand-offs into the turn context."""

    def __init__(self, ctx: TurnContext) -> None:
        self.ctx = ctx
        self.decisions: dict[str, ApprovalResult] = {}
        self.failures: dict[str, BaseException] = {}
        self._handoffs: dict[str, ToolCall] = {}  # transfer calls asked for, by target agent
        self._running: dict[str, tuple[Any, ToolRun]] = {}
        self._llm_started: str | None = None
        self.responses = 0  # model responses recorded

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        self._llm_started = utc_now()

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        self.responses += 1
        texts: list[str] = []
        calls: list[ToolCall] = []
        for item in response.output:
            if isinstance(item, ResponseOutputMessage):
                texts.extend(
                    part.text if hasattr(part, "text") else getattr(part, "refusal", "")
                    for part in item.content
                )
            elif isinstance(item, ResponseFunctionToolCall):
                calls.append(
                    ToolCall(
                        id=item.call_id, name=item.name, arguments=arguments_of(item.arguments)
                    )
                )
        targets = _handoff_targets(agent)
        for call in calls:
            if call.name in targets:
                self._handoffs[targets[call.name]] = call
        usage = response.usage
        self.ctx.model_step(
            content="".join(texts) or None,
            tool_calls=calls,
            usage=step_usage(
                usage.input_tokens,
                usage.output_tokens,
                cache_read=usage.input_tokens_details.cached_tokens,
                cache_write=getattr(usage.input_tokens_details, "cache_write_tokens", 0),
                reasoning=usage.output_tokens_details.reasoning_tokens,
            ),
            started_at=self._llm_started,
        )
        if isinstance(agent.model, str):
            self.ctx.llm_profile(driver="openai-agents", model=agent.model)

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        call_id, name, arguments = _tool_call(context, tool)
        block = self.ctx.tool_execution(name, arguments, call_id=call_id)
        run = block.__enter__()
        mark_decision(run.execution, self.decisions.get(call_id or ""))
        self._running[call_id or name] = (block, run)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        call_id, name, arguments = _tool_call(context, tool)
        started = self._running.pop(call_id or name, None)
        failure = self.failures.pop(call_id or "", None)
        if started is None:  # a tool the SDK ran without announcing its start
            record_execution(
                self.ctx, name, arguments, call_id=call_id, result=result, error=failure
            )
            return
        block, run = started
        if failure is None:
            run.result = result
            block.__exit__(None, None, None)
        else:
            block.__exit__(type(failure), failure, None)

    def abandon(self, error: BaseException) -> None:
        """The run raised: tools still running failed with it (their end never comes)."""
        running, self._running = self._running, {}
        for block, _ in running.values():
            block.__exit__(type(error), error, None)

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        self.ctx.event("handoff", {"from": from_agent.name, "to": to_agent.name})
        call = self._handoffs.pop(to_agent.name, None)
        if call is not None:
            record_execution(
                self.ctx,
                call.name,
                call.arguments if isinstance(call.arguments, dict) else None,
                call_id=call.id,
                result={"assistant": to_agent.name},
            )


def _handoff_targets(agent: Agent[Any]) -> dict[str, str]:
    """The agent's transfer tool names and the agent each hands off to."""
    targets: dict[str, str] = {}
    for item in agent.handoffs:
        if isinstance(item, Handoff):
            targets[item.tool_name] = item.agent_name
        elif isinstance(item, Agent):
            targets[Handoff.default_tool_name(item)] = item.name
    return targets


def _tool_call(context: RunContextWrapper[Any], tool: Tool) -> tuple[str | None, str, Any]:
    if isinstance(context, ToolContext):
        return context.tool_call_id, context.tool_name, arguments_of(context.tool_arguments)
    return None, getattr(tool, "name", type(tool).__name__), {}
