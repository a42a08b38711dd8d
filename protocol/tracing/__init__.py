"""Traces of runs through OpenTelemetry, shared by the runner and the server (``evalport[otel]``).

Rules:

- evalport draws its spans through the OpenTelemetry API, and nothing more: the
  ``TracerProvider`` it is given (the host's own, the global one, or the SDK's that
  :func:`otlp_provider` builds for ``--otlp``) samples, batches and exports them. With
  ``--otlp`` that is the SDK's ``BatchSpanProcessor`` and OTLP/HTTP exporter, which read
  the standard ``OTEL_*`` variables themselves (sampler, batch sizes, headers,
  ``OTEL_SDK_DISABLED``...). This package needs the ``otel`` extra; the rest of
  :mod:`evalport.protocol` never imports it.
- A root span (a trial, a served turn) is a live span while it runs, and the current
  span, so that spans made inside (an agent's own, an HTTP client's) nest under it. It
  continues the trace a W3C ``traceparent`` names (:func:`start`) and names itself in
  the ``traceparent`` its requests carry (:func:`traceparent`), through OpenTelemetry's
  W3C propagator; whether it is sampled is the sampler's decision, which the flag
  carries across the wire. A span that is not recording draws nothing under it.
- Under it, the run is drawn once, after the fact, with the times the run recorded
  (:func:`draw`): spans follow OpenTelemetry's GenAI semantic conventions, a turn an
  ``invoke_agent`` span, each step a ``chat`` span (its model, token usage and finish
  reason), each tool execution an ``execute_tool`` span (tool name, call id, and
  ``error.type`` when it failed). evalport's own attributes start with ``evalport.``.
- Spans are drawn only from a run that already passed a trace policy: what a span
  carries (tool arguments and results, messages, error texts) is what the reports show,
  digests included, and nothing else.
- A recorded time OTLP cannot carry (before 1970, such as a Go agent's zero
  ``time.Time``, ``0001-01-01T00:00:00Z``, or after 2554) counts as not recorded. A step
  or tool execution with no start starts when its root span ended; one with no end ends
  when it started.
- Tracing never fails what it traces: spans that cannot be drawn or ended are dropped
  and logged on ``evalport.tracing`` (:func:`failed`), and the trial or turn goes on as
  it would untraced.
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
