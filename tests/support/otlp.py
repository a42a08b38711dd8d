"""A real OTLP/HTTP collector on a loopback port for tests: it keeps each request's
content type and body (gunzipped when the request says ``Content-Encoding: gzip``) and,
if asked, its path and headers (names in lower case)."""

from __future__ import annotations

import contextlib
import gzip
import ssl
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
    requests: list[dict[str, str]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.requests.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.bodies.append((self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@contextlib.contextmanager
def collector(
    tls: ssl.SSLContext | None = None, requests: list[dict[str, str]] | None = None
) -> Iterator[tuple[str, Bodies]]:
    """The collector's base URL (``https`` with ``tls``) and the bodies it received; the
    path and headers of each request go to ``requests``."""
    bodies: Bodies = []
    handler = type(
        "Handler",
        (_Collector,),
        {"bodies": bodies, "requests": [] if requests is None else requests},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if tls is not None else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}", bodies
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


async def traced_trial(sink: Any, case: Any, run: str) -> Any:
    """One trial of the eval case function ``case`` through ``traced_trials(sink)``, its
    result holding ``run`` (a run's JSON) as if the agent had answered it."""
    from evalport.client import cases_from, traced_trials
    from evalport.client._results import RunData, TrialResult

    async def trial(case: Any, target: Any, *, trial: int = 0, **options: Any) -> TrialResult:
        return TrialResult(case_id=case.id, run=RunData(run.encode()))

    return await traced_trials(sink, trial)(cases_from(case)[0], object())
