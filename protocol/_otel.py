"""OpenTelemetry spans of a run, shared by the runner and the server (``evalport[otel]``).

Rules:

- This module needs the ``otel`` extra (opentelemetry-sdk and its OTLP/HTTP exporter);
  callers import it through :func:`otel`, which names ``evalport[otel]`` when it is missing.
- Spans follow OpenTelemetry's GenAI semantic conventions: a turn is an ``invoke_agent``
  span, each step the run recorded a ``chat`` span (its model, token usage and finish
  reason), each tool execution an ``execute_tool`` span (tool name, call id, and
  ``error.type`` when it failed). Their times are the times the run recorded. evalport's
  own attributes start with ``evalport.``.
- Spans are built only from a run that already passed a trace policy: what a span
  carries (tool arguments and results, messages, error texts) is what the reports show,
  digests included, and nothing else.
- :func:`exporting_provider` sends spans in the background through a bounded queue
  (``max_queue_size`` spans; more are dropped by the SDK, which logs it). An export that
  fails (a collector that is down) loses its spans: they are counted, and the count is
  logged on ``evalport.tracing``. Nothing waits for a collector but ``shutdown``.
- The context crosses the wire as a W3C ``traceparent`` header.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ._models import AgentRun, Step, ToolExecution

logger = logging.getLogger("evalport.tracing")

QUEUE_SIZE: Final = 2048
"""Spans waiting for export at most; more are dropped (the SDK logs it)."""

_PROPAGATOR: Final = TraceContextTextMapPropagator()


class CountingExporter(SpanExporter):
    """An exporter that counts (and logs) the spans lost when an export fails."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.dropped = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as error:  # an exporter should not raise; count it anyway
            logger.debug("span export raised %s", type(error).__name__)
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            with self._lock:
                self.dropped += len(spans)
                total = self.dropped
            logger.warning(
                "the trace collector did not take %d span(s); %d dropped so far", len(spans), total
            )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for ``endpoint``: a base URL gets ``/v1/traces`` (as the
    standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` does); a URL ending in it is kept."""
    url = endpoint.rstrip("/")
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


def exporting_provider(
    endpoint: str,
    service: str,
    *,
    queue: int = QUEUE_SIZE,
    exporter: SpanExporter | None = None,
) -> tuple[TracerProvider, CountingExporter]:
    """A provider exporting to ``endpoint`` over OTLP/HTTP in the background (see the rules)."""
    counting = CountingExporter(exporter or OTLPSpanExporter(endpoint=traces_url(endpoint)))
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(
        BatchSpanProcessor(counting, max_queue_size=queue, max_export_batch_size=min(512, queue))
    )
    return provider, counting


def traceparent(span: Span) -> str:
    """The W3C ``traceparent`` value naming ``span`` as the parent."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent", "")


def remote_parent(value: str | None) -> otel_context.Context | None:
    """The context a ``traceparent`` header names, or ``None`` (absent or malformed)."""
    if not value:
        return None
    extracted = _PROPAGATOR.extract({"traceparent": value})
    if not trace.get_current_span(extracted).get_span_context().is_valid:
        return None
    return extracted


def nanos(stamp: str | None) -> int | None:
    """Nanoseconds since the epoch of an ISO 8601 time the run recorded, or ``None``."""
    if not stamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1_000_000_000)


def text(value: Any) -> str:
    """A recorded value as span attribute text: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def turn_steps(run: AgentRun, turn: int) -> list[Step]:
    return [step for step in run.steps if step.turn == turn]


def turn_window(steps: Sequence[Step]) -> tuple[int | None, int | None]:
    """When the steps of a turn started and ended, as the run recorded them."""
    starts = [n for n in (nanos(step.started_at) for step in steps) if n is not None]
    ends = [n for n in (nanos(step.completed_at) for step in steps) if n is not None]
    return (min(starts) if starts else None, max(ends) if ends else None)


def turn_attributes(run: AgentRun, turn: int, agent: str | None) -> dict[str, Any]:
    """The GenAI attributes of the ``invoke_agent`` span of ``turn`` (1-based)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "evalport.turn": turn,
    }
    if agent:
        attributes["gen_ai.agent.name"] = agent
    if run.session_id:
        attributes["evalport.session.id"] = run.session_id
    if 0 < turn <= len(run.user_messages):
        attributes["gen_ai.input.messages"] = text(
            [{"role": "user", "parts": [{"type": "text", "content": run.user_messages[turn - 1]}]}]
        )
    steps = turn_steps(run, turn)
    if turn == run.turns:
        attributes["evalport.run.status"] = run.status
        if run.reply:
            attributes["gen_ai.output.messages"] = text(
                [{"role": "assistant", "parts": [{"type": "text", "content": run.reply}]}]
            )
    attributes["gen_ai.usage.input_tokens"] = sum(step.usage.input for step in steps)
    attributes["gen_ai.usage.output_tokens"] = sum(step.usage.output for step in steps)
    return attributes


def record_steps(tracer: Tracer, run: AgentRun, turn: int, parent: Span, drawn: int = 0) -> None:
    """The ``chat`` and ``execute_tool`` spans of ``turn``'s steps, under ``parent``,
    but for its first ``drawn`` steps (drawn already, before the turn suspended)."""
    context = trace.set_span_in_context(parent)
    model = run.llm_profile.model if run.llm_profile is not None else None
    for step in turn_steps(run, turn)[drawn:]:
        start, end = nanos(step.started_at), nanos(step.completed_at)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": step.usage.input,
            "gen_ai.usage.output_tokens": step.usage.output,
            "evalport.step.index": step.index,
            "evalport.step.type": step.type,
        }
        if model:
            attributes["gen_ai.request.model"] = model
        if step.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [step.finish_reason]
        calls = step.requested_tool_calls
        if calls:
            attributes["evalport.tool_calls.names"] = [call.name for call in calls]
            attributes["evalport.tool_calls.ids"] = [call.id or "" for call in calls]
        span = tracer.start_span(
            f"chat {model}" if model else "chat",
            context=context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        if step.errors:
            first = step.errors[0]
            span.set_attribute("error.type", first.type or first.error_class or "error")
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)
        for execution in step.tool_executions:
            _tool_span(tracer, execution, context)


def _tool_span(tracer: Tracer, execution: ToolExecution, context: otel_context.Context) -> None:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": execution.name,
        "gen_ai.tool.call.arguments": text(execution.arguments),
    }
    if execution.tool_call_id:
        attributes["gen_ai.tool.call.id"] = execution.tool_call_id
    if execution.has_error:
        attributes["error.type"] = _error_type(execution.error)
        if execution.error is not None:
            attributes["evalport.tool.error"] = text(execution.error)
    elif execution.result is not None:
        attributes["gen_ai.tool.call.result"] = text(execution.result)
    span = tracer.start_span(
        f"execute_tool {execution.name}",
        context=context,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        start_time=nanos(execution.started_at),
    )
    if execution.has_error:
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=nanos(execution.completed_at))


def _error_type(error: Any) -> str:
    if isinstance(error, Mapping):
        for key in ("type", "class", "errorClass"):
            if isinstance(error.get(key), str) and error[key]:
                return str(error[key])
    return "tool_error"
