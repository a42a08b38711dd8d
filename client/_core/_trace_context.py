"""What a traced trial (set by :mod:`evalport.client._tracing`) leaves for the code under
it: the ``traceparent`` its requests carry and the span its judge calls nest under.
Outside one, nothing here imports anything. Rules: see ARCHITECTURE.md, "Traces of
trials".
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any


class TrialTrace:
    """The tracer and the span of the trial under way."""

    __slots__ = ("_header", "span", "tracer")

    def __init__(self, tracer: Any, span: Any) -> None:
        self.tracer = tracer
        self.span = span
        self._header: dict[str, str] | None = None

    @property
    def header(self) -> dict[str, str]:
        """The ``traceparent`` header, made when a request first asks (a local target
        sends none)."""
        if self._header is None:
            from evalport.protocol.tracing import traceparent

            self._header = traceparent(self.span)
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
    from evalport.protocol import tracing

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "evalport.judge": True,
        "evalport.judge.criterion": criterion,
    }
    model = getattr(judge, "model", None)
    if isinstance(model, str):
        attributes["gen_ai.request.model"] = model
    name = f"evalport.judge {criterion}"
    try:
        span = tracing.child(trial.tracer, trial.span, name, attributes)
    except Exception as failure:  # the judge is called untraced
        tracing.failed(f"tracing {name}", failure)
        yield _ignore
        return

    def record(verdict: Any) -> None:
        found = {
            "evalport.judge.score": verdict.score,
            "evalport.judge.cached": verdict.cached,
            "gen_ai.usage.input_tokens": verdict.usage.input_tokens,
            "gen_ai.usage.output_tokens": verdict.usage.output_tokens,
            "gen_ai.response.model": verdict.model or None,
        }
        span.set_attributes({key: value for key, value in found.items() if value is not None})

    try:
        with tracing.current(span):
            yield record
    except Exception as error:
        tracing.fail(span, type(error).__name__)
        raise
    finally:
        tracing.ends(span, None, f"tracing {name}")
