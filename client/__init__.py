"""evalport.client: drive agents locally or over HTTP, assert on their runs, judge them.

Install with ``pip install 'evalport[client]'``. The names below are the supported API;
the assertion classes live in :mod:`evalport.client.assertions`, the judges in
:mod:`evalport.client.judges` (the criteria in ``judges.criteria``), the reporters in
:mod:`evalport.client.reports`, the commands' exit codes in :mod:`evalport.client.cli`.
Every other module is private (``_name.py``). The errors a target raises are one tree,
defined in :mod:`evalport.protocol` and re-exported here (``TargetError`` and below):
``except SessionBusy`` catches it from ``LocalTarget``, ``HttpTarget`` and the runtime.
"""

from evalport.protocol import require as _require

_require("httpx", "client", "evalport.client")

from evalport.protocol import (  # noqa: E402
    AuthFailed,
    ContentPartsUnsupported,
    FaultsUnsupported,
    NotSuspended,
    ProtocolError,
    RequestRejected,
    SessionBusy,
    SessionConflict,
    SessionNotFound,
    SessionSuspended,
    TargetError,
    TargetUnavailable,
    ToolFault,
    TracePolicy,
    TurnLost,
    TurnTimedOut,
)

from ._cache import RunCache  # noqa: E402
from ._cache_stores import CacheStore, FolderCacheStore, RedisCacheStore  # noqa: E402
from ._caching import CachingTarget  # noqa: E402
from ._cases import Case, cases_from, eval_case  # noqa: E402
from ._chat_history import ChatHistoryError, run_from_chat  # noqa: E402
from ._context import EvalContext, RequirementFailed, SkipCase  # noqa: E402
from ._conversation import (  # noqa: E402
    ApprovalError,
    ApprovalPolicy,
    ApprovalRequest,
    InterruptPolicy,
    UserSimulator,
    answer_by_kind,
    approve_all,
    decide_by_tool,
    reject_all,
)
from ._datasets import Dataset, DatasetError, DatasetRow  # noqa: E402
from ._discovery import DuplicateCaseError, LoadError, discover, eval_files  # noqa: E402
from ._evaluator import Evaluator, evaluator_cases  # noqa: E402
from ._handles import AssertionHandle, DeferredHandle, Expectation  # noqa: E402
from ._logged import LoggedConversationError  # noqa: E402
from ._results import (  # noqa: E402
    AssertionResult,
    CaseResult,
    JudgeRecord,
    RunData,
    TrialResult,
    TurnTiming,
    Verdict,
)
from ._retry import RetryPolicy  # noqa: E402
from ._runner import Runner, RunOptions, run_cases  # noqa: E402
from ._sync import SyncSession, SyncTarget, connect  # noqa: E402
from ._sync_context import SyncEvalContext  # noqa: E402
from ._target import Session, Target, TargetIdentity, Turn  # noqa: E402
from ._tracing import traced_trials  # noqa: E402
from ._trajectory import Trajectory, TrajectoryToolCall  # noqa: E402
from ._trial import run_trial  # noqa: E402
from ._turns import DecisionLike  # noqa: E402
from .judges import (  # noqa: E402
    FakeJudge,
    Judge,
    JudgeConfig,
    OpenAIJudge,
    ScriptedUser,
    SimulatedUser,
    SimulatedUserError,
)
from .targets import (  # noqa: E402
    A2ATarget,
    AgUiSession,
    AgUiTarget,
    HttpSession,
    HttpTarget,
    LocalSession,
    LocalTarget,
    target_for,
)

__all__ = [
    "A2ATarget",
    "AgUiSession",
    "AgUiTarget",
    "ApprovalError",
    "ApprovalPolicy",
    "ApprovalRequest",
    "AssertionHandle",
    "AssertionResult",
    "AuthFailed",
    "CacheStore",
    "CachingTarget",
    "Case",
    "CaseResult",
    "ChatHistoryError",
    "ContentPartsUnsupported",
    "Dataset",
    "DatasetError",
    "DatasetRow",
    "DecisionLike",
    "DeferredHandle",
    "DuplicateCaseError",
    "EvalContext",
    "Evaluator",
    "Expectation",
    "FakeJudge",
    "FaultsUnsupported",
    "FolderCacheStore",
    "HttpSession",
    "HttpTarget",
    "InterruptPolicy",
    "Judge",
    "JudgeConfig",
    "JudgeRecord",
    "LoadError",
    "LocalSession",
    "LocalTarget",
    "LoggedConversationError",
    "NotSuspended",
    "OpenAIJudge",
    "ProtocolError",
    "RedisCacheStore",
    "RequestRejected",
    "RequirementFailed",
    "RetryPolicy",
    "RunCache",
    "RunData",
    "RunOptions",
    "Runner",
    "ScriptedUser",
    "Session",
    "SessionBusy",
    "SessionConflict",
    "SessionNotFound",
    "SessionSuspended",
    "SimulatedUser",
    "SimulatedUserError",
    "SkipCase",
    "SyncEvalContext",
    "SyncSession",
    "SyncTarget",
    "Target",
    "TargetError",
    "TargetIdentity",
    "TargetUnavailable",
    "ToolFault",
    "TracePolicy",
    "Trajectory",
    "TrajectoryToolCall",
    "TrialResult",
    "Turn",
    "TurnLost",
    "TurnTimedOut",
    "TurnTiming",
    "UserSimulator",
    "Verdict",
    "answer_by_kind",
    "approve_all",
    "cases_from",
    "connect",
    "decide_by_tool",
    "discover",
    "eval_case",
    "eval_files",
    "evaluator_cases",
    "reject_all",
    "run_cases",
    "run_from_chat",
    "run_trial",
    "target_for",
    "traced_trials",
]
