"""Serve a compiled LangGraph graph (:class:`LangGraphAgent`, ``evalport[langgraph]``)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from evalport.protocol import AgentRun, FilePart, ImagePart, Message, TextPart, require
from evalport.protocol.runtime import ApprovalResult, SessionInfo, TurnContext

from ._langgraph_recorder import Recorder, reply_of
from ._recording import (
    ApprovalAsk,
    ask_all,
    cannot_stream,
    finish_turn,
    record_execution,
    record_rejections,
    save_state,
    saved_states,
    steps_limit,
    unreadable_state,
    whole_reply,
)

require("langgraph", "langgraph", "evalport.server.adapters._langgraph")

from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_core.messages import content as blocks  # noqa: E402
from langchain_core.messages.ai import AIMessageChunk  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.errors import GraphRecursionError  # noqa: E402
from langgraph.pregel import Pregel  # noqa: E402
from langgraph.types import Command, Interrupt  # noqa: E402

FRAMEWORK = "langgraph"


class LangGraphAgent:
    """A session factory serving a compiled LangGraph graph; one thread per session.

    It goes wherever evalport takes an agent (``EvalAdapter(LangGraphAgent(graph),
    token=...)``, ``LocalTarget(...)``). The graph's state holds its conversation under
    ``messages`` (``MessagesState``, or any state with an ``add_messages`` key named by
    ``messages_key``).

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
      (``ctx.interrupt``) whose answer is the resume value (how each is named:
      :func:`~._interrupts.plan_interrupt`). ``reviews="interrupts"`` asks the middleware's requests as
      ``tool_review`` interrupts instead, answered with the middleware's own decisions
      (``edit`` and ``respond`` included). Decisions are recorded on the tool's execution
      when it runs; a rejection the middleware answers without running the tool is recorded
      as a rejected execution.
    - A turn's images and files (``ctx.parts``) make the ``HumanMessage``'s standard content
      blocks, in order: ``text``, ``image`` and ``file`` (``base64`` with ``mime_type``, or
      ``url``; a file keeps its name as ``filename``). A text-only turn's message stays text.
    """

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
        recorder = Recorder(ctx, adapter.reviews)
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
        return whole_reply(ctx, reply_of(messages[-1]) if messages else "")


async def _attempt(
    adapter: LangGraphAgent,
    ctx: TurnContext,
    payload: Any,
    config: RunnableConfig,
    recorder: Recorder,
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
    ctx: TurnContext, interrupts: tuple[Interrupt, ...], recorder: Recorder
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


def _human(message: str, ctx: TurnContext) -> HumanMessage:
    """The turn's user message (see :class:`LangGraphAgent`)."""
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
