"""Tracing never fails what it traces: a trial whose run cannot be drawn, or a span
processor that raises, leaves the trial's result (and a served turn's answer) as it
would be untraced; the failure is logged on ``evalport.tracing``."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from evalport.client import Verdict, cases_from, eval_case, traced_trials
from evalport.client._core._results import TrialResult
from evalport.server import EvalAdapter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@eval_case()
async def fine(ctx: Any) -> None:
    return None


class NoJson:
    """A run that cannot be drawn: it has no JSON."""


async def trial(case: Any, target: Any, *, trial: int = 0, **options: Any) -> TrialResult:
    return TrialResult(case_id=case.id, verdict=Verdict.PASSED, run=NoJson())  # type: ignore[arg-type]


async def test_a_run_that_cannot_be_drawn_still_ends_the_trial_span(
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


class Raising(SpanProcessor):
    """A span processor that raises wherever it is called."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("processor down")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("processor down")


async def test_a_processor_that_raises_fails_no_trial_and_no_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(Raising())

    async def agent(message: str, history: list[Any], ctx: Any) -> str:
        return "ok"

    app = EvalAdapter(agent, token=None, tracing=provider).app()
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        result = await traced_trials(provider, trial)(cases_from(fine)[0], object())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            session = (await http.post("/evals/sessions", json={})).json()["sessionId"]
            turn = await http.post(f"/evals/sessions/{session}/turns", json={"message": "hi"})
    assert result.verdict == Verdict.PASSED
    assert turn.status_code == 200 and turn.json()["run"]["reply"] == "ok"
    assert "tracing trial fine failed (RuntimeError)" in caplog.text
    assert f"tracing a turn of session {session} failed (RuntimeError)" in caplog.text
