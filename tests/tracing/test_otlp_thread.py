"""The OTLP exporter's background thread: handing spans over only queues them (what is
left to draw included); the thread draws, encodes and sends them in batches, and counts
what it cannot draw."""

from __future__ import annotations

import logging
import math
import time

import msgspec
import pytest
from evalport.protocol import _otlp
from evalport.protocol._otel import CLIENT, SERVER, Draw, SpanRecord
from evalport.protocol._otlp import BATCH, OtlpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support.otlp import collector, received_spans

RUN = (
    b'{"reply": "ok", "status": "completed", "turns": 1, "userMessages": ["hi"],'
    b' "steps": [{"turn": 1, "index": 0, "type": "final_response"}]}'
)


@pytest.fixture(autouse=True)
def asleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread wakes only for a full batch or at shutdown."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")


def test_the_thread_draws_what_a_trial_hands_over_and_sends_it() -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        root = exporter.begin("trial greet", CLIENT, None, {"evalport.case.id": "greet"})
        exporter.finish(root, [], Draw(msgspec.Raw(RUN), agent="greeter"))
        assert bodies == []  # queued only: nothing drawn or sent before the thread runs
        exporter.shutdown()
    spans = received_spans(bodies)
    assert exporter.dropped == 0
    assert spans[0]["name"] == "trial greet"
    drawn = spans[1:]
    assert drawn and all(span["traceId"] == spans[0]["traceId"] for span in drawn)
    assert any(span.get("parentSpanId") == spans[0]["spanId"] for span in drawn)


def test_a_handover_that_cannot_be_drawn_is_counted_and_logged_and_its_root_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
            root = exporter.begin("trial broken", CLIENT, None, {})
            exporter.finish(root, [], Draw(msgspec.Raw(b'{"steps": 7}')))  # never raises
            assert exporter.dropped == 0  # not drawn yet: the thread does it
            exporter.finish(exporter.begin("trial fine", CLIENT, None, {}), [], None)
            exporter.shutdown()
    assert exporter.dropped == 1
    assert "drawing trial broken failed (ValidationError): dropped 1 span(s)" in caplog.text
    assert [span["name"] for span in received_spans(bodies)] == ["trial broken", "trial fine"]


def test_a_handover_still_to_draw_counts_one_span_more_in_the_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc", queue=3)
        with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
            first = exporter.begin("trial one", CLIENT, None, {})
            exporter.finish(first, [], Draw(msgspec.Raw(RUN)))  # 2 of 3
            second = exporter.begin("trial two", CLIENT, None, {})
            exporter.finish(second, [], Draw(msgspec.Raw(RUN)))  # 2 more: dropped whole
            exporter.shutdown()
    assert exporter.dropped == 2
    assert "the trace queue was full: dropped 2 span(s); 2 dropped so far" in caplog.text
    assert {span["name"] for span in received_spans(bodies)} >= {"trial one"}
    assert "trial two" not in {span["name"] for span in received_spans(bodies)}


def big_run(size: int) -> msgspec.Raw:
    return msgspec.Raw(RUN.replace(b'"ok"', b'"' + b"x" * size + b'"'))


def test_runs_still_to_draw_are_bounded_in_bytes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_otlp, "QUEUE_BYTES", 150_000)  # the thread sleeps: nothing drawn
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
            for name in ("turn one", "turn two"):  # 100,000 bytes each: the second too many
                exporter.finish(exporter.begin(name, SERVER, None, {}), [], Draw(big_run(100_000)))
            exporter.shutdown()
    names = {span["name"] for span in received_spans(bodies)}
    assert "turn one" in names and "turn two" not in names
    assert exporter.dropped == 2
    assert "the trace queue was full: dropped 2 span(s)" in caplog.text


def test_runs_still_to_draw_wake_the_thread_past_wake_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_otlp, "WAKE_BYTES", 100_000)
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        exporter.finish(exporter.begin("turn one", SERVER, None, {}), [], Draw(big_run(120_000)))
        deadline = time.monotonic() + 10  # sent long before the minute's delay
        while not bodies and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "turn one" in {span["name"] for span in received_spans(bodies)}
        exporter.shutdown()
    assert exporter.dropped == 0


def test_a_full_batch_wakes_the_thread_and_requests_carry_at_most_a_batch() -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc", queue=4 * BATCH)
        records = [SpanRecord(1, n + 1, 0, f"s{n}", SERVER, 5, 10, {}) for n in range(BATCH)]
        exporter.add(records)  # a full batch: sent before the hour-long delay
        deadline = time.monotonic() + 10
        while not bodies and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(received_spans(bodies)) == BATCH
        exporter.add([SpanRecord(2, n + 1, 0, "t", SERVER, 5, 10, {}) for n in range(BATCH + 3)])
        exporter.shutdown()
    assert [len(received_spans([body])) for body in bodies] == [BATCH, BATCH, 3]
    assert exporter.dropped == 0


def test_nan_and_infinities_are_sent_as_doubles() -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        values = {"nan": math.nan, "up": math.inf, "down": -math.inf}
        exporter.add([SpanRecord(1, 2, 0, "odd", SERVER, 5, 10, values)])
        exporter.shutdown()
    ((_, body),) = bodies
    (span,) = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
    sent = {pair.key: pair.value.double_value for pair in span.attributes}
    assert math.isnan(sent["nan"]) and sent["up"] == math.inf and sent["down"] == -math.inf


def test_the_safe_policy_applies_to_a_trial_s_draw_too() -> None:
    from evalport.protocol._otel import draw

    run = (
        b'{"reply": "ok", "status": "completed", "turns": 1, "steps": [{"turn": 1,'
        b' "index": 0, "type": "tool_call", "toolExecutions": [{"name": "refund",'
        b' "toolCallId": "c1", "arguments": {"order": "pin-0042"}, "result": "pin-0042"}]}]}'
    )
    for safe in (False, True):
        root = SpanRecord(1, 2, 0, "evalport.trial refund", CLIENT, 5, 10, {})
        records = draw(root, Draw(msgspec.Raw(run), safe=safe))
        assert [record.name for record in records] == [
            "invoke_agent",
            "chat",
            "execute_tool refund",
        ]
        shown = msgspec.json.encode([record.attributes for record in records])
        assert (b"pin-0042" in shown) is not safe


def test_a_handover_that_finds_the_queue_full_wakes_the_thread() -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc", queue=5)  # a batch is 5 spans: 2 handovers are 4
        for n in range(3):  # the third finds no room: dropped, and the thread woken
            exporter.finish(
                exporter.begin(f"turn {n}", SERVER, None, {}), [], Draw(msgspec.Raw(RUN))
            )
        deadline = time.monotonic() + 10
        while not bodies and time.monotonic() < deadline:  # the delay is a minute: not it
            time.sleep(0.02)
        assert [span["name"] for span in received_spans(bodies)].count("invoke_agent") == 2
        assert exporter.dropped == 2
        exporter.shutdown()
