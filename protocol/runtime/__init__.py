"""evalport.protocol.runtime: the in-process agent runtime the server and LocalTarget share.

An agent is written once against this interface and runs the same behind the server
adapter and in the client's ``LocalTarget``. Needs only msgspec.

Rules:

- It builds on :mod:`evalport.protocol` (the wire) and on nothing above it: it never
  names the server or the client, and it knows nothing of HTTP.
- The agent interface is small: a session factory (:func:`session_factory` accepts every
  agent shape) and a turn function that receives the message and a :class:`TurnContext`;
  a turn's images and files are ``ctx.parts`` (:class:`TextPart`, :class:`ImagePart`,
  :class:`FilePart`, re-exported from :mod:`evalport.protocol`; rules in ``_content.py``).
  The context records steps, tool calls (:func:`tool`, :meth:`TurnContext.tool_execution`),
  usage and events straight into the session's run, and can ask for approvals.
- :class:`AgentSession` runs one session: one turn at a time, each turn in a task of its
  own, suspended on approval requests, cut by its timeout. Its errors
  (:class:`SessionBusy`, :class:`SessionSuspended`, :class:`NotSuspended`,
  :class:`SessionClosed`, :class:`DecisionError`, :class:`TurnTimedOut`) are the ones
  the server maps to problems and the client's LocalTarget raises.
- Times in a run are :func:`utc_now` text (ISO-8601 UTC, milliseconds, ``Z``); framework
  adapters that fill a context from a framework's callbacks stamp with it too.
- Tool faults (:class:`FaultPlan`) are applied here, so they behave the same on every
  target.
- Framework state (:data:`FRAMEWORK_STATE` events, which framework adapters save in the
  run) stays with the session's host: runs handed to an evaluator are
  :func:`without_framework_state`.
- This package is the only public face: its modules are private.
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
