"""Spans of runs through OpenTelemetry, for the runner and the server (``evalport[otel]``).

evalport draws through the API only, from runs a trace policy already passed, and tracing
never fails what it traces: see ARCHITECTURE.md, "Tracing".
"""

from ._draw import draw
from ._spans import (
    child,
    current,
    ends,
    fail,
    failed,
    otlp_provider,
    start,
    traceparent,
    tracer_of,
    traces_url,
)
from ._views import RunView, decode_view

__all__ = [
    "RunView",
    "child",
    "current",
    "decode_view",
    "draw",
    "ends",
    "fail",
    "failed",
    "otlp_provider",
    "start",
    "traceparent",
    "tracer_of",
    "traces_url",
]
