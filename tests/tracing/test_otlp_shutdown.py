"""Shutdown's deadline passing while the thread sends: each span is counted once, as
sent or as dropped, and nothing is sent or counted after shutdown gave up."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import msgspec
import pytest
from evalport.protocol import _otlp
from evalport.protocol._otel import CLIENT, Draw, SpanRecord
from evalport.protocol._otlp import BATCH, OtlpExporter
from support.otlp import Bodies, collector, received_spans

TIMEOUT = 0.5
"""The export timeout, in seconds: shutdown's deadline too."""


@pytest.fixture(autouse=True)
def short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(TIMEOUT))


def _answer(connection: socket.socket, bodies: Bodies) -> None:
    """Read one HTTP request from ``connection``, keep its body and answer 200."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    bodies.append(("application/x-protobuf", body))
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")


@contextlib.contextmanager
def answers_once() -> Iterator[tuple[str, Bodies, list[socket.socket]]]:
    """A loopback collector that answers its first request and then, on every other
    connection, reads nothing and never answers; its URL, the bodies it took and the
    connections it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    bodies: Bodies = []
    connections: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.settimeout(5)
            connections.append(connection)
            if len(connections) == 1:
                _answer(connection, bodies)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", bodies, connections
    finally:
        stop.set()
        thread.join(5)
        server.close()
        for connection in connections:
            connection.close()


def _wait_for(condition: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_spans_of_a_collector_that_stops_answering_are_each_counted_once() -> None:
    steps = [{"turn": 1, "index": index, "type": "final_response"} for index in range(2500)]
    run = json.dumps({"reply": "ok", "status": "completed", "turns": 1, "steps": steps})
    total = 1 + 1 + len(steps)  # the trial, its turn, its steps: five requests of 512
    with answers_once() as (url, bodies, connections):
        exporter = OtlpExporter(url, "svc")
        root = exporter.begin("trial big", CLIENT, None, {})
        exporter.finish(root, [], Draw(msgspec.Raw(run.encode())))
        _wait_for(lambda: len(connections) >= 2)  # the first taken, the second unanswered
        exporter.shutdown()  # gives up while a request hangs: counts what is not sent
        assert exporter.dropped == total - len(received_spans(bodies))
        time.sleep(2.5 * TIMEOUT)  # the hanging request fails meanwhile
        assert exporter.dropped == total - len(received_spans(bodies))  # not counted again
        # nothing posted once shutdown gave up (a third request, if the second failed
        # before shutdown's deadline, is the one that hung then)
        assert len(connections) <= 3
    assert len(received_spans(bodies)) == BATCH


def test_a_draw_that_fails_after_shutdown_gave_up_is_not_counted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drawing = threading.Event()

    def slow_failing_draw(root: SpanRecord, material: Draw) -> list[SpanRecord]:
        drawing.set()
        time.sleep(2 * TIMEOUT)
        raise RuntimeError("cannot draw")

    monkeypatch.setattr(_otlp, "draw", slow_failing_draw)
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        root = exporter.begin("trial slow", CLIENT, None, {})
        exporter.finish(root, [], Draw(msgspec.Raw(b'{"turns": 1}')))  # 2 spans queued
        drawing.wait(5)
        exporter.shutdown()  # gives up while drawing: the root and the draw dropped
        assert exporter.dropped == 2
        time.sleep(2 * TIMEOUT)  # the draw fails meanwhile
    assert exporter.dropped == 2
    assert bodies == []
