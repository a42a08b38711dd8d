"""Traces of trials: each trial an OpenTelemetry trace, drawn after it from the redacted run;
a cached or logged trial has no agent spans. See ARCHITECTURE.md, "Traces of trials".
"""

from __future__ import annotations

import time
from typing import Any

from evalport.protocol._extras import require

from ._core import TRIAL, TrialResult, TrialTrace, Verdict


def traced_trials(provider: Any, trial_function: Any = None) -> Any:
    """A trial function that runs ``trial_function`` (default
    :func:`~evalport.client.run_trial`) and exports each trial as a trace through
    ``provider`` (an OpenTelemetry ``TracerProvider``, or ``True`` for the global one);
    pass it to ``Runner(..., trial_function=...)``. Needs ``evalport[otel]``."""
    require("evalport.protocol.tracing", "otel", "tracing")
    from evalport.protocol import tracing
    from opentelemetry.trace import SpanKind

    tracer = tracing.tracer_of(provider, "evalport.client")
    if trial_function is None:
        from ._trial import run_trial

        trial_function = run_trial
    inner = trial_function

    async def traced(case: Any, target: Any, *, trial: int = 0, **options: Any) -> TrialResult:
        case_id = case.id
        name = f"evalport.trial {case_id}"
        attributes = {"evalport.case.id": case_id, "evalport.trial.index": trial}
        try:
            span = tracing.start(tracer, name, SpanKind.INTERNAL, attributes)
        except Exception as failure:  # the trial runs untraced
            tracing.failed(f"tracing trial {case_id}", failure)
            return await inner(case, target, trial=trial, **options)  # type: ignore[no-any-return]
        token = TRIAL.set(TrialTrace(tracer, span))
        try:
            with tracing.current(span):
                result: TrialResult = await inner(case, target, trial=trial, **options)
        except BaseException as error:
            try:
                tracing.fail(span, type(error).__name__)
            finally:
                tracing.ends(span, None, f"tracing trial {case_id}")
            raise
        finally:
            TRIAL.reset(token)
        end = time.time_ns()
        run = None
        try:  # plain tries, no context manager: this runs on every trial
            run = _finish(span, result, case, target, end)
            if result.verdict == Verdict.ERROR:
                tracing.fail(span, result.error_type or "error")
        except Exception as failure:
            tracing.failed(f"tracing trial {case_id}", failure)
        if run is not None and span.is_recording():
            try:
                view = tracing.decode_view(run.json)
                tracing.draw(tracer, span, view, untimed=end, agent=_agent(target))
            except Exception as failure:  # the trial span goes without them
                tracing.failed(f"drawing trial {case_id}", failure)
        tracing.ends(span, end, f"tracing trial {case_id}")
        return result

    return traced


def _agent(target: Any) -> str | None:
    name = getattr(getattr(target, "identity", None), "agent_name", None)
    return name if isinstance(name, str) else None


def _finish(span: Any, result: TrialResult, case: Any, target: Any, end: int) -> Any:
    """Set the trial span's verdict and events; the run to draw under it, if the trial
    called the agent now."""
    attributes: dict[str, Any] = {"evalport.verdict": result.verdict}
    cached = getattr(target, "cached", False) is True
    logged = getattr(case, "conversation", None) is not None
    if cached:
        attributes["evalport.trial.cached"] = True
    if logged:
        attributes["evalport.trial.logged"] = True
    if result.session_id:
        attributes["evalport.session.id"] = result.session_id
    span.set_attributes(attributes)
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
        span.add_event("evalport.assertion", event, end)
    for judged in result.judges:
        event = {
            "evalport.judge.criterion": judged.criterion,
            "evalport.judge.cached": judged.cached,
        }
        if judged.score is not None:
            event["evalport.judge.score"] = judged.score
        if judged.error:
            event["error.type"] = judged.error.split(":", 1)[0]
        span.add_event("evalport.judge", event, end)
    return None if cached or logged else result.run
