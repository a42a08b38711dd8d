"""The tracing benchmarks' reference: the OpenTelemetry Python SDK's standard pipeline.

:func:`sdk_provider` is what a user of the SDK configures to send traces to an OTLP/HTTP
collector: a ``TracerProvider`` of its own (never the global one) with the
``service.name`` resource, and a ``BatchSpanProcessor`` over ``OTLPSpanExporter``
(protobuf over HTTP) to ``<sink>/v1/traces``. Passed as ``EvalAdapter(tracing=provider)``
or ``traced_trials(provider)``, it receives the same spans as ``--otlp`` exports, replayed
through the OpenTelemetry API (``protocol/_otel_api.py``): the SDK's rows are what those
spans cost the standard way, beside evalport's own exporter.

It needs ``opentelemetry-exporter-otlp-proto-http`` (it brings the SDK), which no extra of
evalport's installs: ``.venv/bin/pip install opentelemetry-exporter-otlp-proto-http``.
Without it :func:`installed` is false and the benchmarks print :data:`SKIPPED`.
"""

from __future__ import annotations

import importlib.util
from typing import Any

SKIPPED = (
    "opentelemetry-exporter-otlp-proto-http is not installed (.venv/bin/pip install"
    " opentelemetry-exporter-otlp-proto-http): the OpenTelemetry SDK rows are skipped"
)


def installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None
    except ModuleNotFoundError:  # not even the opentelemetry namespace
        return False


def sdk_provider(sink: str, service: str, queue: int | None = None) -> Any:
    """A ``TracerProvider`` exporting to the sink at ``sink`` (a base URL) through a
    ``BatchSpanProcessor`` holding ``queue`` spans at most (the SDK's default, 2048, for
    ``None``: as ``OTEL_BSP_MAX_QUEUE_SIZE`` would set it)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=f"{sink}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue))
    return provider
