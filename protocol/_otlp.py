"""Span records sent over OTLP/HTTP: evalport's own exporter and its background thread.

Rules:

- :class:`OtlpExporter` (the sink of ``evalport run --otlp`` and ``evalport serve
  --otlp``) takes each trial's or turn's spans as they end, as they are: the records
  drawn so far and what is left to draw (:class:`~._otel.Draw`, the run's JSON). Handing
  them over only appends them to a bounded queue: it never draws, encodes, raises or
  waits. One background thread of the exporter draws (:func:`~._otel.draw`), encodes
  (:mod:`~._otlp_proto`) and sends them, a batch at a time: every
  ``OTEL_BSP_SCHEDULE_DELAY`` ms (5,000 by default), as soon as a batch of spans waits,
  or as soon as a handover finds the queue full, in requests of at most a batch (``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, 512 by default, at
  most the queue). Done back to back, drawing and encoding cost a trial a third of what
  they cost between trials (the caches stay warm: benchmarks/runner.py workload 4).
- Whether a trial or turn is traced is decided when its root span begins, by the sampler
  ``OTEL_TRACES_SAMPLER`` names (:mod:`._sampling`): an unsampled one hands nothing over,
  and its ``traceparent`` says so to the service it calls.
- The queue holds at most ``OTEL_BSP_MAX_QUEUE_SIZE`` spans, else ``queue`` (the caller's
  default): a handover counts its records, plus one span for what is left to draw, if
  any (how many it holds is known only once drawn). A handover goes in whole or not at
  all, so a queue smaller than one (a served turn's counts 2) takes none. It also holds at most
  :data:`QUEUE_BYTES` of runs still to draw (a served turn hands over its whole run,
  which a long session makes large), and :data:`WAKE_BYTES` of them wake the thread as a
  batch of spans does. Spans that find the queue full, spans that cannot be drawn
  (counted as that one span) or encoded, and spans of an export that failed (a collector
  that is down, a timeout, an answer that is not HTTP) are dropped, counted in
  :attr:`OtlpExporter.dropped` and logged on ``evalport.tracing``; no error stops the
  thread.
- Nothing waits for a collector but :meth:`OtlpExporter.shutdown` (called at exit, too),
  which draws and sends what is queued within one export timeout in all, then counts and
  logs as dropped whatever is still queued, drawn and not yet sent, or in flight, so a
  collector that swallows packets delays an exit by that timeout at most. From then on
  the thread sends nothing more and counts nothing more: each span is counted once.
- The standard variables apply as OpenTelemetry's SDK reads them, a ``_TRACES_`` one over
  its general one, read and checked at construction: ``OTEL_SERVICE_NAME``,
  ``OTEL_RESOURCE_ATTRIBUTES``, headers (``key=value`` pairs separated by commas, values
  percent-decoded), the timeout (seconds, 10 by default: each request's, and shutdown's
  in all), a CA file and a client certificate and key for ``https``, ``gzip``
  compression, the protocol, which must be ``http/protobuf``, the sampler, and the batch
  processor's sizes and delay. ``OTEL_BSP_EXPORT_TIMEOUT`` is read and does nothing, as
  in the SDK, whose batch processor passes it to no exporter: the timeout above bounds
  each export. ``OTEL_SDK_DISABLED=true`` (:func:`sdk_disabled`) is for the commands to
  read: they then build no exporter. A base URL (``--otlp``,
  ``OTEL_EXPORTER_OTLP_ENDPOINT``) gets ``/v1/traces`` appended; the URL of
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as it is.
- What the SDK falls back from, evalport falls back from, with a warning on
  ``evalport.tracing`` naming the variable: a number that does not read as one, an
  unknown sampler, a sampler ratio outside 0..1. What it can read but cannot honour is a
  ``ValueError`` naming the variable, at construction: a protocol other than
  ``http/protobuf``, a compression other than ``gzip`` or ``none``, a certificate that
  cannot be read, a size, delay or timeout that is not positive, a batch larger than the
  queue.
"""

from __future__ import annotations

import atexit
import collections
import gzip
import logging
import math
import os
import ssl
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, Final

from ._otel import Draw, OpenSpan, SpanRecord, draw, root_record
from ._otlp_proto import encoded_span, export_request, tls_context
from ._sampling import configured_sampler

logger = logging.getLogger("evalport.tracing")

QUEUE_SIZE: Final = 2048
"""Spans waiting for export at most (a server's default); more are dropped and counted."""
BATCH: Final = 512
"""Spans per request at most by default (or the queue's size, if smaller); as many
waiting wake the thread."""
QUEUE_BYTES: Final = 64 << 20
"""Bytes of runs waiting to be drawn at most (a served turn hands over its whole run)."""
WAKE_BYTES: Final = 4 << 20
"""Bytes of runs waiting that wake the thread, as :data:`BATCH` spans do."""


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for ``endpoint``: a base URL gets ``/v1/traces`` (as the
    standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` does); a URL ending in it is kept."""
    url = endpoint.rstrip("/")
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


def _pairs(value: str) -> Iterator[tuple[str, str]]:
    for item in value.split(","):
        key, equals, text = item.partition("=")
        if equals and key.strip():
            yield key.strip(), urllib.parse.unquote(text.strip())


def resource_attributes(service: str) -> dict[str, Any]:
    """The resource of the exported spans: ``OTEL_RESOURCE_ATTRIBUTES``, then the service
    name (``OTEL_SERVICE_NAME`` over ``service``)."""
    attributes: dict[str, Any] = {
        "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "evalport",
    }
    attributes.update(_pairs(os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")))
    attributes["service.name"] = os.environ.get("OTEL_SERVICE_NAME") or service
    return attributes


def _standard(name: str) -> tuple[str, str]:
    """The variable that sets ``name`` and its value: ``OTEL_EXPORTER_OTLP_TRACES_<name>``
    over ``OTEL_EXPORTER_OTLP_<name>`` (``""`` when neither is set)."""
    for variable in (f"OTEL_EXPORTER_OTLP_TRACES_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = os.environ.get(variable, "").strip()
        if value:
            return variable, value
    return f"OTEL_EXPORTER_OTLP_{name}", ""


STANDARD_VARIABLES: Final = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_EXPORT_TIMEOUT",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_SDK_DISABLED",
)
"""Every environment variable the exporter and its sampler read (docs/tracing.md lists
each)."""


def sdk_disabled() -> bool:
    """Whether ``OTEL_SDK_DISABLED`` is ``true`` (in any case), as the SDK reads it."""
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def configured_endpoint(option: str | None) -> tuple[str, bool] | None:
    """Where spans go, and whether that URL is used as it is: ``option`` (``--otlp``, a
    base URL), else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (as it is), else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL); ``None`` when none is set."""
    if option:
        return option, False
    exact = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if exact:
        return exact, True
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return (base, False) if base else None


def _number(variable: str, default: float, read: Callable[[str], float] = float) -> float:
    """The number ``variable`` is set to, or ``default``: unset, or not a number (logged,
    see the rules)."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        return read(text)
    except ValueError:
        logger.warning(
            "%s=%s is not a%s number: using %g, the default, as OpenTelemetry's SDK does",
            variable,
            text,
            " whole" if read is int else "",
            default,
        )
        return default


def _positive(variable: str, default: float, read: Callable[[str], float] = float) -> float:
    """:func:`_number`, which must be positive (else a ``ValueError``, see the rules)."""
    value = _number(variable, default, read)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{variable}={value:g} is not a positive number")
    return value


def _sizes(queue: int) -> tuple[int, int]:
    """Spans queued at most and spans per batch: ``OTEL_BSP_MAX_QUEUE_SIZE`` over
    ``queue``, ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` over :data:`BATCH` (cut to the queue)."""
    queue = int(_positive("OTEL_BSP_MAX_QUEUE_SIZE", queue, int))
    batch = int(_positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", min(BATCH, queue), int))
    if batch > queue:
        raise ValueError(
            f"OTEL_BSP_MAX_EXPORT_BATCH_SIZE={batch} is more than the {queue} spans the "
            "queue holds (OTEL_BSP_MAX_QUEUE_SIZE): set it to at most that"
        )
    return queue, batch


def _protocol() -> None:
    variable, value = _standard("PROTOCOL")
    if value and value != "http/protobuf":
        raise ValueError(
            f"{variable}={value} is not supported: evalport sends http/protobuf only; set "
            "it to http/protobuf (or unset it) and give the collector's OTLP/HTTP URL "
            "(port 4318 by default)"
        )


def _compression() -> bool:
    """Whether requests are gzipped."""
    variable, value = _standard("COMPRESSION")
    if value not in ("", "none", "gzip"):
        raise ValueError(f"{variable}={value} is not supported: use gzip or none")
    return value == "gzip"


def _tls() -> ssl.SSLContext | None:
    """The TLS context the certificate variables ask for, or ``None`` (the default)."""
    ca_variable, ca = _standard("CERTIFICATE")
    cert_variable, cert = _standard("CLIENT_CERTIFICATE")
    key = _standard("CLIENT_KEY")[1]
    if ca:
        try:
            ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(f"{ca_variable}={ca}: not a readable CA file ({error})") from None
    try:
        return tls_context(ca, cert, key)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(
            f"{cert_variable}={cert}: not a readable certificate and key ({error})"
        ) from None


Handover = tuple[list[SpanRecord], Draw | None]


class OtlpExporter:
    """The OTLP/HTTP sink of :mod:`evalport.protocol._otel` (see the rules)."""

    def __init__(
        self,
        endpoint: str,
        service: str,
        *,
        queue: int = QUEUE_SIZE,
        scope: str = "evalport",
        exact: bool = False,
    ) -> None:
        """``endpoint``: a base URL (``/v1/traces`` appended) or, ``exact``, the whole
        traces URL; ``queue``: the spans queued at most unless ``OTEL_BSP_MAX_QUEUE_SIZE``
        says. ``ValueError`` for a URL that is not http(s) or a standard variable evalport
        cannot honour."""
        self.url = endpoint.strip() if exact else traces_url(endpoint)
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"{endpoint!r} is not an http:// or https:// URL")
        _protocol()
        self._gzip = _compression()
        self._tls = _tls()
        self._timeout = _positive(_standard("TIMEOUT")[0], 10.0)
        self._delay = _positive("OTEL_BSP_SCHEDULE_DELAY", 5000.0) / 1000
        _number("OTEL_BSP_EXPORT_TIMEOUT", 30000.0)  # read, as the SDK does, for nothing
        self._queue_size, self._batch = _sizes(queue)
        self._sampler = configured_sampler()
        self.dropped = 0
        """Spans dropped so far (see the rules)."""
        self._resource = resource_attributes(service)
        self._scope = scope
        self._headers = {"Content-Type": "application/x-protobuf"}
        self._headers.update(_pairs(_standard("HEADERS")[1]))
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._handovers: collections.deque[Handover] = collections.deque()
        self._queued = 0  # spans the handovers count (see the rules)
        self._queued_bytes = 0  # bytes of the runs they hold still to draw
        self._sending = 0  # spans taken by the thread, not yet sent
        self._overflow = 0
        self._closed = False
        self._abandoned = False  # shutdown's deadline passed: what is left was counted
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="evalport-otlp", daemon=True)
        self._thread.start()
        atexit.register(self.shutdown)

    # the sink

    def begin(
        self, name: str, kind: int, traceparent: str | None, attributes: dict[str, Any]
    ) -> OpenSpan:
        record, flags = root_record(name, kind, traceparent, attributes)
        parent = flags if record.parent_id else None  # the flags of a trace continued
        sampled = self._sampler.sampled(record.trace_id, parent)
        return OpenSpan(record, flags & ~1 | sampled)

    def current(self, span: OpenSpan) -> None:
        return None  # no live span: nothing to make current

    def finish(
        self, span: OpenSpan, children: list[SpanRecord], material: Draw | None = None
    ) -> None:
        if span.sampled:
            self._hand([span.record, *children] if children else [span.record], material)

    # the queue

    def add(self, records: list[SpanRecord]) -> None:
        """Queue ``records`` for export, or drop them (counted) if the queue is full;
        never raises."""
        self._hand(records, None)

    def _hand(self, records: list[SpanRecord], material: Draw | None) -> None:
        count = len(records) + (material is not None)
        size = len(material.run) if material is not None else 0
        with self._wake:
            closed = self._closed
            if (
                not closed
                and self._queued + count <= self._queue_size
                and self._queued_bytes + size <= QUEUE_BYTES
            ):
                self._handovers.append((records, material))
                self._queued += count
                self._queued_bytes += size
                if self._queued >= self._batch or self._queued_bytes >= WAKE_BYTES:
                    self._wake.notify()
                return
            if not closed:  # full: the thread empties it now, not at its next delay
                self._overflow += count
                self._wake.notify()
                return
        self._lost(count, "the exporter was shut down: dropped")

    def shutdown(self) -> None:
        """Draw and send what is queued within one export timeout, then stop (the
        exporter takes no more spans); what is still queued or in flight then is counted
        as dropped."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            self._wake.notify()
        self._thread.join(self._timeout)
        atexit.unregister(self.shutdown)
        with self._wake:
            if not self._thread.is_alive():
                return
            self._abandoned = True
            left = self._queued + self._sending + self._overflow
            self._handovers.clear()
            self._queued, self._queued_bytes, self._sending, self._overflow = 0, 0, 0, 0
        if left:
            self._lost(
                left, f"shutdown waited {self._timeout:g} s for the trace collector: dropped"
            )

    # the thread

    def _run(self) -> None:
        while True:
            try:
                if not self._send_next():
                    return
            except Exception:  # never stop: every span after would be lost unseen
                logger.exception("the trace sender failed; it goes on")

    def _send_next(self) -> bool:
        """Wait for a batch, draw, encode and send it; ``False`` once closed and drained."""
        with self._wake:
            if not (
                self._closed or self._queued >= self._batch or self._queued_bytes >= WAKE_BYTES
            ):
                self._wake.wait(self._delay)
            if self._abandoned:
                return False
            taken: list[Handover] = []
            count = 0
            size = 0
            while self._handovers and count < self._batch and size < WAKE_BYTES:
                records, material = handover = self._handovers.popleft()
                taken.append(handover)
                count += len(records) + (material is not None)
                size += len(material.run) if material is not None else 0
            self._queued -= count
            self._queued_bytes -= size
            self._sending = count
            overflow, self._overflow = self._overflow, 0
            done = self._closed and not self._handovers
        if overflow:
            self._lost(overflow, "the trace queue was full: dropped")
        spans: list[bytes] = []
        for records, material in taken:
            spans += self._encoded(records, material)
        with self._wake:
            if self._abandoned:  # counted by shutdown already
                return False
            self._sending = len(spans)  # the spans drawn, for the handovers they came of
        for start in range(0, len(spans), self._batch):
            if not self._export(spans[start : start + self._batch]):
                return False
        return not done

    def _encoded(self, records: list[SpanRecord], material: Draw | None) -> list[bytes]:
        """The spans of one handover, drawn and encoded; what cannot be is dropped."""
        counted = len(records) + (material is not None)  # what the handover counts
        if material is not None:
            try:
                records = records + draw(records[0], material)
            except Exception as error:  # the root and the rest go without them
                logger.debug("drawing %s failed", records[0].name, exc_info=error)
                name = records[0].name
                self._drop(1, 1, f"drawing {name} failed ({type(error).__name__}): dropped")
                counted -= 1
        try:
            return [encoded_span(record) for record in records]
        except Exception as error:  # a span that cannot be encoded loses the others nothing
            logger.debug("span encoding failed: %r", error)
            self._drop(len(records), counted, "a span could not be encoded: dropped")
            return []

    def _export(self, batch: list[bytes]) -> bool:
        """Send ``batch``; ``False`` once shutdown gave up on what is left (and counted
        it): nothing more is sent or counted."""
        with self._wake:
            if self._abandoned:
                return False
        try:
            body = export_request(self._resource, self._scope, batch)
            if self._gzip:
                body = gzip.compress(body)
            request = urllib.request.Request(self.url, body, self._headers, method="POST")
            with urllib.request.urlopen(
                request, timeout=self._timeout, context=self._tls
            ) as answer:
                answer.read()
        except Exception as error:  # urllib's OSErrors, http.client's errors, any other
            logger.debug("span export failed: %r", error)
            return self._drop(len(batch), len(batch), "the trace collector did not take")
        with self._wake:
            if self._abandoned:
                return False
            self._sending -= len(batch)
            return True

    def _drop(self, count: int, taken: int, why: str) -> bool:
        """Drop ``count`` spans the thread took, for ``taken`` of :attr:`_sending`;
        ``False`` (and nothing counted) once shutdown gave up and counted them."""
        with self._wake:
            if self._abandoned:
                return False
            self._sending -= taken
            self.dropped += count
            total = self.dropped
        logger.warning("%s %d span(s); %d dropped so far", why, count, total)
        return True

    def _lost(self, count: int, why: str) -> None:
        with self._wake:
            self.dropped += count
            total = self.dropped
        logger.warning("%s %d span(s); %d dropped so far", why, count, total)
