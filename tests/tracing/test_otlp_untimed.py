"""Spans of steps the run did not time are timed when their trial or turn handed them
over (its root span's end), not when the exporter's thread draws them, which may be a
schedule delay later: they start and end within their parent."""

from __future__ import annotations

import time
from typing import Any

import pytest
from evalport.protocol._otlp import OtlpExporter
from support.otlp import collector, received_spans, traced_trial

RUN = (
    '{"reply": "ok", "status": "completed", "turns": 1, "userMessages": ["hi"],'
    ' "steps": [{"turn": 1, "index": 0, "type": "final_response"}]}'
)
LATER = 0.3
"""Seconds between the handover and the draw (shutdown draws what is queued)."""


@pytest.fixture(autouse=True)
def asleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread draws only at shutdown, ``LATER`` after the handover."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")


def _within(span: dict[str, Any], parent: dict[str, Any]) -> None:
    assert span["parentSpanId"] == parent["spanId"]
    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    assert int(parent["startTimeUnixNano"]) <= start <= end <= int(parent["endTimeUnixNano"])


async def test_an_untimed_step_of_a_trial_is_timed_within_its_trial() -> None:
    from evalport.client import eval_case

    @eval_case()
    async def hi(ctx: Any) -> None:
        return None

    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        await traced_trial(exporter, hi, RUN)
        time.sleep(LATER)
        exporter.shutdown()
    spans = {span["name"]: span for span in received_spans(bodies)}
    assert set(spans) == {"evalport.trial hi", "invoke_agent", "chat"}
    _within(spans["invoke_agent"], spans["evalport.trial hi"])
    _within(spans["chat"], spans["invoke_agent"])


async def test_an_untimed_step_of_a_served_turn_is_timed_within_its_turn() -> None:
    from evalport.server._records import Outcome
    from evalport.server._tracing import TurnTracing

    async def run() -> Outcome:
        return Outcome(200, ('{"run": ' + RUN + "}").encode())

    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        await TurnTracing(exporter, "agent", None).turn(None, "s-1", run)
        time.sleep(LATER)
        exporter.shutdown()
    spans = {span["name"]: span for span in received_spans(bodies)}
    assert set(spans) == {"invoke_agent agent", "chat"}
    _within(spans["chat"], spans["invoke_agent agent"])
