"""The public API of evalport.client, pinned.

Adding, renaming or removing an export is a deliberate change: update this list with it.
"""

from __future__ import annotations

import subprocess
import sys

import evalport.client as client

PUBLIC = sorted(
    [
        "ApprovalError",
        "ApprovalPolicy",
        "ApprovalRequest",
        "AssertionHandle",
        "AssertionResult",
        "AuthFailed",
        "CachingTarget",
        "Case",
        "CaseResult",
        "Dataset",
        "DatasetError",
        "DatasetRow",
        "DuplicateCaseError",
        "EvalContext",
        "Evaluator",
        "Expectation",
        "FakeJudge",
        "FaultsUnsupported",
        "HttpSession",
        "HttpTarget",
        "Judge",
        "JudgeConfig",
        "JudgeRecord",
        "LoadError",
        "LocalSession",
        "LocalTarget",
        "NotSuspended",
        "OpenAIJudge",
        "ProtocolError",
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
        "Verdict",
        "approve_all",
        "cases_from",
        "connect",
        "decide_by_tool",
        "discover",
        "eval_case",
        "evaluator_cases",
        "reject_all",
        "run_cases",
        "run_trial",
    ]
)


def test_all_is_pinned() -> None:
    assert sorted(client.__all__) == PUBLIC


def test_every_export_resolves() -> None:
    missing = [name for name in client.__all__ if not hasattr(client, name)]
    assert missing == []


def test_client_does_not_import_the_server() -> None:
    code = (
        "import sys, evalport.client; "
        "bad = [m for m in sys.modules if m.startswith(('evalport.server', 'starlette', 'uvicorn'))]; "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
