"""The public names of the server adapter and of the agent interface stay importable."""

from __future__ import annotations

import evalport.protocol as protocol
import evalport.server as server

SERVER = {
    "ApprovalRejected",
    "ApprovalRelay",
    "EvalAdapter",
    "HTTPProblem",
    "Lease",
    "Limits",
    "MemoryStore",
    "ProtocolApp",
    "RunPolicy",
    "SessionInfo",
    "SessionManager",
    "SessionStore",
    "StoreUnavailable",
    "StoredSession",
    "TurnContext",
    "open_store",
    "tool",
}

AGENT_INTERFACE = {
    "AgentIdentity",
    "AgentSession",
    "ApprovalRejected",
    "ApprovalResult",
    "DecisionError",
    "NotSuspended",
    "SessionBusy",
    "SessionClosed",
    "SessionInfo",
    "SessionSuspended",
    "ToolRun",
    "TurnContext",
    "TurnHandler",
    "TurnTimeout",
    "agent_identity",
    "as_factory",
    "as_turn_function",
    "current_context",
    "session_factory",
    "tool",
}


def test_server_exports() -> None:
    assert set(server.__all__) == SERVER
    assert all(hasattr(server, name) for name in server.__all__)
    assert sorted(server.__all__) == server.__all__


def test_agent_interface_exports() -> None:
    assert set(protocol.__all__) >= AGENT_INTERFACE
    assert all(hasattr(protocol, name) for name in AGENT_INTERFACE)


def test_memory_store_satisfies_the_store_protocol() -> None:
    assert isinstance(server.MemoryStore(), server.SessionStore)
