"""A LangChain chat model that answers from a script, tool calls included (no network).

langchain_core's own fakes (``GenericFakeChatModel``, ``FakeMessagesListChatModel``) raise
``NotImplementedError`` on ``bind_tools``, so a graph that binds its tools cannot run on
them. ``ScriptedChatModel`` can: ``bind_tools`` returns the model itself, and each call
answers with the next ``AIMessage`` of the script (with ``tool_calls`` to call tools), or
with what ``respond(messages)`` returns when a function is given instead of a list.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["ScriptedChatModel", "tool_call"]


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """One tool call for an ``AIMessage(tool_calls=[...])`` of the script."""
    return {"name": name, "args": arguments, "id": f"call-{uuid.uuid4().hex[:12]}"}


class ScriptedChatModel(BaseChatModel):
    """Answers with ``script`` in order (a list of ``AIMessage``, or a function of the messages)."""

    script: Any
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        script = self.script
        answer = script(messages) if callable(script) else script[self.calls]
        self.calls += 1
        message = answer if isinstance(answer, AIMessage) else AIMessage(str(answer))
        return ChatResult(generations=[ChatGeneration(message=message)])
