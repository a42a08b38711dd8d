"""Recognising a framework's own agent object, to wrap it in its adapter; recognising never
imports a framework.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple


class Recognised(NamedTuple):
    """A framework agent wrapped in its adapter: the adapter and how it was made."""

    agent: object
    framework: str
    wrapper: str


# (module holding the class, class name, framework, adapter module, adapter class)
_KNOWN = (
    ("pydantic_ai", "Agent", "pydantic-ai Agent", "._pydantic_ai", "PydanticAIAgent"),
    ("agents", "Agent", "OpenAI Agents SDK Agent", "._openai_agents", "OpenAIAgentsAgent"),
    ("langgraph.pregel", "Pregel", "compiled LangGraph graph", "._langgraph", "LangGraphAgent"),
)


def framework_adapter(value: object) -> Recognised | None:
    """``value`` wrapped in its framework's adapter (defaults), or ``None``."""
    for module_name, class_name, framework, adapter_module, wrapper in _KNOWN:
        module = sys.modules.get(module_name)
        kind = getattr(module, class_name, None) if module is not None else None
        if isinstance(kind, type) and isinstance(value, kind):
            adapter = getattr(importlib.import_module(adapter_module, __package__), wrapper)
            return Recognised(adapter(value), framework, wrapper)
    return None
