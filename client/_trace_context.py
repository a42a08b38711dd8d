"""What a traced trial leaves for the code under it: the ``traceparent`` its requests
carry and the tracer its judge calls use (set by :mod:`evalport.client._tracing`).

Rules:

- Outside a traced trial both are unset and :func:`trace_headers` and :func:`judge_span`
  do nothing, without importing OpenTelemetry.
- :func:`judge_span` is a span ``evalport.judge <criterion>`` around one judge call
  (``evalport.judge = true``, the judge's model, the verdict's score and tokens,
  ``error.type`` when the call failed), a child of the trial span.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

PARENT: ContextVar[str | None] = ContextVar("evalport_traceparent", default=None)
TRACER: ContextVar[Any] = ContextVar("evalport_tracer", default=None)


def trace_headers() -> dict[str, str]:
    """The ``traceparent`` header of the trial under way, if it is traced."""
    parent = PARENT.get()
    return {"traceparent": parent} if parent else {}


def _ignore(verdict: Any) -> None:
    return None


@contextlib.contextmanager
def judge_span(criterion: str, judge: Any) -> Iterator[Callable[[Any], None]]:
    """A span around one judge call in a traced trial; yields a function that records the
    verdict on it. Outside a traced trial it does nothing."""
    tracer = TRACER.get()
    if tracer is None:
        yield _ignore
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "evalport.judge": True,
        "evalport.judge.criterion": criterion,
    }
    model = getattr(judge, "model", None)
    if isinstance(model, str):
        attributes["gen_ai.request.model"] = model
    with tracer.start_as_current_span(
        f"evalport.judge {criterion}", attributes=attributes, record_exception=False
    ) as span:

        def record(verdict: Any) -> None:
            span.set_attribute("evalport.judge.score", verdict.score)
            span.set_attribute("evalport.judge.cached", verdict.cached)
            span.set_attribute("gen_ai.usage.input_tokens", verdict.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", verdict.usage.output_tokens)
            if verdict.model:
                span.set_attribute("gen_ai.response.model", verdict.model)

        try:
            yield record
        except Exception as error:
            span.set_attribute("error.type", type(error).__name__)
            raise
