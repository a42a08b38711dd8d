"""Case results covering all five outcomes, repetition, judges, cache marks and tools."""

from __future__ import annotations

from evalport.client import AssertionResult, CaseResult, JudgeRecord, TrialResult, Verdict
from evalport.client._core._results import case_verdict, required_passes
from evalport.client.reports import Provenance, RunReport, summarize, summarize_case


def run_data(reply: str, tool: str = "lookup_order", turns: int = 1) -> dict:
    return {
        "reply": reply,
        "status": "completed",
        "turns": turns,
        "userMessages": [f"message {i}" for i in range(1, turns + 1)],
        "steps": [
            {
                "turn": 1,
                "index": 0,
                "type": "tool_execution",
                "toolExecutions": [
                    {
                        "name": tool,
                        "arguments": {
                            "order_id": {"hash": "sha256:ab", "bytes": 7, "preview": '"<string:5>"'}
                        },
                        "hasError": False,
                        "startedAt": "2026-11-29T10:00:00.000Z",
                        "completedAt": "2026-11-29T10:00:00.120Z",
                    }
                ],
                "outputMessages": [{"role": "assistant", "content": reply}],
            }
        ],
        "tools": [
            {
                "tool_call": {"name": tool, "arguments": {}},
                "startedAt": "2026-11-29T10:00:00.000Z",
                "completedAt": "2026-11-29T10:00:00.120Z",
            },
            {
                "tool_call": {"name": "refund", "arguments": {}},
                "error": {"hash": "sha256:cd", "bytes": 9, "preview": '"<string:7>"'},
                "startedAt": "2026-11-29T10:00:00.150Z",
                "completedAt": "2026-11-29T10:00:00.300Z",
            },
        ],
        "usage": {"input": 100, "output": 20, "cacheWrite": 0, "cacheRead": 0, "reasoning": 0},
    }


def trial(
    case_id: str, index: int, verdict: str, *, cached: bool = False, judge: float | None = None
) -> TrialResult:
    passed = verdict in (Verdict.PASSED, Verdict.SCORED)
    assertions = [
        AssertionResult(
            name="reply_contains",
            score=1.0 if passed else 0.0,
            passed=passed,
            message="" if passed else "reply lacks 'refund'",
        ),
    ]
    if verdict == Verdict.SCORED:
        assertions.append(
            AssertionResult(name="judge", score=0.4, passed=False, severity="soft", threshold=0.7)
        )
    judges = (
        []
        if judge is None
        else [
            JudgeRecord(
                criterion="helpfulness",
                score=judge,
                reason="ok",
                model="judge-1",
                input_tokens=50,
                output_tokens=5,
            )
        ]
    )
    return TrialResult(
        case_id=case_id,
        trial=index,
        verdict=verdict,
        assertions=[] if verdict in (Verdict.ERROR, Verdict.SKIPPED) else assertions,
        error="ConnectError: refused" if verdict == Verdict.ERROR else None,
        error_type="TargetUnavailable" if verdict == Verdict.ERROR else None,
        skip_reason="not on staging" if verdict == Verdict.SKIPPED else None,
        duration=0.25,
        session_id=f"s-{case_id}-{index}",
        cached=cached,
        judges=judges,
        run=None
        if verdict in (Verdict.ERROR, Verdict.SKIPPED)
        else run_data(f"<b>reply</b> of {case_id} <script>alert(1)</script>"),
    )


def case(
    case_id: str, verdicts: list[str], *, tags=(), pass_rate: float = 1.0, **kwargs
) -> CaseResult:
    trials = [trial(case_id, i, v, **kwargs) for i, v in enumerate(verdicts)]
    return CaseResult(
        case_id=case_id,
        description=f"about {case_id}",
        tags=list(tags),
        verdict=case_verdict(verdicts, pass_rate),
        trials=trials,
        pass_rate=pass_rate,
        required=required_passes(len(verdicts), pass_rate),
        passes=sum(v == Verdict.PASSED for v in verdicts),
    )


def sample_report(*, strict: bool = False) -> RunReport:
    results = [
        case(
            "evals/test_support.py::refund_ok",
            [Verdict.PASSED] * 4 + [Verdict.FAILED],
            tags=["refund"],
            pass_rate=0.8,
            judge=0.75,
        ),
        case(
            "evals/test_support.py::refund_denied",
            [Verdict.FAILED] * 3 + [Verdict.PASSED] * 2,
            tags=["refund", "approval"],
            pass_rate=0.8,
        ),
        case("evals/test_support.py::lookup", [Verdict.ERROR], tags=["orders"]),
        case("evals/test_support.py::staging_only", [Verdict.SKIPPED], tags=["orders"]),
        case("evals/test_support.py::tone", [Verdict.SCORED], cached=True),
    ]
    provenance = Provenance(
        evalport_version="0.1.0",
        started_at="2026-11-29T10:00:00Z",
        finished_at="2026-11-29T10:00:09Z",
        git_sha="0123456789abcdef0123",
        target={
            "kind": "http",
            "location": "http://127.0.0.1:8765/",
            "agent_name": "support",
            "agent_version": "1.2",
        },
        trace_policy="safe()",
        judge_model="judge-1",
        repeat=5,
        pass_rate=0.8,
        strict=strict,
    )
    summaries = [summarize_case(result) for result in results]
    return RunReport(summary=summarize(summaries, provenance, duration=9.0), results=results)
