"""Traces of trials: each trial an OpenTelemetry trace.

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
  The trial hands the sink that run's JSON as it is (:class:`~evalport.protocol._otel.Draw`)
  and the sink draws: in the exporter's background thread for ``--otlp``, a batch at a
  time, so the trial itself pays only for handing it over.
- Judge calls are spans of their own, timed as they run (``evalport.judge <criterion>``,
  ``evalport.judge = true``, the judge's model and tokens), children of the trial span.
  They are drawn as records and replayed with the rest when the trial ends, so through a
  ``TracerProvider`` a span made during a judge call (an instrumented HTTP client) nests
  under the trial span, beside the judge span rather than inside it.
- While a trial runs, every request a target sends carries the trial span as W3C
  ``traceparent`` (:func:`~._trace_context.trace_headers`), so an agent service with
  tracing on continues the same trace. Its flag says whether the trial is sampled (with
  ``--otlp``, as ``OTEL_TRACES_SAMPLER`` decides), so a service that follows its parent
  traces the trials the runner traces and no other.
- The spans go to an OpenTelemetry ``TracerProvider`` (``traced_trials(provider)``,
  which needs the ``otel`` extra; the trial span is the current span while the trial
  runs) or, for ``evalport run --otlp URL`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT``), straight
  to the collector through :class:`~evalport.protocol._otlp.OtlpExporter`, which needs
  no extra.
- Tracing never fails a trial: spans that cannot be drawn or handed over are dropped and
  logged (:func:`~evalport.protocol._otel.failed`); the trial's result is the same.
"""

from __future__ import annotations

import time
from typing import Any

from evalport.protocol._extras import require
from evalport.protocol._otel import INTERNAL, Draw, Sink, SpanEvent, SpanRecord, failed
from evalport.protocol._otlp import OtlpExporter

from ._results import TrialResult, Verdict
from ._trace_context import TRIAL, TrialTrace


def sink_of(provider: Any, scope: str) -> Sink:
    """Where spans go: an :class:`OtlpExporter` as it is, an OpenTelemetry
    ``TracerProvider`` through the API (or a :class:`MissingExtraError` naming
    ``evalport[otel]``)."""
    if isinstance(provider, OtlpExporter):
        return provider
    api = require("evalport.protocol._otel_api", "otel", "tracing")
    sink: Sink = api.ApiSink(provider, scope)
    return sink


def traced_trials(provider: Any, trial_function: Any = None) -> Any:
    """A trial function that runs ``trial_function`` (default
    :func:`~evalport.client.run_trial`) and exports each trial as a trace through
    ``provider`` (an OpenTelemetry ``TracerProvider``); pass it to ``Runner(...,
    trial_function=...)``."""
    sink = sink_of(provider, "evalport.client")
    if trial_function is None:
        from ._trial import run_trial

        trial_function = run_trial
    inner = trial_function
    begin, current, finish = sink.begin, sink.current, sink.finish

    async def traced(case: Any, target: Any, *, trial: int = 0, **options: Any) -> TrialResult:
        case_id = case.id
        attributes = {"evalport.case.id": case_id, "evalport.trial.index": trial}
        span = begin(f"evalport.trial {case_id}", INTERNAL, None, attributes)
        trace = TrialTrace(span)
        token = TRIAL.set(trace)
        try:
            live = current(span)
            if live is None:
                result: TrialResult = await inner(case, target, trial=trial, **options)
            else:
                with live:
                    result = await inner(case, target, trial=trial, **options)
        except BaseException as error:
            attributes["error.type"] = type(error).__name__
            span.record.error = True
            span.record.end = time.time_ns()
            try:
                finish(span, trace.children)
            except Exception as failure:
                failed(f"tracing trial {case_id}", failure)
            raise
        finally:
            TRIAL.reset(token)
        material = None
        try:  # plain tries, no context manager: this runs on every trial
            material = _material(span.record, result, case, target)
        except Exception as failure:  # the trial span goes without what it failed to name
            failed(f"drawing trial {case_id}", failure)
        try:
            finish(span, trace.children, material)
        except Exception as failure:
            failed(f"tracing trial {case_id}", failure)
        return result

    return traced


def _material(span: SpanRecord, result: TrialResult, case: Any, target: Any) -> Draw | None:
    """Fill in the trial span's verdict and events; what is left to draw under it (the
    turn, step and tool spans of the run the trial kept, if it called the agent now)."""
    span.end = time.time_ns()
    attributes = span.attributes
    attributes["evalport.verdict"] = result.verdict
    cached = getattr(target, "cached", False) is True
    logged = getattr(case, "conversation", None) is not None
    if cached:
        attributes["evalport.trial.cached"] = True
    if logged:
        attributes["evalport.trial.logged"] = True
    if result.session_id:
        attributes["evalport.session.id"] = result.session_id
    if result.verdict == Verdict.ERROR:
        attributes["error.type"] = result.error_type or "error"
        span.error = True
    now = span.end
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
        span.events.append(SpanEvent("evalport.assertion", now, event))
    for judged in result.judges:
        event = {
            "evalport.judge.criterion": judged.criterion,
            "evalport.judge.cached": judged.cached,
        }
        if judged.score is not None:
            event["evalport.judge.score"] = judged.score
        if judged.error:
            event["error.type"] = judged.error.split(":", 1)[0]
        span.events.append(SpanEvent("evalport.judge", now, event))
    if result.run is None or cached or logged:
        return None
    name = getattr(getattr(target, "identity", None), "agent_name", None)
    return Draw(result.run.raw, name if isinstance(name, str) else None)
