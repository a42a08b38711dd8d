"""A judge call's span carries what its verdict holds, and nothing for what it leaves out."""

from __future__ import annotations

from types import SimpleNamespace

from evalport.client._trace_context import TRIAL, TrialTrace, judge_span
from evalport.protocol._otel import INTERNAL, OpenSpan, SpanRecord


def test_a_verdict_without_a_score_or_model_sets_no_such_attribute() -> None:
    trial = TrialTrace(OpenSpan(SpanRecord(1, 2, 0, "evalport.trial c", INTERNAL, 5, 5, {}), 1))
    token = TRIAL.set(trial)
    try:
        with judge_span("closed_qa", SimpleNamespace(model="judge-m")) as record:
            usage = SimpleNamespace(input_tokens=3, output_tokens=None)
            record(SimpleNamespace(score=None, cached=False, usage=usage, model=None))
    finally:
        TRIAL.reset(token)
    (span,) = trial.children
    assert span.parent_id == 2 and span.name == "evalport.judge closed_qa"
    assert span.attributes == {
        "gen_ai.operation.name": "chat",
        "evalport.judge": True,
        "evalport.judge.criterion": "closed_qa",
        "gen_ai.request.model": "judge-m",
        "evalport.judge.cached": False,
        "gen_ai.usage.input_tokens": 3,
    }
