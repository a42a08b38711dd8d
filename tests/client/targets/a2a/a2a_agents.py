"""One scripted host agent, twice: behind evalport's adapter (:class:`HostAgent`) and as
an A2A server built with ``a2a-sdk`` the way its docs build one (an ``AgentExecutor``, the
default request handler, the card and JSON-RPC routes in a Starlette app).

What it does with a message: "weather" calls a ``weather`` tool and answers with its
result; "book" asks how many people (input-required / an interrupt) and books for the
answer; "boom" fails (the model is down); "refuse" is rejected (A2A only); anything else
is echoed with the message before it in the conversation, to show the context is kept.
"""

from __future__ import annotations

from typing import Any

from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from evalport.protocol.runtime import SessionInfo, TurnContext
from starlette.applications import Starlette

NAME, VERSION = "host-bot", "1.4.0"
QUESTION = "For how many people?"


def weather(city: str) -> str:
    return f"sunny in {city}"


def echo(message: str, before: str | None) -> str:
    return f"You said: {message}" + (f" (before: {before})" if before else "")


class HostAgent:
    """The agent behind evalport's adapter (a session factory: one per session)."""

    agent_name, agent_version = NAME, VERSION

    def __init__(self, info: SessionInfo) -> None:
        self.before: str | None = None

    async def turn(self, message: str, ctx: TurnContext) -> str:
        if "boom" in message:
            raise RuntimeError("the model is down")
        if "weather" in message:
            with ctx.tool_execution("weather", {"city": "Paris"}) as run:
                run.result = weather("Paris")
            return f"It is {run.result}."
        if "book" in message:
            people = await ctx.interrupt("input-required", QUESTION)
            return f"Booked a table for {people}."
        reply = echo(message, self.before)
        self.before = message
        return reply


class HostExecutor(AgentExecutor):
    """The same agent as an ``a2a-sdk`` executor; its memory is per ``contextId``."""

    def __init__(self) -> None:
        self.before: dict[str, str] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        message = context.get_user_input()
        waiting = context.current_task is not None
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await updater.start_work()
        if waiting:  # the answer to the question of this task
            await self._answer(updater, f"Booked a table for {message}.")
        elif "boom" in message:
            raise RuntimeError("the model is down")
        elif "refuse" in message:
            await updater.reject(new_text_message("I do not do that."))
        elif "weather" in message:
            await self._answer(updater, f"It is {weather('Paris')}.")
        elif "book" in message:
            await updater.requires_input(new_text_message(QUESTION))
        else:
            await self._answer(updater, echo(message, self.before.get(context_id)))
            self.before[context_id] = message

    async def _answer(self, updater: TaskUpdater, text: str) -> None:
        # Streamed in two chunks of one artifact, as a model's tokens come.
        half = len(text) // 2
        await updater.add_artifact([new_text_part(text[:half])], artifact_id="answer")
        await updater.add_artifact(
            [new_text_part(text[half:])], artifact_id="answer", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def card(*, streaming: bool = True, url: str = "http://localhost:9999/") -> AgentCard:
    """The host agent's card; its URL is what the agent was configured with, which need
    not be where a client reaches it."""
    return AgentCard(
        name=NAME,
        version=VERSION,
        description="Books tables and tells the weather.",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=url, protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="host", name="host", description="Tables, weather.", tags=["host"])],
    )


def a2a_sdk_app(**options: Any) -> Starlette:
    """The A2A server of the host agent, built as the ``a2a-sdk`` docs build one."""
    agent_card = card(**options)
    handler = DefaultRequestHandler(
        agent_executor=HostExecutor(), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    routes = [*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, rpc_url="/")]
    return Starlette(routes=routes)
