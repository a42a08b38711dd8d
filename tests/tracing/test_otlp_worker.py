"""The OTLP exporter's worker process: it really runs apart, ends with the exporter (and
with the process that started it), reports what it drops, and its death or a failed
start costs a trial or a turn nothing."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evalport.protocol._otel import SERVER, SpanRecord
from evalport.protocol._otlp import GRACE, WORKER, OtlpExporter
from support.otlp import collector, received_spans

ZERO_RUN = (
    b'{"reply": "ok", "status": "completed", "turns": 1, "userMessages": ["hi"],'
    b' "steps": [{"turn": 1, "index": 0, "type": "final_response"}]}'
)


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")


@pytest.fixture
def closed_port() -> Iterator[str]:
    """A loopback port nothing listens on: a collector that is down."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


def _wait_for(condition: Any, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _records(count: int) -> list[SpanRecord]:
    return [SpanRecord(1, n + 1, 0, f"s{n}", SERVER, 5, 10, {}) for n in range(count)]


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie left unreaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _cases() -> list[Any]:
    from evalport.client import cases_from, eval_case

    @eval_case()
    async def greet(ctx: Any) -> None:
        return None

    return cases_from(greet)


async def _trial(case: Any, target: Any, *, trial: int = 0, **options: Any) -> Any:
    from evalport.client._results import RunData, TrialResult

    return TrialResult(case_id=case.id, run=RunData(ZERO_RUN))


def test_the_worker_is_a_process_of_its_own_that_ends_with_shutdown() -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        pid = exporter.pid
        assert pid is not None and pid != os.getpid()
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            assert WORKER.encode() in cmdline.read().split(b"\0")
        exporter.add(_records(3))
        exporter.shutdown()
        assert not _running(pid)
    assert sorted(span["name"] for span in received_spans(bodies)) == ["s0", "s1", "s2"]
    assert exporter.dropped == 0


def test_the_worker_ends_when_the_process_that_started_it_dies(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from evalport.protocol._otlp import OtlpExporter\n"
        "exporter = OtlpExporter(sys.argv[1], 'svc')\n"
        "print(exporter.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    with collector() as (url, _):
        parent = subprocess.Popen([sys.executable, str(script), url], stdout=subprocess.PIPE)
        try:
            assert parent.stdout is not None
            worker = int(parent.stdout.readline())
            assert _running(worker)
            parent.kill()  # no shutdown, no atexit: only the end of the worker's input
            parent.wait(10)
            _wait_for(lambda: not _running(worker))
        finally:
            parent.kill()
            parent.wait(10)
            if parent.stdout is not None:
                parent.stdout.close()


def test_a_collector_that_is_down_costs_spans_the_worker_reports_back(
    closed_port: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = OtlpExporter(closed_port, "svc")
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        exporter.add(_records(4))
        _wait_for(lambda: exporter.dropped == 4)
        exporter.shutdown()
    assert "the trace collector did not take 4 span(s); 4 dropped so far" in caplog.text


def test_a_full_queue_in_the_worker_is_reported_back(caplog: pytest.LogCaptureFixture) -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc", queue=4)
        with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
            exporter.add(_records(3))
            exporter.add(_records(2))  # two more than the worker's queue holds
            exporter.shutdown()
    assert exporter.dropped == 2
    assert "the trace queue was full: dropped 2 span(s); 2 dropped so far" in caplog.text
    assert len(received_spans(bodies)) == 3


async def test_a_worker_killed_mid_run_costs_the_trials_nothing_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from evalport.client import Verdict, traced_trials

    (case,) = _cases()
    with collector() as (url, bodies), caplog.at_level(logging.WARNING, "evalport.tracing"):
        exporter = OtlpExporter(url, "svc")
        traced = traced_trials(exporter, _trial)
        assert (await traced(case, object())).verdict == Verdict.PASSED
        _wait_for(lambda: len(received_spans(bodies)) == 3)  # trial, turn, step: sent
        assert exporter.pid is not None
        os.kill(exporter.pid, signal.SIGKILL)
        _wait_for(lambda: "ended (exit code -9)" in caplog.text)
        for _ in range(3):
            assert (await traced(case, object())).verdict == Verdict.PASSED
        # each the trial span and its run not drawn yet (counted as one)
        _wait_for(lambda: exporter.dropped == 3 * 2)
        exporter.shutdown()
    deaths = [r for r in caplog.records if "trace worker process" in r.getMessage()]
    assert len(deaths) == 1  # logged once, not once a trial
    assert "spans from now on are dropped" in deaths[0].getMessage()
    assert len(received_spans(bodies)) == 3  # only what the worker sent before it was killed


async def test_a_served_turn_answers_as_untraced_once_the_worker_is_gone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from evalport.server._records import Outcome
    from evalport.server._tracing import TurnTracing

    async def run() -> Outcome:
        return Outcome(200, ZERO_RUN)

    with collector() as (url, _), caplog.at_level(logging.WARNING, "evalport.tracing"):
        exporter = OtlpExporter(url, "svc")
        assert exporter.pid is not None
        os.kill(exporter.pid, signal.SIGKILL)
        _wait_for(lambda: "ended (exit code -9)" in caplog.text)
        tracing = TurnTracing(exporter, "agent", None)
        for _ in range(2):
            outcome = await tracing.turn(None, "s-1", run)
            assert outcome.status == 200 and outcome.body == ZERO_RUN
        exporter.shutdown()
    assert exporter.dropped == 2 * 2  # a turn span and the run not drawn: counted as one


def test_a_worker_that_cannot_start_drops_spans_counted_and_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        exporter = OtlpExporter("http://127.0.0.1:9", "svc")
        assert exporter.pid is None
        exporter.add(_records(2))
        exporter.add(_records(3))
        exporter.shutdown()
    assert exporter.dropped == 5
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "the trace worker process could not start" in warnings[0]


def test_a_worker_that_stops_answering_is_killed_at_the_shutdown_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with collector() as (url, _):
        exporter = OtlpExporter(url, "svc")
        pid = exporter.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # alive, but reads and ends nothing
        try:
            exporter.add(_records(2))
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
                exporter.shutdown()
            elapsed = time.monotonic() - started
        finally:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    assert 1.0 + GRACE - 0.5 < elapsed < 1.0 + GRACE + 5.0
    assert not _running(pid)
    assert f"the trace worker did not end within {1.0 + GRACE:g} s" in caplog.text
