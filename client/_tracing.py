"""Traces of trials: each trial an OpenTelemetry trace (``evalport[otel]``).

Rules:

- :func:`traced_trials` wraps a trial function (``run_trial`` by default) for
  :class:`~evalport.client.Runner`: each trial is a span ``evalport.trial <case id>``
  (``evalport.case.id``, ``evalport.trial.index``, ``evalport.verdict``, ``error.type``
  when the trial errored), with one ``invoke_agent`` span per turn and, inside each, the
  steps and tool executions of the run as :mod:`evalport.protocol._otel` draws them.
  Each assertion result is a span event ``evalport.assertion`` and each judge result an
  event ``evalport.judge``, both with their score.
- A trial replayed from the run cache (``evalport.trial.cached = true``) or evaluating a
  logged conversation (``evalport.trial.logged = true``) called no agent now: its trace
  has the trial span with its assertion and judge events, and no ``invoke_agent``,
  ``chat`` or ``execute_tool`` span (the recording's old times would show calls that
  never happened).
- The spans are drawn after the trial from the run the trial kept, which already passed
  the target's trace policy: a collector receives what the reports show, nothing more.
- Judge calls are spans of their own while they run (``evalport.judge <criterion>``,
  ``evalport.judge = true``, the judge's model and tokens), children of the trial span.
- While a trial runs, every request a target sends carries the trial span as W3C
  ``traceparent`` (:func:`trace_headers`), so an agent service with tracing on continues
  the same trace.
- ``evalport run`` traces when ``--otlp URL`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set;
  without the extra that is a clear error naming ``evalport[otel]``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from evalport.protocol import decode_run
from evalport.protocol._extras import require

from ._results import TrialResult, Verdict
from ._trace_context import PARENT, TRACER


def otel() -> ModuleType:
    """The span helpers, or a :class:`MissingExtraError` naming ``evalport[otel]``."""
    return require("evalport.protocol._otel", "otel", "tracing")


def traced_trials(provider: Any, trial_function: Any = None) -> Any:
    """A trial function that runs ``trial_function`` (default
    :func:`~evalport.client.run_trial`) and exports each trial as a trace through
    ``provider`` (an OpenTelemetry ``TracerProvider``); pass it to ``Runner(...,
    trial_function=...)``."""
    spans = otel()
    if trial_function is None:
        from ._trial import run_trial

        trial_function = run_trial
    inner = trial_function
    tracer = provider.get_tracer("evalport.client")

    async def traced(case: Any, target: Any, *, trial: int = 0, **options: Any) -> TrialResult:
        attributes = {"evalport.case.id": case.id, "evalport.trial.index": trial}
        with tracer.start_as_current_span(
            f"evalport.trial {case.id}", attributes=attributes, record_exception=False
        ) as span:
            parent = PARENT.set(spans.traceparent(span))
            current = TRACER.set(tracer)
            try:
                result: TrialResult = await inner(case, target, trial=trial, **options)
            except BaseException as error:
                span.set_attribute("error.type", type(error).__name__)
                raise
            finally:
                TRACER.reset(current)
                PARENT.reset(parent)
            replayed = {
                "evalport.trial.cached": getattr(target, "cached", False) is True,
                "evalport.trial.logged": getattr(case, "conversation", None) is not None,
            }
            for key, value in replayed.items():
                if value:
                    span.set_attribute(key, True)
            agent_called = not any(replayed.values())
            _record(spans, tracer, span, result, _agent_name(target), agent_called)
            return result

    return traced


def _agent_name(target: Any) -> str | None:
    identity = getattr(target, "identity", None)
    name = getattr(identity, "agent_name", None)
    return name if isinstance(name, str) else None


def _record(
    spans: ModuleType,
    tracer: Any,
    span: Any,
    result: TrialResult,
    agent: str | None,
    agent_called: bool,
) -> None:
    from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

    span.set_attribute("evalport.verdict", result.verdict)
    if result.session_id:
        span.set_attribute("evalport.session.id", result.session_id)
    if result.verdict == Verdict.ERROR:
        span.set_attribute("error.type", result.error_type or "error")
        span.set_status(Status(StatusCode.ERROR, result.error or None))
    for assertion in result.assertions:
        event: dict[str, Any] = {
            "evalport.assertion.name": assertion.name,
            "evalport.assertion.score": assertion.score,
            "evalport.assertion.passed": assertion.passed,
            "evalport.assertion.severity": assertion.severity,
        }
        if assertion.label:
            event["evalport.assertion.label"] = assertion.label
        if assertion.message:
            event["evalport.assertion.message"] = assertion.message
        span.add_event("evalport.assertion", event)
    for judged in result.judges:
        event = {
            "evalport.judge.criterion": judged.criterion,
            "evalport.judge.cached": judged.cached,
        }
        if judged.score is not None:
            event["evalport.judge.score"] = judged.score
        if judged.error:
            event["error.type"] = judged.error.split(":", 1)[0]
        span.add_event("evalport.judge", event)
    if result.run is None or not agent_called:
        return
    run = decode_run(result.run.json)
    context = set_span_in_context(span)
    for turn in range(1, run.turns + 1):
        start, end = spans.turn_window(spans.turn_steps(run, turn))
        child = tracer.start_span(
            f"invoke_agent {agent}" if agent else "invoke_agent",
            context=context,
            kind=SpanKind.CLIENT,
            attributes=spans.turn_attributes(run, turn, agent),
            start_time=start,
        )
        spans.record_steps(tracer, run, turn, child)
        child.end(end_time=end)
