"""Both seed documents' code samples, ported on the page "Coming from Neuron or
Instructor" (docs/coming-from-neuron-or-instructor.md, section ``porting``), give the
verdicts the seeds document (issue 40).

The page's blocks are written to a project folder as the files their first lines name,
discovered as ``evalport run`` discovers them, and run against the page's agent with a
fake judge that scores 0.9 (the Neuron classifier sample scripts its own).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from evalport.client import LocalTarget, Runner, RunOptions, Verdict, discover
from evalport.client.judges import FakeJudge
from evalport.protocol import TracePolicy
from support.docs import section_blocks

EXPECTED_SAFE = {
    "neuron_port_eval::ContainsEvaluator[0000]": Verdict.PASSED,
    "neuron_port_eval::ContainsEvaluator[0001]": Verdict.FAILED,  # 'positive' in a negative reply
    "neuron_port_eval::SentimentEvaluator[0000]": Verdict.PASSED,
    "neuron_port_eval::SentimentEvaluator[0001]": Verdict.PASSED,
    "neuron_port_eval::ScoreEvaluator[number]": Verdict.PASSED,
    "neuron_port_eval::ScoreEvaluator[not-a-number]": Verdict.ERROR,  # a wrong input type
    "neuron_port_eval::CompletenessEvaluator[0000]": Verdict.PASSED,
    "neuron_port_eval::RefundConversationEvaluator[0000]": Verdict.PASSED,
    "neuron_port_eval::RefundThresholdEvaluator[large]": Verdict.ERROR,  # digests, said so
    "neuron_port_eval::RefundThresholdEvaluator[small]": Verdict.ERROR,
    "instructor_port_eval::refuses_refund_without_verification": Verdict.PASSED,
    "instructor_port_eval::refund_request[rush]": Verdict.PASSED,
    "instructor_port_eval::refund_request[vague]": Verdict.PASSED,
    "instructor_port_eval::two_turns": Verdict.PASSED,
    "instructor_port_eval::deterministic": Verdict.PASSED,
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for code in section_blocks("porting", "python"):
        first, _, body = code.partition("\n")
        assert first.startswith("# "), f"a block of the porting section names no file: {first}"
        path = tmp_path / first[2:].strip()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "refund_agent", raising=False)
    return tmp_path


async def _run(project: Path, policy: TracePolicy, cases: list) -> dict[str, str]:
    agent = importlib.import_module("refund_agent").agent
    async with LocalTarget(agent, policy=policy) as target:
        report = await Runner(target, RunOptions(), judge=FakeJudge(default=0.9)).run(cases)
    return {result.case_id: result.verdict for result in report.results}


async def test_the_ported_samples_keep_the_seeds_verdicts(project: Path) -> None:
    cases, errors = discover(project / "evals")
    assert errors == []
    verdicts = await _run(project, TracePolicy.safe(), cases)
    assert verdicts == EXPECTED_SAFE


async def test_the_argument_dependent_policy_decides_under_the_verbatim_policy(
    project: Path,
) -> None:
    cases, _ = discover(project / "evals")
    reading = [case for case in cases if "verbatim" in case.tags]
    verdicts = await _run(project, TracePolicy.verbatim(), reading)
    assert verdicts == {
        "neuron_port_eval::RefundThresholdEvaluator[large]": Verdict.PASSED,
        "neuron_port_eval::RefundThresholdEvaluator[small]": Verdict.PASSED,
    }


async def test_under_the_safe_policy_the_threshold_policy_says_what_to_do(project: Path) -> None:
    cases, _ = discover(project / "evals")
    reading = [case for case in cases if "verbatim" in case.tags]
    agent = importlib.import_module("refund_agent").agent
    async with LocalTarget(agent) as target:
        report = await Runner(target).run(reading)
    error = report.results[0].trials[0].error or ""
    assert "digests" in error and "--trace-policy verbatim" in error
