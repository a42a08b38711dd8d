"""Framework adapters: serve a pydantic-ai, OpenAI Agents SDK or LangGraph agent as is.

Each adapter is a session factory, so it goes wherever evalport takes an agent::

    app = EvalAdapter(PydanticAIAgent(agent), token=token).app()

Model steps, tool calls, token counts and approvals are recorded from the framework's own
objects. Each needs its own extra (``evalport[pydantic-ai]``, ``evalport[openai-agents]``,
``evalport[langgraph]``); a name imports its framework only when it is used.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from ._langgraph import LangGraphAgent
    from ._openai_agents import OpenAIAgentsAgent
    from ._pydantic_ai import PydanticAIAgent

__all__ = ["LangGraphAgent", "OpenAIAgentsAgent", "PydanticAIAgent"]

_MODULES = {
    "LangGraphAgent": "._langgraph",
    "OpenAIAgentsAgent": "._openai_agents",
    "PydanticAIAgent": "._pydantic_ai",
}


def __getattr__(name: str) -> typing.Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
