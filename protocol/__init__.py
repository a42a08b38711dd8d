"""evalport.protocol: the wire of protocol v1, the types and rules both ends share.

Needs only msgspec. What is here defines and codes the wire: the run model and the
request and response messages (msgspec Structs), the codec, digests and the trace policy,
problem types and errors, the versions. The in-process agent runtime that the server and
the client's ``LocalTarget`` share lives apart, in :mod:`evalport.protocol.runtime`.

This package is the only public face: its modules (``_models.py``, ``_codec.py``...) are
private. ``openapi.yaml`` at the top of the repository is the source of truth these types
follow, and a test keeps the two in step. Nothing here names the server or the client.
"""

from ._codec import decode_request, decode_response, decode_run, encode, normalize_run
from ._digest import DEFAULT_PREVIEW_BYTES, compact_json, digest, is_digest, matches_digest
from ._extras import MissingExtraError, require
from ._messages import (
    AgentInfo,
    ApprovalDecision,
    ApprovalsRequest,
    CreateSessionRequest,
    CreateSessionResponse,
    FieldError,
    Health,
    Problem,
    RunEnvelope,
    ToolFault,
    TurnRequest,
)
from ._models import (
    AgentRun,
    Approval,
    ApprovalState,
    ErrorInfo,
    Event,
    FinishReason,
    LlmProfile,
    Message,
    PendingApproval,
    RunStatus,
    Step,
    StepType,
    StopReason,
    StopSignal,
    ToolCall,
    ToolExecution,
    ToolRecord,
    Usage,
    tool_record,
)
from ._policy import TracePolicy
from ._problems import PROBLEM_CONTENT_TYPE, ProblemType, ProtocolError, RequestError
from ._version import PROTOCOL_VERSION, __version__

__all__ = [
    "DEFAULT_PREVIEW_BYTES",
    "PROBLEM_CONTENT_TYPE",
    "PROTOCOL_VERSION",
    "AgentInfo",
    "AgentRun",
    "Approval",
    "ApprovalDecision",
    "ApprovalState",
    "ApprovalsRequest",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "ErrorInfo",
    "Event",
    "FieldError",
    "FinishReason",
    "Health",
    "LlmProfile",
    "Message",
    "MissingExtraError",
    "PendingApproval",
    "Problem",
    "ProblemType",
    "ProtocolError",
    "RequestError",
    "RunEnvelope",
    "RunStatus",
    "Step",
    "StepType",
    "StopReason",
    "StopSignal",
    "ToolCall",
    "ToolExecution",
    "ToolFault",
    "ToolRecord",
    "TracePolicy",
    "TurnRequest",
    "Usage",
    "__version__",
    "compact_json",
    "decode_request",
    "decode_response",
    "decode_run",
    "digest",
    "encode",
    "is_digest",
    "matches_digest",
    "normalize_run",
    "require",
    "tool_record",
]
