"""A run's turns, steps and tool executions as spans, through an OpenTelemetry tracer."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any, Final

import msgspec
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from .._policy import TracePolicy
from ._views import ExecutionView, RunView, StepView

ERROR: Final = Status(StatusCode.ERROR)
LATEST: Final = 2**64
"""The first time, in ns since the epoch, that OTLP cannot carry (in the year 2554)."""


def nanos(stamp: str | None) -> int | None:
    """Nanoseconds since the epoch of an ISO 8601 time the run recorded, or ``None`` (none,
    unreadable, or outside what OTLP carries)."""
    if not stamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    value = int(moment.timestamp() * 1_000_000) * 1000
    return value if 0 <= value < LATEST else None


_JSON: Final = msgspec.json.Encoder(enc_hook=str)


def text(value: Any) -> str:
    """A recorded value as span attribute text: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return _JSON.encode(value).decode()


_SAFE: Final = TracePolicy.safe()


def _redact(steps: list[StepView]) -> None:
    """Apply :meth:`~evalport.protocol.TracePolicy.safe` to the payloads the spans of
    ``steps`` show (tool arguments, results and errors), in place."""
    for step in steps:
        for execution in step.tool_executions:
            name = execution.name
            execution.arguments = _SAFE.redact_arguments(execution.arguments, name)
            execution.result = _SAFE.redact_value(execution.result, name)
            execution.error = _SAFE.redact_error(execution.error, name)


def _turn_steps(run: RunView, turn: int) -> list[StepView]:
    return [step for step in run.steps if step.turn == turn]


def _turn_attributes(run: RunView, turn: int, agent: str | None) -> dict[str, Any]:
    """The GenAI attributes of the ``invoke_agent`` span of ``turn`` (1-based)."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "evalport.turn": turn}
    if agent:
        attributes["gen_ai.agent.name"] = agent
    if run.session_id:
        attributes["evalport.session.id"] = run.session_id
    index = turn - 1 - run.earlier_user_messages
    if 0 <= index < len(run.user_messages):
        attributes["gen_ai.input.messages"] = text(
            [{"role": "user", "parts": [{"type": "text", "content": run.user_messages[index]}]}]
        )
    if turn == run.turns:
        attributes["evalport.run.status"] = run.status
        if run.reply:
            attributes["gen_ai.output.messages"] = text(
                [{"role": "assistant", "parts": [{"type": "text", "content": run.reply}]}]
            )
    steps = _turn_steps(run, turn)
    attributes["gen_ai.usage.input_tokens"] = sum(step.usage.input for step in steps)
    attributes["gen_ai.usage.output_tokens"] = sum(step.usage.output for step in steps)
    return attributes


Planned = tuple[str, SpanKind, dict[str, Any], int, int, bool]
"""A span to start: name, kind, attributes, start, end, failed."""


def _planned(steps: list[StepView], model: str | None, untimed: int) -> Iterator[Planned]:
    """The ``chat`` span of each step and the ``execute_tool`` span of each of its tool
    executions; what has no start starts at ``untimed``, what has no end ends at its start."""
    name = f"chat {model}" if model else "chat"
    for step in steps:
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
        if step.requested_tool_calls:
            calls = step.requested_tool_calls
            attributes["evalport.tool_calls.names"] = [call.name for call in calls]
            attributes["evalport.tool_calls.ids"] = [call.id or "" for call in calls]
        if step.errors:
            first = step.errors[0]
            attributes["error.type"] = first.type or first.error_class or "error"
        start = nanos(step.started_at) or untimed
        end = nanos(step.completed_at) or start
        yield name, SpanKind.CLIENT, attributes, start, end, bool(step.errors)
        for execution in step.tool_executions:
            yield _tool(execution, untimed)


def _tool(execution: ExecutionView, untimed: int) -> Planned:
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
    start = nanos(execution.started_at) or untimed
    end = nanos(execution.completed_at) or start
    return (
        f"execute_tool {execution.name}",
        SpanKind.INTERNAL,
        attributes,
        start,
        end,
        (execution.has_error),
    )


def _error_type(error: Any) -> str:
    if isinstance(error, Mapping):
        for key in ("type", "class", "errorClass"):
            if isinstance(error.get(key), str) and error[key]:
                return str(error[key])
    return "tool_error"


def _emit(tracer: Tracer, parent: Span, spans: list[Planned]) -> None:
    context = trace.set_span_in_context(parent)
    for name, kind, attributes, start, end, failed in spans:
        span = tracer.start_span(name, context, kind, attributes, start_time=start)
        if failed:
            span.set_status(ERROR)
        span.end(end)


def draw(
    tracer: Tracer,
    parent: Span,
    run: RunView,
    *,
    untimed: int,
    agent: str | None = None,
    turn: int = 0,
    drawn: int = 0,
    safe: bool = False,
) -> None:
    """The spans of ``run`` (:func:`~._views.decode_view`) under ``parent``. ``turn`` 0:
    each turn an ``invoke_agent`` client span with its steps inside, timed from its first
    step's start to its last one's end (the runner's view); ``turn`` n: that turn's steps
    but its first ``drawn``, with the turn's attributes set on ``parent`` (the service's
    view). ``safe``: apply :meth:`~evalport.protocol.TracePolicy.safe` first. What the
    run did not time is timed at ``untimed``."""
    model = run.llm_profile.model if run.llm_profile is not None else None
    if turn:
        steps = _turn_steps(run, turn)[drawn:]
        if safe:  # only the steps drawn: a served turn's run holds every earlier one
            _redact(steps)
        parent.set_attributes(_turn_attributes(run, turn, agent))
        _emit(tracer, parent, list(_planned(steps, model, untimed)))
        return
    if safe:
        _redact(run.steps)
    context = trace.set_span_in_context(parent)
    name = f"invoke_agent {agent}" if agent else "invoke_agent"
    for number in range(1, run.turns + 1):
        planned = list(_planned(_turn_steps(run, number), model, untimed))
        start = min((span[3] for span in planned), default=untimed)
        end = max((span[4] for span in planned), default=untimed)
        attributes = _turn_attributes(run, number, agent)
        span = tracer.start_span(name, context, SpanKind.CLIENT, attributes, start_time=start)
        _emit(tracer, span, planned)
        span.end(end)
