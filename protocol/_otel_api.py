"""Span records replayed into the OpenTelemetry API (``evalport[otel]``).

Rules:

- :class:`ApiSink` is the sink of :mod:`evalport.protocol._otel` for a ``TracerProvider``
  (the host's own, or the global one for ``True``): the root span of a trial or a turn is a live
  OpenTelemetry span while it runs, and the current span, so that instrumentation inside
  (an agent's own spans, an HTTP client's) nests under it; the records drawn under it
  are replayed as its descendants, with their recorded times, when it ends (each parent
  ends after its children, as live spans would). The
  provider's own processors and exporters then do the rest. What a
  :class:`~._otel.Draw` names is drawn there, inline (:func:`~._otel.draw`).
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from ._otel import Draw, OpenSpan, SpanRecord, draw, failed, remote_parent

_KINDS: Final = {1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT}
_ERROR: Final = Status(StatusCode.ERROR)


def _context(traceparent: str | None) -> Any:
    """The OpenTelemetry context a ``traceparent`` names, or ``None`` (the current one)."""
    parent = remote_parent(traceparent)
    if parent is None:
        return None
    trace_id, span_id, flags = parent
    remote = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    return trace.set_span_in_context(NonRecordingSpan(remote))


class ApiSink:
    """Replays records into ``provider``'s tracer named ``scope`` (see the rules)."""

    def __init__(self, provider: Any, scope: str) -> None:
        """``provider``: a ``TracerProvider``, or ``True`` for the global one."""
        if provider is True:
            provider = trace.get_tracer_provider()
        self._tracer = provider.get_tracer(scope)

    def begin(
        self, name: str, kind: int, traceparent: str | None, attributes: dict[str, Any]
    ) -> OpenSpan:
        span = self._tracer.start_span(
            name, context=_context(traceparent), kind=_KINDS[kind], attributes=attributes
        )
        ids = span.get_span_context()
        record = SpanRecord(ids.trace_id, ids.span_id, 0, name, kind, 0, 0, attributes)
        return OpenSpan(record, int(ids.trace_flags), span)

    def current(self, span: OpenSpan) -> Any:
        # no exception event: its message may carry what the trace policy would digest
        return trace.use_span(
            span.handle, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def finish(
        self, span: OpenSpan, children: list[SpanRecord], material: Draw | None = None
    ) -> None:
        live = span.handle
        try:
            if material is not None:
                try:
                    children = children + draw(span.record, material)
                except Exception as error:  # the root and the rest go without them
                    failed(f"drawing {span.record.name}", error)
            self._replay(live, span, children)
        finally:
            live.end()  # the live root ends whatever happened: none is left open

    def _replay(self, live: Any, span: OpenSpan, children: list[SpanRecord]) -> None:
        self._close(live, span.record)
        opened = {span.record.span_id: live}
        parents = {record.parent_id for record in children}
        waiting = []  # a parent ends after its children, as live spans would
        for record in children:
            parent = opened.get(record.parent_id, live)
            replayed = self._tracer.start_span(
                record.name,
                context=trace.set_span_in_context(parent),
                kind=_KINDS[record.kind],
                attributes=record.attributes,
                start_time=record.start,
            )
            opened[record.span_id] = replayed
            if record.span_id in parents:
                waiting.append((replayed, record))
            else:
                self._close(replayed, record, record.end)
        for replayed, record in reversed(waiting):
            self._close(replayed, record, record.end)

    def _close(self, span: Any, record: SpanRecord, end: int | None = None) -> None:
        if end is None:  # the live root: what was drawn after it started
            span.set_attributes(record.attributes)
        for event in record.events:
            span.add_event(event.name, event.attributes, timestamp=event.time)
        if record.error:
            span.set_status(_ERROR)
        if end is not None:
            span.end(end_time=end)
