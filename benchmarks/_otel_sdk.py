"""The tracing benchmarks' reference: a bare OpenTelemetry SDK pipeline emitting the same spans.

``--otlp`` is the SDK's pipeline (:func:`evalport.protocol.tracing.otlp_provider`: a
``TracerProvider`` with a ``BatchSpanProcessor`` over the OTLP/HTTP exporter), so the
question is what evalport adds to it: drawing the spans from the run (decoding its view,
the attributes, the safe policy, the times). The reference side uses the same provider
and emits the same spans with nothing drawn: :func:`captured` records, once, the spans
evalport draws for one trial or turn (names, kinds, attributes, events, parentage), and
:func:`emit` starts and ends them again through the API under a root span, attributes
given as they are. Its CPU is the SDK's own cost for those spans (starting, ending,
queueing, encoding and sending them in the processor's thread).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Tracer


class Node(NamedTuple):
    """A span to emit: what evalport drew, and the spans under it."""

    name: str
    kind: trace.SpanKind
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    children: list[Node]


def in_memory() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A provider keeping the spans it ends, for :func:`captured`."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def captured(spans: tuple[ReadableSpan, ...]) -> Node:
    """The tree of ``spans`` (one root)."""
    ids = {span.context.span_id for span in spans}

    def node(span: ReadableSpan) -> Node:
        under = [
            s for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id
        ]
        return Node(
            span.name,
            span.kind,
            dict(span.attributes or {}),
            [(event.name, dict(event.attributes or {})) for event in span.events],
            [node(child) for child in sorted(under, key=lambda s: s.start_time or 0)],
        )

    (root,) = [span for span in spans if span.parent is None or span.parent.span_id not in ids]
    return node(root)


def emit(tracer: Tracer, parent: Span, nodes: list[Node]) -> None:
    """Start and end ``nodes`` (and theirs) under ``parent``, now."""
    context = trace.set_span_in_context(parent)
    for item in nodes:
        span = tracer.start_span(item.name, context, item.kind, item.attributes)
        emit(tracer, span, item.children)
        for name, attributes in item.events:
            span.add_event(name, attributes)
        span.end()


def finish(tracer: Tracer, root: Span, template: Node) -> None:
    """End a root span as ``template``'s: its attributes and events, its spans under it."""
    root.set_attributes(template.attributes)
    for name, attributes in template.events:
        root.add_event(name, attributes)
    emit(tracer, root, template.children)
    root.end()
