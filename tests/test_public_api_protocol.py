"""The public API of evalport.protocol, pinned.

Adding, renaming or removing an export is a deliberate change: update this list with it.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import evalport.protocol as protocol

PUBLIC = [
    "DEFAULT_PREVIEW_BYTES",
    "PROBLEM_CONTENT_TYPE",
    "PROTOCOL_VERSION",
    "AgentIdentity",
    "AgentInfo",
    "AgentRun",
    "AgentSession",
    "Approval",
    "ApprovalDecision",
    "ApprovalRejected",
    "ApprovalResult",
    "ApprovalState",
    "ApprovalsRequest",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "DecisionError",
    "ErrorInfo",
    "Event",
    "FaultNotApplicable",
    "FaultPlan",
    "FieldError",
    "FinishReason",
    "Health",
    "InjectedFault",
    "LlmProfile",
    "Message",
    "MissingExtraError",
    "NotSuspended",
    "PendingApproval",
    "Problem",
    "ProblemType",
    "ProtocolError",
    "RequestError",
    "RunEnvelope",
    "RunStatus",
    "SessionBusy",
    "SessionClosed",
    "SessionInfo",
    "SessionSuspended",
    "Step",
    "StepType",
    "StopReason",
    "StopSignal",
    "ToolCall",
    "ToolExecution",
    "ToolFault",
    "ToolRecord",
    "ToolRun",
    "TracePolicy",
    "TurnContext",
    "TurnHandler",
    "TurnRequest",
    "TurnTimeout",
    "Usage",
    "__version__",
    "agent_identity",
    "as_factory",
    "as_turn_function",
    "compact_json",
    "current_context",
    "decode_request",
    "decode_response",
    "decode_run",
    "digest",
    "encode",
    "is_digest",
    "matches_digest",
    "normalize_run",
    "require",
    "session_factory",
    "tool",
    "tool_record",
]


def test_all_is_pinned() -> None:
    assert protocol.__all__ == PUBLIC


def test_all_is_sorted_unique_and_resolves() -> None:
    assert len(set(protocol.__all__)) == len(protocol.__all__)

    # Constants first, then classes, then the rest (the order ruff's RUF022 keeps).
    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert protocol.__all__ == sorted(protocol.__all__, key=kind)
    for name in protocol.__all__:
        assert hasattr(protocol, name), name


def test_public_classes_and_functions_are_documented() -> None:
    for name in protocol.__all__:
        value = getattr(protocol, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name} has no docstring"


def test_protocol_needs_only_msgspec() -> None:
    code = (
        "import sys, evalport.protocol\n"
        "heavy = {'starlette', 'httpx', 'uvicorn', 'yaml', 'anyio', 'redis'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
