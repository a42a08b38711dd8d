"""The OTLP worker process: span material in on stdin, protobuf over HTTP out.

``python -m evalport.protocol._otlp_worker`` is started by
:class:`~._otlp.OtlpExporter` (one per exporter) and does the exporter's work off the
traced process: it draws the spans a :class:`~._otel.Draw` names, encodes them and sends
them in batches. Rules:

- The parent writes frames to the worker's stdin, each a 4-byte big-endian length and
  a JSON document: first the :class:`Settings`, then :class:`Spans`. The worker writes
  one JSON :class:`Report` a line to its stdout for each loss (spans dropped, counted by
  the parent) or failure (a warning), and nothing else; it binds no port and only makes
  outgoing requests.
- End of input (the parent's shutdown, or the parent's death) ends it: it sends what is
  queued within one export timeout, reports what is left, and exits. Ctrl-C, sent to
  the whole process group, is the parent's to handle: the worker ignores it.
- :func:`encode` writes an ``ExportTraceServiceRequest`` (OpenTelemetry's
  ``collector/trace/v1`` protobuf) by hand, with only what evalport emits: one resource
  (its attributes), one instrumentation scope, and spans with ids, parent, name, kind,
  times, attributes (strings, booleans, integers, floats, lists of them), events and an
  error status. Text that is not valid Unicode (a lone surrogate) has ``?`` in place of
  what UTF-8 cannot carry. It is sent as ``application/x-protobuf``, the one content
  type every collector takes (Arize Phoenix takes no other).
- :class:`Sender` keeps a bounded queue (``queue`` spans, each encoded as it comes) drained
  by one thread in batches of at most 512, every ``OTEL_BSP_SCHEDULE_DELAY`` ms or as
  soon as a batch is full. Spans that find the queue full, spans that cannot be drawn
  or encoded and spans of an export that failed (a collector that is down, a timeout,
  an answer that is not HTTP) are dropped and reported; no error stops the sending
  thread. :meth:`Sender.shutdown` sends what is queued within one export timeout in
  all, then reports whatever is still queued or in flight as dropped.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import signal
import ssl
import struct
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, Final

import msgspec

from ._otel import Draw, SpanRecord, draw

BATCH: Final = 512
LENGTH: Final = struct.Struct(">I")
"""The length before each frame on the worker's stdin."""


class Settings(msgspec.Struct, gc=False):
    """Where and how the worker sends (the parent read and checked the standard variables)."""

    url: str
    headers: dict[str, str]
    gzip: bool
    timeout: float
    delay: float
    resource: dict[str, Any]
    scope: str
    queue: int
    ca: str = ""
    cert: str = ""
    key: str = ""


class Spans(msgspec.Struct, gc=False, array_like=True):
    """Spans handed over: ``records`` as drawn, and what is left to draw under the first."""

    records: list[SpanRecord]
    draw: Draw | None = None


class Report(msgspec.Struct, gc=False):
    """``count`` spans dropped, and why; ``count`` 0: a failure to log, spans uncounted."""

    count: int
    why: str


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


_KEYS: dict[str, bytes] = {}


def _pair(tag: bytes, name: str, value: Any) -> bytes:
    """One ``KeyValue`` (key 1, value 2) as a field under ``tag``."""
    key = _KEYS.get(name)
    if key is None:  # attribute names recur: each encoded once
        if len(_KEYS) >= _PAIRS_KEPT:
            _KEYS.clear()
        key = _KEYS[name] = _field(b"\x0a", name.encode(errors="replace"))
    if value.__class__ is str:
        text = value.encode(errors="replace")
        encoded = b"\x0a" + _varint(len(text)) + text
    else:
        encoded = _value(value)
    body = key + b"\x12" + _varint(len(encoded)) + encoded
    return tag + _varint(len(body)) + body


def _attributes(tag: bytes, attributes: Mapping[str, Any]) -> bytes:
    """Repeated ``KeyValue`` fields under ``tag``. Pairs that recur (an operation name, a
    model, a flag, a count; not long texts) are encoded once and kept: half of the
    encoder's time in benchmarks/runner.py workload 4."""
    parts = []
    for name, value in attributes.items():
        kind = value.__class__
        if (kind is str and len(value) > 32) or kind is list:  # texts and ids seldom recur
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


def tls_context(ca: str, cert: str, key: str) -> ssl.SSLContext | None:
    """The TLS context of a CA file and a client certificate and key (``OSError`` or
    ``ssl.SSLError`` when one cannot be read), or ``None`` when neither is given."""
    if not (ca or cert):
        return None
    context = ssl.create_default_context(cafile=ca or None)
    if cert:
        context.load_cert_chain(cert, key or None)
    return context


Lost = Callable[[int, str], None]


class Sender:
    """The worker's bounded queue and sending thread (see the rules); ``lost(count, why)``
    hears of every span dropped."""

    def __init__(self, settings: Settings, lost: Lost) -> None:
        self._settings = settings
        self._lost = lost
        self._tls = tls_context(settings.ca, settings.cert, settings.key)
        self._headers = dict(settings.headers)
        self._queued: list[bytes] = []  # spans encoded as they come: no live objects wait
        self._sending = 0  # spans of the export under way
        self._overflow = 0
        self._closed = False
        self._abandoned = False  # shutdown's deadline passed: what is left was counted
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="evalport-otlp", daemon=True)
        self._thread.start()

    def add(self, records: list[SpanRecord]) -> None:
        """Queue ``records``, or drop them (reported) if the queue is full or one of them
        cannot be encoded."""
        try:
            spans = [encoded_span(record) for record in records]
        except Exception:  # a span that cannot be encoded loses the others nothing
            self._lost(len(records), "a span could not be encoded: dropped")
            return
        with self._wake:
            if len(self._queued) + len(records) <= self._settings.queue:
                self._queued += spans
                if len(self._queued) >= BATCH:
                    self._wake.notify()
                return
            self._overflow += len(records)

    def shutdown(self) -> None:
        """Send what is queued within one export timeout, then report what is left."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(self._settings.timeout)
        with self._wake:
            if not self._thread.is_alive():
                return
            self._abandoned = True
            left = len(self._queued) + self._sending + self._overflow
            self._queued, self._sending, self._overflow = [], 0, 0
        if left:
            timeout = self._settings.timeout
            self._lost(left, f"shutdown waited {timeout:g} s for the trace collector: dropped")

    def _run(self) -> None:
        while True:
            try:
                if not self._send_next():
                    return
            except Exception as error:  # never stop: every span after would be lost unseen
                self._lost(0, f"the trace sender failed ({type(error).__name__}); it goes on")

    def _send_next(self) -> bool:
        """Wait for a batch and send it; ``False`` once closed and drained."""
        with self._wake:
            if not (self._closed or len(self._queued) >= BATCH):
                self._wake.wait(self._settings.delay)
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
        settings = self._settings
        try:
            body = export_request(settings.resource, settings.scope, batch)
            if settings.gzip:
                body = gzip.compress(body)
            request = urllib.request.Request(settings.url, body, self._headers, method="POST")
            with urllib.request.urlopen(
                request, timeout=settings.timeout, context=self._tls
            ) as answer:
                answer.read()
        except Exception:  # urllib's OSErrors, http.client's errors, any other
            with self._wake:
                if self._abandoned:  # counted by shutdown already
                    return
            self._lost(len(batch), "the trace collector did not take")


def _frames(source: BinaryIO) -> Any:
    """Each frame's bytes, until the end of input (or a frame cut short by it)."""
    while True:
        head = source.read(LENGTH.size)
        if len(head) < LENGTH.size:
            return
        body = source.read(LENGTH.unpack(head)[0])
        if len(body) < LENGTH.unpack(head)[0]:
            return
        yield body


def serve(source: BinaryIO, out: BinaryIO) -> None:
    """Take frames from ``source`` until it ends, reporting on ``out`` (see the rules)."""
    writing = threading.Lock()
    report_encoder = msgspec.json.Encoder()

    def report(count: int, why: str) -> None:
        line = report_encoder.encode(Report(count, why)) + b"\n"
        with writing:
            try:
                out.write(line)
                out.flush()
            except (OSError, ValueError):  # the parent is gone: nobody left to tell
                pass

    frames = _frames(source)
    first = next(frames, None)
    if first is None:
        return
    settings = msgspec.json.decode(first, type=Settings)
    try:
        sender = Sender(settings, report)
    except (OSError, ssl.SSLError) as error:
        report(0, f"the trace worker cannot use its TLS files ({type(error).__name__})")
        return
    decode_spans = msgspec.json.Decoder(Spans).decode
    for frame in frames:
        try:
            spans = decode_spans(frame)
        except (msgspec.DecodeError, RecursionError) as error:
            report(0, f"the trace worker could not read spans handed over ({error})")
            continue
        records = spans.records
        if spans.draw is not None and records:
            try:
                records = records + draw(records[0], spans.draw)
            except Exception as error:  # tracing never fails: the root goes without them
                report(
                    0,
                    f"drawing {records[0].name} failed ({type(error).__name__}): "
                    "its spans were dropped",
                )
        sender.add(records)
    sender.shutdown()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.stdin.buffer, sys.stdout.buffer)
    with contextlib.suppress(OSError, ValueError):  # the parent is gone: nobody to tell
        sys.stdout.flush()
    os._exit(0)  # nothing is left to do: no interpreter teardown to wait for at exit


if __name__ == "__main__":
    main()
