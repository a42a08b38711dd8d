"""OTLP's protobuf, written by hand: the body of an ``ExportTraceServiceRequest``.

Rules:

- :func:`encode` writes an ``ExportTraceServiceRequest`` (OpenTelemetry's
  ``collector/trace/v1`` protobuf) with only what evalport emits: one resource (its
  attributes), one instrumentation scope, and spans with ids, parent, name, kind, times,
  attributes (strings, booleans, integers, floats, NaN and infinities included, as
  doubles; lists of them), events and an error status. Text that is not valid Unicode (a
  lone surrogate) has ``?`` in place of what UTF-8 cannot carry. It is sent as
  ``application/x-protobuf``, the one content type every collector takes (Arize Phoenix
  takes no other).
- A span that cannot be encoded (a time before 1970, a value of no known type that
  ``str()`` fails on) raises: the caller drops it (:class:`~._otlp.OtlpExporter` counts it).
"""

from __future__ import annotations

import ssl
import struct
from collections.abc import Mapping
from typing import Any, Final

from ._otel import SpanRecord

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
