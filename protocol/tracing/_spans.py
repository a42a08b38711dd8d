"""Root spans, their context on the wire, and the provider ``--otlp`` builds.

Its exporter reads bounded replies and never follows a redirect: see ARCHITECTURE.md,
"Tracing".
"""

from __future__ import annotations

import io
import logging
import time
from contextlib import AbstractContextManager
from typing import Any, Final
from urllib.parse import urlsplit

import requests
from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ._draw import ERROR

logger = logging.getLogger("evalport.tracing")

_W3C: Final = TraceContextTextMapPropagator()

MAX_REPLY_BYTES: Final = 64 << 10
"""The largest collector reply read (an OTLP reply is a few bytes)."""


class _BoundedReplies(requests.adapters.HTTPAdapter):
    """The exporter's requests adapter (ARCHITECTURE.md, "Tracing")."""

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        response = super().send(request, True, timeout, verify, cert, proxies)
        wait = timeout if isinstance(timeout, int | float) else 10.0
        deadline = time.monotonic() + wait
        body = bytearray()
        try:
            if response.is_redirect:
                raise requests.exceptions.InvalidURL(
                    f"the collector redirects ({response.status_code})"
                )
            while chunk := response.raw.read1(4096):
                body += chunk
                if len(body) > MAX_REPLY_BYTES:
                    raise requests.exceptions.ContentDecodingError(
                        f"the collector's reply is larger than {MAX_REPLY_BYTES} bytes"
                    )
                if time.monotonic() > deadline:
                    raise requests.exceptions.ReadTimeout(
                        f"the collector's reply took longer than {wait} s"
                    )
        except BaseException:
            response.close()
            raise
        response.raw = io.BytesIO(bytes(body))
        return response


def failed(what: str, error: BaseException) -> None:
    """Log that ``what`` failed with ``error`` and its spans were dropped; the error's
    text may carry a payload: its type only, but at debug level."""
    logger.warning("%s failed (%s): its spans were dropped", what, type(error).__name__)
    logger.debug("%s failed", what, exc_info=error)


def tracer_of(provider: Any, scope: str) -> Tracer:
    """The tracer named ``scope`` of ``provider``, a ``TracerProvider`` or ``True`` for the
    global one."""
    if provider is True:
        return trace.get_tracer(scope)
    tracer: Tracer = provider.get_tracer(scope)
    return tracer


def start(
    tracer: Tracer,
    name: str,
    kind: SpanKind,
    attributes: dict[str, Any],
    traceparent: str | None = None,
) -> Span:
    """A root span starting now, continuing the trace a W3C ``traceparent`` names (the
    current context without one, or with a malformed one)."""
    parent = None
    if traceparent:
        parent = _W3C.extract({"traceparent": traceparent}, context.get_current())
    return tracer.start_span(name, parent, kind, attributes)


def current(span: Span) -> AbstractContextManager[Any]:
    """``span`` as the current span while its trial or turn runs, so that spans made
    inside nest under it; no exception event (its text may carry a payload)."""
    return trace.use_span(span, record_exception=False, set_status_on_exception=False)


def traceparent(span: Span) -> dict[str, str]:
    """The ``traceparent`` header naming ``span`` as the parent (none for a span that is
    no span, such as a disabled SDK's)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, trace.set_span_in_context(span))
    return carrier


def child(tracer: Tracer, parent: Span, name: str, attributes: dict[str, Any]) -> Span:
    """An internal span under ``parent``, starting now."""
    return tracer.start_span(name, trace.set_span_in_context(parent), attributes=attributes)


def fail(span: Span, error_type: str) -> None:
    """Mark ``span`` failed: ``error.type`` and status ``ERROR``."""
    span.set_attribute("error.type", error_type)
    span.set_status(ERROR)


def traces_url(url: str) -> str:
    """The OTLP/HTTP traces URL of ``url``: ``/v1/traces`` appended to a base URL (a URL
    ending in it is kept); ``ValueError`` for one that is not ``http(s)://``."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    base = url.strip().rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def otlp_provider(url: str | None, service: str) -> TracerProvider:
    """An SDK ``TracerProvider`` exporting through a ``BatchSpanProcessor`` and the
    OTLP/HTTP exporter, to ``url`` (see :func:`traces_url`), else where the standard
    variables say; everything else is the SDK's, from the standard variables. The
    service is named ``service`` unless ``OTEL_SERVICE_NAME`` or
    ``OTEL_RESOURCE_ATTRIBUTES`` name it."""
    endpoint = traces_url(url) if url else None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    provider = TracerProvider(resource=resource)
    session = requests.Session()
    session.mount("http://", _BoundedReplies())
    session.mount("https://", _BoundedReplies())
    exporter = OTLPSpanExporter(endpoint=endpoint, session=session)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def ends(span: Span, end: int | None, what: str) -> None:
    """End ``span`` at ``end`` (now for ``None``), logging what fails (a span processor
    that raises)."""
    try:
        span.end(end)
    except Exception as error:
        failed(what, error)
