"""A real OTLP/HTTP collector on a loopback port for tests: it keeps each request's
content type and body."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

Bodies = list[tuple[str, bytes]]


class _Collector(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: Bodies

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.bodies.append((self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@contextlib.contextmanager
def collector() -> Iterator[tuple[str, Bodies]]:
    """The collector's base URL and the bodies it received."""
    bodies: Bodies = []
    handler = type("Handler", (_Collector,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def received_spans(bodies: Bodies) -> list[dict[str, Any]]:
    """Every span of ``bodies``, as protobuf's JSON mapping reads it."""
    found = []
    for content_type, body in bodies:
        assert content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                found += [MessageToDict(span) for span in scope.spans]
    return found
