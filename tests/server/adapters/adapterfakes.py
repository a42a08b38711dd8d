"""Each framework's own offline test double, driven by a planner.

A planner is ``plan(users, results) -> list[Call] | str``: given every user message the
model was sent and the ``(tool, output)`` pairs after the last one, it returns the tool
calls to make or the text to answer (see :func:`adapterkit.plan`). Every response
reports ``adapterkit.usage_of`` tokens. Each double reads the conversation exactly as
its framework sent it, so a planner sees the real history and tool results.

- pydantic-ai: ``FunctionModel`` (with ``ALLOW_MODEL_REQUESTS`` off in the tests);
- OpenAI Agents SDK: ``agents.testing.ScriptedModel`` with a responder step per call;
- LangGraph: a LangChain ``BaseChatModel`` subclass with ``bind_tools``.

The adapters always stream, so each double streams its answer's text in chunks (see
:func:`chunks`) while reporting exactly the usage it would without streaming.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from adapterkit import Call, usage_of


def _call_id() -> str:
    """A call id unique across models and processes (replicas share one conversation)."""
    return f"call-{uuid.uuid4().hex[:12]}"


Planner = Callable[[Sequence[str], Sequence[tuple[str, str]]], "list[Call] | str"]


def chunks(text: str) -> list[str]:
    """How the doubles stream ``text``: word by word, each word with its trailing spaces."""
    return re.findall(r"\s*\S+\s*", text) or [text]


def streaming_function_model(function: Any, **options: Any) -> Any:
    """A pydantic-ai ``FunctionModel`` on ``function`` whose streamed requests replay the
    response it returns, its text in :func:`chunks` (``FunctionModel``'s own
    ``stream_function`` would estimate the usage, these doubles report theirs)."""
    from contextlib import asynccontextmanager

    from pydantic_ai.messages import (
        ModelResponse,
        ModelResponseStreamEvent,
        PartDeltaEvent,
        PartEndEvent,
        PartStartEvent,
        TextPart,
        TextPartDelta,
    )
    from pydantic_ai.models import CompletedStreamedResponse
    from pydantic_ai.models.function import FunctionModel

    def replayed(response: ModelResponse) -> list[ModelResponseStreamEvent]:
        events: list[ModelResponseStreamEvent] = []
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                first, *rest = chunks(part.content)
                events.append(PartStartEvent(index=index, part=TextPart(first)))
                events += [PartDeltaEvent(index=index, delta=TextPartDelta(c)) for c in rest]
            else:
                events.append(PartStartEvent(index=index, part=part))
            events.append(PartEndEvent(index=index, part=part))
        return events

    class StreamingFunctionModel(FunctionModel):
        @asynccontextmanager
        async def request_stream(
            self,
            messages: Any,
            model_settings: Any,
            model_request_parameters: Any,
            run_context: Any = None,
        ) -> Any:
            response = await self.request(messages, model_settings, model_request_parameters)
            yield CompletedStreamedResponse(
                response,
                model_request_parameters=model_request_parameters,
                replay_events=replayed(response),
            )

    return StreamingFunctionModel(function, **options)


def function_model(plan: Planner) -> Any:
    """A pydantic-ai ``FunctionModel`` answering with ``plan`` (streamed in chunks)."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.usage import RequestUsage

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        users: list[str] = []
        results: list[tuple[str, str]] = []
        for message in messages:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    users.append(part.content)
                    results = []
                elif isinstance(part, ToolReturnPart):
                    results.append((part.tool_name, part.model_response_str()))
        action = plan(users, results)
        usage = usage_of(action)
        request_usage = RequestUsage(
            input_tokens=usage.input,
            output_tokens=usage.output,
            cache_read_tokens=usage.cache_read,
            output_reasoning_tokens=usage.reasoning,
        )
        if isinstance(action, str):
            return ModelResponse(parts=[TextPart(action)], usage=request_usage)
        parts = [ToolCallPart(call.name, call.arguments) for call in action]
        return ModelResponse(parts=parts, usage=request_usage)

    return streaming_function_model(respond, model_name="planned")


Pause = Callable[[], Awaitable[None]]


def streaming_scripted_model(steps: Sequence[Any], pause: Pause | None = None) -> Any:
    """An Agents SDK ``ScriptedModel`` on ``steps`` whose streamed text deltas come in
    :func:`chunks` (the SDK's own streams each text as one delta), awaiting ``pause``
    between two chunks."""
    from agents.testing import ScriptedModel
    from openai.types.responses import ResponseTextDeltaEvent

    class ChunkingScriptedModel(ScriptedModel):
        async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            async for event in super().stream_response(*args, **kwargs):
                if not isinstance(event, ResponseTextDeltaEvent):
                    yield event
                    continue
                first, *rest = chunks(event.delta)
                yield event.model_copy(update={"delta": first})
                for chunk in rest:
                    if pause is not None:
                        await pause()
                    yield event.model_copy(update={"delta": chunk})

    return ChunkingScriptedModel(steps)


def scripted_model(plan: Planner, calls: int = 12) -> Any:
    """An Agents SDK ``ScriptedModel`` whose next ``calls`` steps answer with ``plan``
    (streamed in chunks)."""
    from agents.testing import ModelCall, ModelStep, assistant_message, function_call
    from agents.usage import Usage
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    def respond(call: ModelCall) -> ModelStep:
        items = (
            call.input
            if isinstance(call.input, list)
            else [{"role": "user", "content": call.input}]
        )
        names: dict[str, str] = {}
        users: list[str] = []
        results: list[tuple[str, str]] = []
        for item in items:
            if item.get("role") == "user":
                users.append(str(item["content"]))
                results = []
            elif item.get("type") == "function_call":
                names[item["call_id"]] = item["name"]
            elif item.get("type") == "function_call_output":
                results.append((names[item["call_id"]], str(item["output"])))
        action = plan(users, results)
        usage = usage_of(action)
        step_usage = Usage(
            requests=1,
            input_tokens=usage.input,
            output_tokens=usage.output,
            total_tokens=usage.input + usage.output,
            input_tokens_details=InputTokensDetails(
                cached_tokens=usage.cache_read, cache_write_tokens=0
            ),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=usage.reasoning),
        )
        if isinstance(action, str):
            return ModelStep(output=[assistant_message(action)], usage=step_usage)
        output = [function_call(c.name, c.arguments, call_id=_call_id()) for c in action]
        return ModelStep(output=output, usage=step_usage)

    return streaming_scripted_model([ModelStep.respond(respond)] * calls)


def chat_model(plan: Planner, pause: Pause | None = None) -> Any:
    """A LangChain chat model (tool calling included) answering with ``plan``; it streams
    (in chunks, awaiting ``pause`` between two) when LangChain asks it to, as LangGraph's
    ``messages`` stream mode does."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        BaseMessage,
        HumanMessage,
        ToolMessage,
    )
    from langchain_core.messages.tool import tool_call_chunk
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

    class PlannedChatModel(BaseChatModel):
        calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "planned-fake"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> PlannedChatModel:
            return self

        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return self._generate(messages)

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            users: list[str] = []
            results: list[tuple[str, str]] = []
            for message in messages:
                if isinstance(message, HumanMessage):
                    users.append(message.text)
                    results = []
                elif isinstance(message, ToolMessage):
                    results.append((str(message.name), message.text))
            action = plan(users, results)
            usage = usage_of(action)
            self.calls += 1
            metadata: Any = {
                "input_tokens": usage.input,
                "output_tokens": usage.output,
                "total_tokens": usage.input + usage.output,
                "input_token_details": {"cache_read": usage.cache_read},
                "output_token_details": {"reasoning": usage.reasoning},
            }
            info = {"model_name": "planned-1", "model_provider": "fake"}
            if isinstance(action, str):
                reply = AIMessage(action, usage_metadata=metadata, response_metadata=info)
            else:
                calls = [{"name": c.name, "args": c.arguments, "id": _call_id()} for c in action]
                reply = AIMessage(
                    "", tool_calls=calls, usage_metadata=metadata, response_metadata=info
                )
            return ChatResult(generations=[ChatGeneration(message=reply)])

        async def _astream(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> AsyncIterator[ChatGenerationChunk]:
            """The same reply, its text in chunks; the last one carries the rest."""
            reply = self._generate(messages).generations[0].message
            assert isinstance(reply, AIMessage)
            *pieces, last = chunks(reply.text)
            for piece in pieces:
                yield ChatGenerationChunk(message=AIMessageChunk(piece))
                if pause is not None:
                    await pause()
            calls = [
                tool_call_chunk(
                    name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=index
                )
                for index, call in enumerate(reply.tool_calls)
            ]
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    last,
                    tool_call_chunks=calls,
                    usage_metadata=reply.usage_metadata,
                    response_metadata=reply.response_metadata,
                    chunk_position="last",
                )
            )

    return PlannedChatModel()
