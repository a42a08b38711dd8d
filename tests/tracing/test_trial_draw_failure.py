"""A trial whose run cannot be handed over to draw still ends its trial span, for a
``TracerProvider`` (no live span left open) and for the OTLP exporter; the failure is
logged and the trial's result is the same."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from evalport.client import Verdict, cases_from, eval_case, traced_trials
from evalport.client._results import TrialResult
from evalport.protocol._otlp import OtlpExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.otlp import collector, received_spans


@eval_case()
async def fine(ctx: Any) -> None:
    return None


class NoJson:
    """A run that cannot be handed over: it has no JSON."""


async def trial(case: Any, target: Any, *, trial: int = 0, **options: Any) -> TrialResult:
    return TrialResult(case_id=case.id, verdict=Verdict.PASSED, run=NoJson())  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def asleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")


async def test_through_a_tracer_provider_the_trial_span_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        result = await traced_trials(provider, trial)(cases_from(fine)[0], object())
    assert result.verdict == Verdict.PASSED
    (span,) = memory.get_finished_spans()
    assert span.name == "evalport.trial fine"
    assert span.attributes is not None and span.attributes["evalport.verdict"] == Verdict.PASSED
    assert "drawing trial fine failed (AttributeError)" in caplog.text


async def test_through_the_otlp_exporter_the_trial_span_is_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
            result = await traced_trials(exporter, trial)(cases_from(fine)[0], object())
        exporter.shutdown()
    assert result.verdict == Verdict.PASSED
    (span,) = received_spans(bodies)
    assert span["name"] == "evalport.trial fine"
    assert exporter.dropped == 0
    assert "drawing trial fine failed (AttributeError)" in caplog.text
