"""The in-process agent runtime the server adapter and ``LocalTarget`` share (msgspec only).

An agent, of any shape :func:`session_factory` accepts, records each turn through its
:class:`TurnContext`: steps, tool calls (:func:`tool`), usage, events, approvals and
interrupts. :class:`AgentSession` runs a session one turn at a time, each turn in a task
of its own; its errors are the tree of :mod:`evalport.protocol`. Import from here only.
"""

import warnings as _warnings

from .._messages import ContentPart, FilePart, ImagePart, TextPart
from ._agent import (
    AgentIdentity,
    SessionInfo,
    TurnHandler,
    agent_identity,
    as_factory,
    as_turn_function,
    declared_tools,
    session_factory,
)
from ._approvals import ApprovalRejected, ApprovalResult
from ._context import TurnContext, current_context
from ._errors import (
    DecisionError,
    NotSuspended,
    SessionBusy,
    SessionClosed,
    SessionSuspended,
    TurnTimedOut,
)
from ._faults import FaultNotApplicable, FaultPlan, InjectedFault, as_faults
from ._framework_state import FRAMEWORK_STATE, without_framework_state
from ._loader import load_object
from ._session import AgentSession
from ._stamps import utc_now
from ._tasks import start_task
from ._tool_runs import ToolRun
from ._tools import tool

__all__ = [
    "FRAMEWORK_STATE",
    "AgentIdentity",
    "AgentSession",
    "ApprovalRejected",
    "ApprovalResult",
    "ContentPart",
    "DecisionError",
    "FaultNotApplicable",
    "FaultPlan",
    "FilePart",
    "ImagePart",
    "InjectedFault",
    "NotSuspended",
    "SessionBusy",
    "SessionClosed",
    "SessionInfo",
    "SessionSuspended",
    "TextPart",
    "ToolRun",
    "TurnContext",
    "TurnHandler",
    "TurnTimedOut",
    "agent_identity",
    "as_factory",
    "as_faults",
    "as_turn_function",
    "current_context",
    "declared_tools",
    "load_object",
    "session_factory",
    "start_task",
    "tool",
    "utc_now",
    "without_framework_state",
]


def __getattr__(name: str) -> object:
    # Deprecated names, kept for one release (listed in CHANGELOG.md).
    if name == "TurnTimeout":
        _warnings.warn(
            "evalport.protocol.runtime.TurnTimeout is deprecated; use TurnTimedOut (the runtime "
            "raises it, with timeout and run)",
            DeprecationWarning,
            stacklevel=2,
        )
        return TurnTimedOut
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
