"""What a traced trial leaves for the code under it: the ``traceparent`` its requests
carry and the list its judge calls add their spans to (set by :mod:`evalport.client._tracing`).

Rules:

- Outside a traced trial nothing is set and :func:`trace_headers` and :func:`judge_span`
  do nothing, without importing anything.
- :func:`judge_span` draws a span ``evalport.judge <criterion>`` around one judge call
  (``evalport.judge = true``, the judge's model, the verdict's score and tokens,
  ``error.type`` when the call failed), a child of the trial span, timed as the call runs.
  What the verdict leaves out (no score, no model) is no attribute.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from evalport.protocol._otel import INTERNAL, OpenSpan, SpanRecord, child


class TrialTrace:
    """The trial span under way and the spans drawn under it so far."""

    __slots__ = ("_header", "children", "span")

    def __init__(self, span: OpenSpan) -> None:
        self.span = span
        self.children: list[SpanRecord] = []
        self._header: dict[str, str] | None = None

    @property
    def header(self) -> dict[str, str]:
        """The ``traceparent`` header, made when a request first asks (a local target
        sends none)."""
        if self._header is None:
            self._header = {"traceparent": self.span.traceparent}
        return self._header


TRIAL: ContextVar[TrialTrace | None] = ContextVar("evalport_trial_trace", default=None)


def trace_headers() -> dict[str, str]:
    """The ``traceparent`` header of the trial under way, if it is traced."""
    trial = TRIAL.get()
    return trial.header if trial is not None else {}


def _ignore(verdict: Any) -> None:
    return None


@contextlib.contextmanager
def judge_span(criterion: str, judge: Any) -> Iterator[Callable[[Any], None]]:
    """A span around one judge call in a traced trial; yields a function that records the
    verdict on it. Outside a traced trial it does nothing."""
    trial = TRIAL.get()
    if trial is None:
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
    start = time.time_ns()
    span = child(
        trial.span.record, f"evalport.judge {criterion}", INTERNAL, start, start, attributes
    )

    def record(verdict: Any) -> None:
        found = {
            "evalport.judge.score": verdict.score,
            "evalport.judge.cached": verdict.cached,
            "gen_ai.usage.input_tokens": verdict.usage.input_tokens,
            "gen_ai.usage.output_tokens": verdict.usage.output_tokens,
            "gen_ai.response.model": verdict.model or None,
        }
        attributes.update((key, value) for key, value in found.items() if value is not None)

    try:
        yield record
    except Exception as error:
        attributes["error.type"] = type(error).__name__
        span.error = True
        raise
    finally:
        span.end = time.time_ns()
        trial.children.append(span)
