"""The exporter `--otlp` builds (the SDK's OTLP/HTTP exporter) against collectors that
misbehave, each a real HTTP server on loopback: a reply of a gigabyte is not read into
memory, a redirect is not followed (so `OTEL_EXPORTER_OTLP_HEADERS` reach no other
place), and a collector that drips its reply one byte at a time ends the export within
the export timeout, logged."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from evalport.protocol.tracing import otlp_provider

Reply = Callable[[BaseHTTPRequestHandler], None]


@contextlib.contextmanager
def misbehaving(reply: Reply) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A collector answering every POST with ``reply``; yields its URL and the headers of
    each request it received."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(dict(self.headers))
            with contextlib.suppress(OSError):
                reply(self)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _export_one(url: str) -> float:
    """Seconds one span's export took, through the provider `--otlp` builds."""
    provider = otlp_provider(url, "faults")
    provider.get_tracer("t").start_span("one").end()
    started = time.monotonic()
    provider.shutdown()
    return time.monotonic() - started


def test_a_gigabyte_reply_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
    sent = [0]

    def huge(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-protobuf")
        handler.send_header("Content-Length", str(1 << 30))
        handler.end_headers()
        chunk = bytes(1 << 20)
        for _ in range(1 << 10):
            handler.wfile.write(chunk)
            sent[0] += len(chunk)

    with misbehaving(huge) as (url, _):
        _export_one(url)
    assert sent[0] < 64 << 20, f"the collector sent {sent[0] >> 20} MiB and it was read"


def test_a_redirect_is_not_followed_with_the_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=secret-key")
    with misbehaving(lambda h: h.send_response(204)) as (elsewhere, reached):

        def moved(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(307)
            handler.send_header("Location", elsewhere + "/v1/traces")
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        with misbehaving(moved) as (url, asked):
            _export_one(url)
    assert asked and asked[0].get("api-key") == "secret-key"
    assert reached == []


def test_a_dripping_collector_ends_the_export_in_its_timeout(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    stop = threading.Event()

    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        while not stop.wait(0.1):
            handler.wfile.write(b"x")
            handler.wfile.flush()

    with caplog.at_level(logging.WARNING), misbehaving(drip) as (url, _):
        try:
            took = _export_one(url)
        finally:
            stop.set()
    assert took < 6.0, f"the export took {took:.1f} s against a 2 s timeout"
    assert "Failed to export" in caplog.text
