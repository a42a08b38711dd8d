"""Images and files in a turn reach each framework as its own types (issue 18 item 1):
pydantic-ai ``BinaryContent``/``ImageUrl``/``DocumentUrl``, Agents SDK ``input_image`` /
``input_file`` items, LangChain standard content blocks. Each framework's offline test
model reads the bytes back and answers with their sha256, so the reply proves they
arrived whole, in order, as that framework's native content."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from evalport.protocol import FilePart, ImagePart
from evalport.protocol.runtime import AgentSession, SessionInfo

PNG = b"\x89PNG\r\n\x1a\n" + b"receipt-bytes" + bytes(range(64))
PDF = b"%PDF-1.4 terms and conditions"
PARTS = [
    ImagePart(data=PNG, media_type="image/png"),
    FilePart(url="https://example.com/terms.pdf", media_type="application/pdf"),
    FilePart(data=PDF, media_type="application/pdf", name="terms.pdf"),
]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


EXPECTED = (
    f"text:What is on this receipt? | image/png:{sha(PNG)} | "
    f"url:https://example.com/terms.pdf | application/pdf:{sha(PDF)}"
)


def _from_data_url(url: str) -> tuple[str, bytes]:
    head, _, payload = url.removeprefix("data:").partition(",")
    return head.removesuffix(";base64"), base64.b64decode(payload)


async def _reply(agent: Any) -> str:
    session = await AgentSession.open(agent, SessionInfo("s1"))
    run = await session.send("What is on this receipt?", parts=PARTS)
    await session.close()
    assert run.status == "completed", run.errors
    assert run.user_parts and [p.type for p in run.user_parts] == ["text", "image", "file", "file"]
    return run.reply


@pytest.fixture
def no_model_requests() -> Iterator[None]:
    from pydantic_ai import models

    allowed = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = False
    yield
    models.ALLOW_MODEL_REQUESTS = allowed


async def test_pydantic_ai_gets_binary_content_and_urls(no_model_requests: None) -> None:
    pytest.importorskip("pydantic_ai")
    from adapterfakes import streaming_function_model
    from evalport.server.adapters import PydanticAIAgent
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        BinaryContent,
        DocumentUrl,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        said = []
        for message in messages:
            for part in message.parts if isinstance(message, ModelRequest) else ():
                if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
                    continue
                for item in part.content:
                    if isinstance(item, str):
                        said.append(f"text:{item}")
                    elif isinstance(item, BinaryContent):
                        said.append(f"{item.media_type}:{sha(item.data)}")
                    elif isinstance(item, DocumentUrl):
                        said.append(f"url:{item.url}")
        return ModelResponse(parts=[TextPart(" | ".join(said))])

    agent = Agent(streaming_function_model(respond), name="reader")
    assert await _reply(PydanticAIAgent(agent)) == EXPECTED


async def test_openai_agents_gets_input_image_and_input_file() -> None:
    pytest.importorskip("agents")
    from agents import Agent
    from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message
    from evalport.server.adapters import OpenAIAgentsAgent

    def respond(call: ModelCall) -> ModelStep:
        said = []
        assert isinstance(call.input, list)
        (user,) = [item for item in call.input if item.get("role") == "user"]
        for item in user["content"]:
            if item["type"] == "input_text":
                said.append(f"text:{item['text']}")
            elif item["type"] == "input_image":
                media_type, data = _from_data_url(item["image_url"])
                said.append(f"{media_type}:{sha(data)}")
            elif item["type"] == "input_file" and "file_url" in item:
                said.append(f"url:{item['file_url']}")
            elif item["type"] == "input_file":
                assert item["filename"] == "terms.pdf"
                media_type, data = _from_data_url(item["file_data"])
                said.append(f"{media_type}:{sha(data)}")
        return ModelStep(output=[assistant_message(" | ".join(said))])

    agent = Agent(name="reader", model=ScriptedModel([ModelStep.respond(respond)]))
    assert await _reply(OpenAIAgentsAgent(agent)) == EXPECTED


async def test_langgraph_gets_standard_content_blocks() -> None:
    pytest.importorskip("langgraph")
    from evalport.server.adapters import LangGraphAgent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.graph import START, MessagesState, StateGraph

    class Reader(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "reader-fake"

        def _generate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
            said = []
            (user,) = [message for message in messages if isinstance(message, HumanMessage)]
            for block in user.content_blocks:
                if block["type"] == "text":
                    said.append(f"text:{block['text']}")
                elif "base64" in block:
                    data = base64.b64decode(block["base64"])
                    said.append(f"{block.get('mime_type')}:{sha(data)}")
                elif "url" in block:
                    said.append(f"url:{block['url']}")
            reply = AIMessage(" | ".join(said))
            return ChatResult(generations=[ChatGeneration(message=reply)])

    model = Reader()

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    assert await _reply(LangGraphAgent(builder.compile())) == EXPECTED
