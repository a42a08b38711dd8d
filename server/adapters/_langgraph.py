"""Serve a compiled LangGraph graph over the eval protocol (``evalport[langgraph]``).

``LangGraphAgent(graph)`` is a session factory, so it goes wherever evalport takes an
agent: ``EvalAdapter(LangGraphAgent(graph), token=...)`` or ``LocalTarget(...)``. The
graph's state holds its conversation under ``messages`` (``MessagesState``, or any state
with an ``add_messages`` key named by ``messages_key``).

Rules:

- Each session is one LangGraph thread (``thread_id`` is ``evalport-<session id>``), so
  the graph's checkpointer keeps the session's history and a turn sends only the new
  user message. A graph compiled without a checkpointer is served from a copy with an
  in-memory one (``InMemorySaver``); the same holds for a graph compiled with an
  ``InMemorySaver`` of its own.
- State kept with the session, with an in-memory checkpointer: each completed turn saves
  the thread's latest checkpoint (LangGraph's own serializer, base64 in the event), and
  ``restore`` puts it back into the checkpointer on another replica, so the thread
  continues there. Each turn saves the whole state (the checkpoint holds every message):
  for long conversations, give the graph a checkpointer every replica shares (Postgres,
  Redis, SQLite on a shared disk; create it inside the server's loop, see docs/expose.md),
  and nothing is saved with the session.
- A tool that LangGraph runs again when a node resumes after an interrupt is recorded
  once, with the result of the run the graph kept. Each invocation of the graph (the
  turn's, then one per resume) records only its own tool runs, and only until it stops at
  an interrupt: a call still under way when the graph stopped (a ``ToolNode`` stops at
  the first interrupt without waiting for its other calls) may start or end while the
  resumed graph runs, and the graph keeps the resumed run, not that one. A rejected call is
  recorded as rejected (no result of its own), whatever the tool returns after
  ``interrupt()`` answered it.
- ``GraphRecursionError`` (the ``recursion_limit``) stops the turn with the
  ``steps_limit`` stop reason.
- The graph runs through ``astream`` in LangGraph's ``messages`` stream mode (subgraphs
  too): each text chunk a chat model streams (``AIMessageChunk``) goes to
  ``ctx.text_delta`` as it arrives. A model that does not stream and a message a node
  writes itself send no chunks (the reply arrives whole, as one text delta:
  :func:`~._recording.whole_reply`). A model whose streaming raises
  ``NotImplementedError`` before any model answered makes the graph run whole
  (``ainvoke``) from then on, the failed attempt resumed from its checkpoint. Every model's text streams,
  also text beside tool calls, which the reply leaves out.
- Recording is live, through a LangChain callback handler added to the run's config:
  each chat model response is a step (text, tool calls with ids and arguments, token
  usage from ``usage_metadata``, finish reason, model name); each tool run is an
  execution with its output (a ``ToolMessage``'s content, JSON text parsed back into the
  dict or list the tool returned; failed when its status is ``error``) or the error it
  raised, whatever node runs it.
- The reply is the text of the last message in the state after the turn; non-text
  content is sent as compact JSON.
- Approvals and interrupts: an ``interrupt(value)`` pauses the graph; every pending
  interrupt becomes pending approvals or a pending evalport interrupt of the turn at once
  (one suspension), and the graph resumes in the same turn with ``Command(resume=...)``.
  LangChain's ``HumanInTheLoopMiddleware`` (batched or per call) is understood: each
  gated tool call is asked under its name, arguments and call id, and answered with the
  middleware's ``approve`` / ``reject`` decisions (the reason is the rejection message).
  An interrupt raised in a tool, or naming a tool, is one approval, answered with
  ``{"approved": bool, "reason": str | None}``; any other is an evalport interrupt
  (``ctx.interrupt``) whose answer is the resume value (see :mod:`._interrupts` for how
  each is named). ``reviews="interrupts"`` asks the middleware's requests as
  ``tool_review`` interrupts instead, answered with the middleware's own decisions
  (``edit`` and ``respond`` included). Decisions are recorded on the tool's execution
  when it runs; a rejection the middleware answers without running the tool is recorded
  as a rejected execution.
- A turn's images and files (``ctx.parts``) make the ``HumanMessage``'s standard content
  blocks, in order: ``text``, ``image`` and ``file`` (``base64`` with ``mime_type``, or
  ``url``; a file keeps its name as ``filename``). A text-only turn's message stays text.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast
from uuid import UUID

from evalport.protocol import AgentRun, FilePart, ImagePart, Message, TextPart, ToolCall, require
from evalport.protocol.runtime import ApprovalResult, SessionInfo, TurnContext, utc_now

from ._interrupts import InterruptPlan, ToolCallInfo, plan_interrupt
from ._recording import (
    ApprovalAsk,
    arguments_of,
    ask_all,
    cannot_stream,
    finish_turn,
    record_execution,
    record_rejections,
    recorded_call_ids,
    reply_text,
    save_state,
    saved_states,
    step_usage,
    steps_limit,
    unreadable_state,
    whole_reply,
)

require("langgraph", "langgraph", "evalport.server.adapters._langgraph")

from langchain_core.callbacks import AsyncCallbackHandler  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.messages import content as blocks  # noqa: E402
from langchain_core.messages.ai import AIMessageChunk  # noqa: E402
from langchain_core.outputs import ChatGeneration, LLMResult  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.errors import GraphInterrupt, GraphRecursionError  # noqa: E402
from langgraph.pregel import Pregel  # noqa: E402
from langgraph.types import Command, Interrupt  # noqa: E402

FRAMEWORK = "langgraph"


class LangGraphAgent:
    """A session factory serving a compiled LangGraph graph; one thread per session."""

    def __init__(
        self,
        graph: Pregel[Any, Any, Any, Any],
        *,
        messages_key: str = "messages",
        config: Mapping[str, Any] | None = None,
        name: str | None = None,
        version: str | None = None,
        reviews: str = "approvals",
    ) -> None:
        if reviews not in ("approvals", "interrupts"):
            raise ValueError(f"reviews is 'approvals' or 'interrupts', not {reviews!r}")
        if not isinstance(graph, Pregel):
            raise TypeError(
                "LangGraphAgent serves a compiled graph (graph.compile()), "
                f"not {type(graph).__qualname__}"
            )
        if not graph.checkpointer:
            graph = graph.copy(update={"checkpointer": InMemorySaver()})
        self.graph = graph
        self.streams = True
        """Whether the graph runs streamed; false once a model raised ``NotImplementedError``
        for it."""
        saver = graph.checkpointer
        self.saver: InMemorySaver | None = saver if isinstance(saver, InMemorySaver) else None
        self.messages_key = messages_key
        self.config = dict(config or {})
        self.agent_name = name or graph.name or "langgraph-agent"
        self.agent_version = version or "0"
        self.reviews = reviews

    def declared_tools(self) -> list[str] | None:
        """The tools of the graph's ``ToolNode`` nodes (what ``/health`` lists); ``None``
        when it has none (its nodes may still call tools of their own)."""
        names = {
            str(name)
            for node in self.graph.nodes.values()
            for name in getattr(node.bound, "tools_by_name", {})
        }
        return sorted(names) or None

    def __call__(self, info: SessionInfo) -> _Session:
        return _Session(self, f"evalport-{info.session_id}")


class _Session:
    """One session: one thread of the graph."""

    __slots__ = ("_adapter", "_unreadable", "thread_id")

    def __init__(self, adapter: LangGraphAgent, thread_id: str) -> None:
        self._adapter = adapter
        self.thread_id = thread_id
        self._unreadable: RuntimeError | None = None

    def _root(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}

    async def restore(self, history: list[Message], run: AgentRun) -> None:
        """Replace the thread in the in-memory checkpointer with its latest saved checkpoint."""
        saver = self._adapter.saver
        states = saved_states(run, FRAMEWORK)
        if saver is None or not states:
            return
        await saver.adelete_thread(self.thread_id)  # what this process held is stale
        state = states[-1]
        try:
            checkpoint = _load(saver, state["checkpoint"])
            metadata = _load(saver, state["metadata"])
        except (ValueError, TypeError, KeyError) as error:
            self._unreadable = unreadable_state(FRAMEWORK, error)
            return
        await saver.aput(self._root(), checkpoint, metadata, checkpoint["channel_versions"])

    async def _save(self, ctx: TurnContext) -> None:
        saver = self._adapter.saver
        if saver is None:
            return
        saved = await saver.aget_tuple(self._root())
        if saved is None:
            return
        save_state(
            ctx,
            FRAMEWORK,
            {
                "checkpoint": _dump(saver, saved.checkpoint),
                "metadata": _dump(saver, saved.metadata),
            },
        )

    async def turn(self, message: str, ctx: TurnContext) -> str:
        if self._unreadable is not None:
            raise self._unreadable
        try:
            reply = await self._turn(message, ctx)
        except GraphRecursionError as error:
            return steps_limit(ctx, error)
        finally:
            finish_turn(ctx)
        await self._save(ctx)
        return reply

    async def _turn(self, message: str, ctx: TurnContext) -> str:
        adapter = self._adapter
        recorder = _Recorder(ctx, adapter.reviews)
        base = adapter.config
        callbacks = [*(base.get("callbacks") or []), recorder]
        configurable = {**base.get("configurable", {}), "thread_id": self.thread_id}
        config = cast(RunnableConfig, {**base, "configurable": configurable})
        payload: Any = {adapter.messages_key: [_human(message, ctx)]}
        while True:
            attempt = cast(
                RunnableConfig, {**config, "callbacks": [*callbacks, recorder.attempt()]}
            )
            if not await _attempt(adapter, ctx, payload, attempt, recorder):
                payload = None if isinstance(payload, dict) else payload  # the input is in
                continue
            snapshot = await adapter.graph.aget_state(config)
            if not snapshot.interrupts:
                break
            payload = Command(resume=await _decide(ctx, snapshot.interrupts, recorder))
        messages = snapshot.values.get(adapter.messages_key) or []
        return whole_reply(ctx, _reply(messages[-1]) if messages else "")


async def _attempt(
    adapter: LangGraphAgent,
    ctx: TurnContext,
    payload: Any,
    config: RunnableConfig,
    recorder: _Recorder,
) -> bool:
    """Run the graph on ``payload`` until it ends or interrupts, streaming its models'
    text while they can stream; ``False`` when a model turned out unable to stream before
    any answered (the graph then runs whole, from its checkpoint)."""
    if not adapter.streams:
        await adapter.graph.ainvoke(payload, config)
        return True
    stream = adapter.graph.astream(payload, config, stream_mode="messages", subgraphs=True)
    try:
        async for _, (chunk, _) in cast(AsyncIterator[Any], stream):  # ns, (message, meta)
            if isinstance(chunk, AIMessageChunk):
                ctx.text_delta(str(chunk.text))  # plain str: ``text`` is a str subclass
    except Exception as error:
        if not cannot_stream(error) or recorder.responses:
            raise
        adapter.streams = False
        return False
    return True


async def _decide(
    ctx: TurnContext, interrupts: tuple[Interrupt, ...], recorder: _Recorder
) -> dict[str, Any]:
    plans = [recorder.plan_for(interrupt) for interrupt in interrupts]
    recorder.superseded()
    questions = [plan for plan in plans if plan.question is not None]
    # One suspension: requests made in the same scheduling pass join it.
    decisions, answers = await asyncio.gather(
        ask_all(ctx, [ask for plan in plans if plan.question is None for ask in plan.asks]),
        asyncio.gather(*(ctx.interrupt(*plan.question) for plan in questions if plan.question)),
    )
    answered = {plan.interrupt_id: answer for plan, answer in zip(questions, answers, strict=True)}
    for plan in questions:
        for ask, decision in plan.reviewed(answered[plan.interrupt_id]):
            _record_review(ctx, ask, decision)
    recorder.decisions.update(decisions)
    record_rejections(
        ctx, [ask for plan in plans if plan.skips_rejected for ask in plan.asks], decisions
    )
    return {
        plan.interrupt_id: plan.resume(decisions, answered.get(plan.interrupt_id)) for plan in plans
    }


def _record_review(ctx: TurnContext, ask: ApprovalAsk, decision: Mapping[str, Any]) -> None:
    """A reviewed call the middleware does not run: recorded as rejected, or with the
    reviewer's stand-in result."""
    message = decision.get("message")
    if decision.get("type") == "reject":
        reason = message if isinstance(message, str) else None
        rejected = ApprovalResult(approved=False, reason=reason)
        record_execution(ctx, ask.tool, ask.arguments, call_id=ask.call_id, decision=rejected)
    elif decision.get("type") == "respond":
        record_execution(ctx, ask.tool, ask.arguments, call_id=ask.call_id, result=message)


def _dump(saver: InMemorySaver, value: Any) -> list[str]:
    kind, data = saver.serde.dumps_typed(value)
    return [kind, base64.b64encode(data).decode()]


def _load(saver: InMemorySaver, saved: list[str]) -> Any:
    kind, data = saved
    return saver.serde.loads_typed((kind, base64.b64decode(data)))


def _content_value(content: Any) -> Any:
    """A tool message's content; JSON text LangChain made of a dict or list is parsed back."""
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _human(message: str, ctx: TurnContext) -> HumanMessage:
    """The turn's user message (see the module rules)."""
    if all(isinstance(part, TextPart) for part in ctx.parts):
        return HumanMessage(message)
    content: list[Any] = []
    for part in ctx.parts:
        if isinstance(part, TextPart):
            content.append(blocks.create_text_block(part.text))
            continue
        make = (
            blocks.create_image_block if isinstance(part, ImagePart) else blocks.create_file_block
        )
        where: dict[str, Any] = {"url": part.url}
        if isinstance(part.data, bytes):
            where = {"base64": base64.b64encode(part.data).decode()}
        if part.media_type:
            where["mime_type"] = part.media_type
        if isinstance(part, FilePart) and part.name:
            where["filename"] = part.name
        content.append(make(**where))
    return HumanMessage(content_blocks=content)


def _reply(message: Any) -> str:
    if isinstance(message, BaseMessage):
        content = message.content
        if isinstance(content, str):
            return content
        return message.text or reply_text(content)
    return reply_text(message)


class _Attempt(AsyncCallbackHandler):
    """One invocation of the graph: hands its tool runs to the turn's recorder while it is
    the current one (see the module rules). A sync tool's callbacks run in its worker
    thread: each is handed over on the turn's event loop, so recording never races."""

    raise_error = True

    def __init__(self, recorder: _Recorder) -> None:
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


class _Recorder(AsyncCallbackHandler):
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
        self.current: _Attempt | None = None
        self.responses = 0  # model responses recorded

    def attempt(self) -> _Attempt:
        """The callback handler of the graph's next invocation, whose tool runs are recorded."""
        self.current = _Attempt(self)
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
            result = _content_value(output.content)
            if output.status == "error":
                result, error = None, _reply(output)
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
