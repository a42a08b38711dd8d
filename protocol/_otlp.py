"""Span records sent over OTLP/HTTP: evalport's own protobuf encoder and background sender.

Rules:

- :func:`encode` writes an ``ExportTraceServiceRequest`` (OpenTelemetry's
  ``collector/trace/v1`` protobuf) by hand, with only what evalport emits: one resource
  (its attributes), one instrumentation scope, and spans with ids, parent, name, kind,
  times, attributes (strings, booleans, integers, floats, lists of them), events and an
  error status. Text that is not valid Unicode (a lone surrogate) has ``?`` in place of
  what UTF-8 cannot carry. It is sent as ``application/x-protobuf``, the one content
  type every collector takes (Arize Phoenix takes no other).
- :class:`OtlpExporter` encodes each span as it is handed over and sends them in the
  background: a bounded queue (``queue`` spans) drained by one thread in batches of at
  most 512, every ``OTEL_BSP_SCHEDULE_DELAY`` ms (5,000 by default) or as soon as a batch
  is full. Spans that find the queue full, spans that cannot be encoded and spans of an
  export that failed (a collector that is down, a timeout, an answer that is not HTTP)
  are dropped, counted and logged on ``evalport.tracing``; handing spans over never
  raises, and no error stops the sending thread. Nothing waits for a collector but
  :meth:`OtlpExporter.shutdown` (called at exit, too), which sends what is queued within
  one export timeout in all, then counts and logs as dropped whatever is still queued or
  in flight, so a collector that swallows packets delays an exit by that timeout at most.
- The standard variables apply as OpenTelemetry's SDK reads them, a ``_TRACES_`` one over
  its general one (see :func:`settings`): ``OTEL_SERVICE_NAME``,
  ``OTEL_RESOURCE_ATTRIBUTES``, headers (``key=value`` pairs separated by commas, values
  percent-decoded), the timeout (seconds, 10 by default), a CA file and a client
  certificate and key for ``https``, ``gzip`` compression, and the protocol, which must
  be ``http/protobuf`` (another is a ``ValueError`` naming it). A base URL (``--otlp``,
  ``OTEL_EXPORTER_OTLP_ENDPOINT``) gets ``/v1/traces`` appended; the URL of
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as it is.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import logging
import os
import ssl
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ._otel import OpenSpan, SpanRecord, root_record

logger = logging.getLogger("evalport.tracing")

QUEUE_SIZE: Final = 2048
"""Spans waiting for export at most (a server's default); more are dropped and counted."""
BATCH: Final = 512

_DOUBLE: Final = struct.Struct("<d")
_FIXED64: Final = struct.Struct("<Q")
_SMALL: Final = [bytes((n,)) for n in range(128)]


def _varint(value: int) -> bytes:
    if value < 128:
        return _SMALL[value]
    out = bytearray()
    while value > 127:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte(s), the length, the payload."""
    return tag + _varint(len(payload)) + payload


_PAIRS: dict[tuple[bytes, str, type, Any], bytes] = {}
_PAIRS_KEPT: Final = 4096


def _value(value: Any) -> bytes:
    """An ``AnyValue``: string 1, bool 2, int 3, double 4, array 5."""
    if isinstance(value, str):
        return _field(b"\x0a", value.encode(errors="replace"))
    if value is True or value is False:
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, list | tuple):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _value(item)) for item in value))
    return _field(b"\x0a", str(value).encode(errors="replace"))


def _pair(tag: bytes, name: str, value: Any) -> bytes:
    """One ``KeyValue`` (key 1, value 2) as a field under ``tag``."""
    key = name.encode(errors="replace")
    encoded = _value(value)
    body = b"\x0a" + _varint(len(key)) + key + b"\x12" + _varint(len(encoded)) + encoded
    return tag + _varint(len(body)) + body


def _attributes(tag: bytes, attributes: Mapping[str, Any]) -> bytes:
    """Repeated ``KeyValue`` fields under ``tag``. Pairs that recur (an operation name, a
    model, a flag, a count; not long texts) are encoded once and kept: half of the
    encoder's time in benchmarks/runner.py workload 4."""
    parts = []
    for name, value in attributes.items():
        kind = value.__class__
        if (kind is str and len(value) > 64) or kind is list:
            parts.append(_pair(tag, name, value))
            continue
        key = (tag, name, kind, value)  # the class apart: True == 1, and 1 == 1.0
        pair = _PAIRS.get(key)
        if pair is None:
            if len(_PAIRS) >= _PAIRS_KEPT:
                _PAIRS.clear()
            pair = _PAIRS[key] = _pair(tag, name, value)
        parts.append(pair)
    return b"".join(parts)


def _span(record: SpanRecord) -> bytes:
    parts = [
        b"\x0a\x10",
        record.trace_id.to_bytes(16, "big"),
        b"\x12\x08",
        record.span_id.to_bytes(8, "big"),
    ]
    if record.parent_id:
        parts += (b"\x22\x08", record.parent_id.to_bytes(8, "big"))
    parts += (
        _field(b"\x2a", record.name.encode(errors="replace")),
        b"\x30",
        _SMALL[record.kind],
        b"\x39",
        _FIXED64.pack(record.start),
        b"\x41",
        _FIXED64.pack(record.end),
        _attributes(b"\x4a", record.attributes),
    )
    for event in record.events:
        name = _field(b"\x12", event.name.encode(errors="replace"))
        body = b"\x09" + _FIXED64.pack(event.time) + name
        parts.append(_field(b"\x5a", body + _attributes(b"\x1a", event.attributes)))
    if record.error:
        parts.append(b"\x7a\x02\x18\x02")  # Status { code: STATUS_CODE_ERROR }
    return b"".join(parts)


def encoded_span(record: SpanRecord) -> bytes:
    """``record`` as one ``ScopeSpans.spans`` field, ready to be joined into a request."""
    return _field(b"\x12", _span(record))


def export_request(resource: Mapping[str, Any], scope: str, spans: list[bytes]) -> bytes:
    """The ``ExportTraceServiceRequest`` carrying ``spans`` (from :func:`encoded_span`)."""
    scope_spans = _field(b"\x0a", _field(b"\x0a", scope.encode())) + b"".join(spans)
    resource_spans = _field(b"\x0a", _attributes(b"\x0a", resource)) + _field(b"\x12", scope_spans)
    return _field(b"\x0a", resource_spans)


def encode(resource: Mapping[str, Any], scope: str, records: list[SpanRecord]) -> bytes:
    """The ``ExportTraceServiceRequest`` carrying ``records`` (see the rules)."""
    return export_request(resource, scope, [encoded_span(record) for record in records])


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
)
"""Every environment variable the exporter reads (docs/tracing.md lists each)."""


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


def _seconds(default: float) -> float:
    """The export timeout: ``default`` unless a positive number of seconds is set."""
    try:
        value = float(_standard("TIMEOUT")[1] or default)
    except ValueError:
        return default
    return value if value > 0 else default


def _delay() -> float:
    try:
        return float(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", "") or 5000.0) / 1000
    except ValueError:
        return 5.0


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
    if not (ca or cert):
        return None
    try:
        context = ssl.create_default_context(cafile=ca or None)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"{ca_variable}={ca}: not a readable CA file ({error})") from None
    if cert:
        try:
            context.load_cert_chain(cert, key or None)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(
                f"{cert_variable}={cert}: not a readable certificate and key ({error})"
            ) from None
    return context


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
        traces URL. ``ValueError`` for a URL that is not http(s) or a standard variable
        evalport cannot honour."""
        self.url = endpoint.strip() if exact else traces_url(endpoint)
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"{endpoint!r} is not an http:// or https:// URL")
        _protocol()
        self._gzip = _compression()
        self._tls = _tls()
        self.dropped = 0
        self._queue_size = queue
        self._resource = resource_attributes(service)
        self._scope = scope
        self._headers = {"Content-Type": "application/x-protobuf"}
        self._headers.update(_pairs(_standard("HEADERS")[1]))
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._timeout = _seconds(10.0)
        self._delay = _delay()
        self._queued: list[bytes] = []  # spans encoded as they come: no live objects wait
        self._sending = 0  # spans of the export under way
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
        return OpenSpan(*root_record(name, kind, traceparent, attributes))

    def current(self, span: OpenSpan) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def finish(self, span: OpenSpan, children: list[SpanRecord]) -> None:
        if span.sampled:
            self.add([span.record, *children])

    # the queue

    def add(self, records: list[SpanRecord]) -> None:
        """Queue ``records`` for export, or drop them (counted) if the queue is full or one
        of them cannot be encoded; never raises."""
        try:
            spans = [encoded_span(record) for record in records]
        except Exception as error:  # a span that cannot be encoded loses its trial nothing
            logger.debug("span encoding failed: %r", error)
            self._lost(len(records), "a span could not be encoded: dropped")
            return
        with self._wake:
            closed = self._closed
            if not closed and len(self._queued) + len(records) <= self._queue_size:
                self._queued += spans
                if len(self._queued) >= BATCH:
                    self._wake.notify()
                return
            if not closed:
                self._overflow += len(records)
                return
        self._lost(len(records), "the exporter was shut down: dropped")

    def shutdown(self) -> None:
        """Send what is queued within one export timeout, then stop (the exporter takes
        no more spans); what is still queued or in flight then is counted as dropped."""
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
            left = len(self._queued) + self._sending + self._overflow
            self._queued, self._sending, self._overflow = [], 0, 0
        if left:
            self._lost(
                left, f"shutdown waited {self._timeout:g} s for the trace collector: dropped"
            )

    def _run(self) -> None:
        while True:
            try:
                if not self._send_next():
                    return
            except Exception:  # never stop: every span after would be lost unseen
                logger.exception("the trace sender failed; it goes on")

    def _send_next(self) -> bool:
        """Wait for a batch and send it; ``False`` once closed and drained."""
        with self._wake:
            if not (self._closed or len(self._queued) >= BATCH):
                self._wake.wait(self._delay)
            if self._abandoned:
                return False
            batch, self._queued = self._queued[:BATCH], self._queued[BATCH:]
            overflow, self._overflow = self._overflow, 0
            self._sending = len(batch)
            done = self._closed and not self._queued
        if overflow:
            self._lost(overflow, "the trace queue was full: dropped")
        if batch:
            self._export(batch)
        with self._wake:
            self._sending = 0
            return not (done or self._abandoned)

    def _export(self, batch: list[bytes]) -> None:
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
            with self._wake:
                if self._abandoned:  # counted by shutdown already
                    return
            self._lost(len(batch), "the trace collector did not take")

    def _lost(self, count: int, why: str) -> None:
        with self._wake:
            self.dropped += count
            total = self.dropped
        logger.warning("%s %d span(s); %d dropped so far", why, count, total)
