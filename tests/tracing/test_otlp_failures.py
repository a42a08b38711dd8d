"""What goes wrong around evalport's OTLP export costs a trial or a turn nothing, and
loses no span unseen: answers that are not HTTP, times OTLP cannot carry, a collector
that swallows requests at exit."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from evalport.protocol._otel import SERVER, SpanRecord, decode_view, nanos, step_records
from evalport.protocol._otlp import OtlpExporter
from support.otlp import collector, received_spans, traced_trial

GO_ZERO = "0001-01-01T00:00:00Z"  # a Go agent's zero time.Time
ZERO_TIME_RUN = (
    '{"reply": "ok", "status": "completed", "turns": 1, "userMessages": ["hi"],'
    ' "steps": [{"turn": 1, "index": 0, "type": "tool_calls",'
    f' "startedAt": "{GO_ZERO}", "completedAt": "{GO_ZERO}",'
    ' "requestedToolCalls": [{"id": "c1", "name": "lookup", "arguments": {}}],'
    ' "toolExecutions": [{"name": "lookup", "toolCallId": "c1", "arguments": {},'
    f' "result": "x", "startedAt": "{GO_ZERO}", "completedAt": "9999-12-31T23:59:59Z"}}]}}]}}'
)


def _wait_for(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")


@pytest.fixture
def not_http() -> Iterator[str]:
    """A port that answers every request with bytes that are not HTTP/1 (a gRPC port)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                connection.recv(65536)
                connection.sendall(b"\x00\x00\x12\x04\x00\x00\x00\x00\x00http2 settings\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A port that takes connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def _records(count: int, start: int = 5) -> list[SpanRecord]:
    return [SpanRecord(1, n + 1, 0, f"s{n}", SERVER, start, start + 5, {}) for n in range(count)]


def test_an_answer_that_is_not_http_drops_its_batch_and_the_sender_goes_on(
    fast: None, not_http: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = OtlpExporter(not_http, "svc")
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        exporter.add(_records(1))
        _wait_for(lambda: exporter.dropped == 1)
        exporter.add(_records(2))  # the sender still runs: this batch is tried too
        _wait_for(lambda: exporter.dropped == 3)
        exporter.shutdown()
    assert "the trace collector did not take 2 span(s); 3 dropped so far" in caplog.text


def test_a_time_otlp_cannot_carry_counts_as_not_recorded() -> None:
    assert nanos(GO_ZERO) is None
    assert nanos("1969-12-31T23:59:59Z") is None
    assert nanos("9999-12-31T23:59:59Z") is None
    assert nanos("1970-01-01T00:00:01Z") == 1_000_000_000
    assert nanos("2026-01-02T03:04:05.5+00:00") == 1_767_323_045_500_000_000
    parent = SpanRecord(1, 2, 0, "turn", SERVER, 5, 10, {})
    chat, tool = step_records(decode_view(ZERO_TIME_RUN.encode()), 1, parent, parent.end)
    for record in (chat, tool):  # timed when the root ended, as a step without times is
        assert record.start == record.end == parent.end


def test_a_span_that_cannot_be_encoded_is_dropped_counted_and_never_raised(
    fast: None, caplog: pytest.LogCaptureFixture
) -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
            exporter.add(_records(2, start=-5))  # before 1970: no fixed64 holds it
            exporter.add([SpanRecord(1, 9, 0, "bad \udc80 text", SERVER, 5, 10, {"a": "\udc80"})])
            exporter.shutdown()
    assert exporter.dropped == 2
    assert "a span could not be encoded: dropped 2 span(s); 2 dropped so far" in caplog.text
    (span,) = received_spans(bodies)
    assert span["name"] == "bad ? text"  # what UTF-8 cannot carry is replaced


async def test_a_traced_trial_with_a_go_zero_time_is_not_an_error(fast: None) -> None:
    from evalport.client import Verdict, eval_case

    @eval_case()
    async def zero(ctx: Any) -> None:
        return None

    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        result = await traced_trial(exporter, zero, ZERO_TIME_RUN)
        exporter.shutdown()
    assert result.verdict == Verdict.PASSED
    assert sorted(span["name"] for span in received_spans(bodies)) == [
        "chat",
        "evalport.trial zero",
        "execute_tool lookup",
        "invoke_agent",
    ]


async def test_a_served_turn_with_a_go_zero_time_answers_as_untraced(fast: None) -> None:
    from evalport.server._records import Outcome
    from evalport.server._tracing import TurnTracing

    async def run() -> Outcome:
        return Outcome(200, ZERO_TIME_RUN.encode())

    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        outcome = await TurnTracing(exporter, "agent", None).turn(None, "s-1", run)
        exporter.shutdown()
    assert outcome.status == 200
    names = sorted(span["name"] for span in received_spans(bodies))
    assert names == ["chat", "execute_tool lookup", "invoke_agent agent"]


def test_a_trial_whose_spans_cannot_be_handed_over_keeps_its_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sink that raises (any error, as a provider's processor might) fails no trial."""
    import asyncio

    from evalport.client import Verdict, cases_from, eval_case, traced_trials
    from evalport.client._results import TrialResult
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

    class Broken(SpanExporter):
        def export(self, spans: Any) -> Any:
            raise RuntimeError("broken exporter")

    class Raising(SimpleSpanProcessor):
        def on_end(self, span: Any) -> None:
            raise RuntimeError("a processor that raises")

    provider = TracerProvider()
    provider.add_span_processor(Raising(Broken()))

    @eval_case()
    async def fine(ctx: Any) -> None:
        return None

    async def trial(case: Any, target: Any, *, trial: int = 0, **options: Any) -> TrialResult:
        return TrialResult(case_id=case.id)

    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        result = asyncio.run(traced_trials(provider, trial)(cases_from(fine)[0], object()))
    assert result.verdict == Verdict.PASSED
    assert "tracing trial fine failed (RuntimeError): its spans were dropped" in caplog.text


@pytest.mark.parametrize(
    "timeouts",
    [
        {"OTEL_EXPORTER_OTLP_TIMEOUT": "1"},
        {"OTEL_EXPORTER_OTLP_TIMEOUT": "60", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1"},
    ],
)
def test_shutdown_drains_within_one_timeout_then_counts_what_is_left(
    monkeypatch: pytest.MonkeyPatch,
    blackhole: str,
    caplog: pytest.LogCaptureFixture,
    timeouts: dict[str, str],
) -> None:
    for name, value in timeouts.items():
        monkeypatch.setenv(name, value)
    exporter = OtlpExporter(blackhole, "svc", queue=16_384)
    exporter.add(_records(16 * 512))
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        exporter.shutdown()
    # none was taken: every span is counted and logged (the first batch may have timed
    # out on its own just before the deadline)
    assert exporter.dropped == 16 * 512
    assert "shutdown waited 1 s for the trace collector: dropped " in caplog.text
    assert "8192 dropped so far" in caplog.text
