"""A judge call's span carries what its verdict holds, and nothing for what it leaves out."""

from __future__ import annotations

from types import SimpleNamespace

from evalport.client._core._trace_context import TRIAL, TrialTrace, judge_span
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def test_a_verdict_without_a_score_or_model_sets_no_such_attribute() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    trial = tracer.start_span("evalport.trial c")
    token = TRIAL.set(TrialTrace(tracer, trial))
    try:
        with judge_span("closed_qa", SimpleNamespace(model="judge-m")) as record:
            usage = SimpleNamespace(input_tokens=3, output_tokens=None)
            record(SimpleNamespace(score=None, cached=False, usage=usage, model=None))
    finally:
        TRIAL.reset(token)
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None and span.parent.span_id == trial.get_span_context().span_id
    assert span.name == "evalport.judge closed_qa"
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "evalport.judge": True,
        "evalport.judge.criterion": "closed_qa",
        "gen_ai.request.model": "judge-m",
        "evalport.judge.cached": False,
        "gen_ai.usage.input_tokens": 3,
    }
