"""Span records sent over OTLP/HTTP: evalport's own protobuf encoder and background sender.

Rules:

- :func:`encode` writes an ``ExportTraceServiceRequest`` (OpenTelemetry's
  ``collector/trace/v1`` protobuf) by hand, with only what evalport emits: one resource
  (its attributes), one instrumentation scope, and spans with ids, parent, name, kind,
  times, attributes (strings, booleans, integers, floats, lists of them), events and an
  error status. It is sent as ``application/x-protobuf``, the one content type every
  collector takes (Arize Phoenix takes no other).
- :class:`OtlpExporter` encodes each span as it is handed over and sends them in the
  background: a bounded queue (``queue`` spans) drained by one thread in batches of at most 512, every ``OTEL_BSP_SCHEDULE_DELAY``
  ms (5,000 by default) or as soon as a batch is full. Spans that find the queue full and
  spans of an export that failed (a collector that is down, a timeout) are dropped,
  counted and logged on ``evalport.tracing``: nothing waits for a collector but
  :meth:`OtlpExporter.shutdown` (called at exit, too), which sends what is queued.
- The standard variables apply as OpenTelemetry's SDK reads them: ``OTEL_SERVICE_NAME``,
  ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value`` pairs
  separated by commas, values percent-decoded), ``OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds,
  10 by default). A base URL gets ``/v1/traces`` appended, as the standard
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` does.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
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
        return _field(b"\x0a", value.encode())
    if value is True or value is False:
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, list | tuple):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _value(item)) for item in value))
    return _field(b"\x0a", str(value).encode())


def _pair(tag: bytes, name: str, value: Any) -> bytes:
    """One ``KeyValue`` (key 1, value 2) as a field under ``tag``."""
    key = name.encode()
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
        _field(b"\x2a", record.name.encode()),
        b"\x30",
        _SMALL[record.kind],
        b"\x39",
        _FIXED64.pack(record.start),
        b"\x41",
        _FIXED64.pack(record.end),
        _attributes(b"\x4a", record.attributes),
    )
    for event in record.events:
        body = b"\x09" + _FIXED64.pack(event.time) + _field(b"\x12", event.name.encode())
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


def _seconds(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


class OtlpExporter:
    """The OTLP/HTTP sink of :mod:`evalport.protocol._otel` (see the rules)."""

    def __init__(
        self, endpoint: str, service: str, *, queue: int = QUEUE_SIZE, scope: str = "evalport"
    ) -> None:
        self.url = traces_url(endpoint)
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"{endpoint!r} is not an http:// or https:// URL")
        self.dropped = 0
        self._queue_size = queue
        self._resource = resource_attributes(service)
        self._scope = scope
        self._headers = {"Content-Type": "application/x-protobuf"}
        self._headers.update(_pairs(os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")))
        self._timeout = _seconds("OTEL_EXPORTER_OTLP_TIMEOUT", 10.0)
        self._delay = _seconds("OTEL_BSP_SCHEDULE_DELAY", 5000.0) / 1000
        self._queued: list[bytes] = []  # spans encoded as they come: no live objects wait
        self._overflow = 0
        self._closed = False
        self._flushing = False
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
        """Queue ``records`` for export, or drop them (counted) if the queue is full."""
        spans = [encoded_span(record) for record in records]
        with self._wake:
            if self._closed or len(self._queued) + len(records) > self._queue_size:
                self._overflow += len(records)
                return
            self._queued += spans
            if len(self._queued) >= BATCH:
                self._wake.notify()

    def force_flush(self) -> None:
        """Send what is queued now, and wait for it."""
        with self._wake:
            self._flushing = True
            self._wake.notify()
            while self._flushing and self._thread.is_alive():
                self._wake.wait(0.1)

    def shutdown(self) -> None:
        """Send what is queued, then stop (the exporter takes no more spans)."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            self._wake.notify()
        self._thread.join(self._timeout + 5)
        atexit.unregister(self.shutdown)

    def _run(self) -> None:
        while True:
            with self._wake:
                if not (self._closed or self._flushing or len(self._queued) >= BATCH):
                    self._wake.wait(self._delay)
                batch, self._queued = self._queued[:BATCH], self._queued[BATCH:]
                overflow, self._overflow = self._overflow, 0
                done = self._closed and not self._queued
                if not self._queued:
                    self._flushing = False
                    self._wake.notify_all()
            if overflow:
                self._lost(overflow, "the trace queue was full: dropped")
            if batch:
                self._export(batch)
            if done:
                return

    def _export(self, batch: list[bytes]) -> None:
        body = export_request(self._resource, self._scope, batch)
        request = urllib.request.Request(self.url, body, self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as answer:
                answer.read()
        except (OSError, ValueError) as error:  # urllib's errors are OSErrors
            logger.debug("span export failed: %s", error)
            self._lost(len(batch), "the trace collector did not take")

    def _lost(self, count: int, why: str) -> None:
        with self._wake:
            self.dropped += count
            total = self.dropped
        logger.warning("%s %d span(s); %d dropped so far", why, count, total)
