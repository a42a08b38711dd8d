"""Latency budgets: a turn, a trial, the first tool call, the first event and token.
Turns and trials are timed by the run's own clock, first event and token by the client's
(``TurnTiming``); never mix the two. See ARCHITECTURE.md, "Latency budgets".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from evalport.protocol import Step

from .._core import AssertionResult, Turn, TurnTiming
from ._base import Assertion, run_of


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _span(steps: Sequence[Step]) -> float | None:
    """Seconds from the first step's start to the last step's end, or ``None``."""
    if not steps:
        return None
    start, end = _seconds(steps[0].started_at), _seconds(steps[-1].completed_at)
    if start is None or end is None:
        return None
    return max(end - start, 0.0)


def _turn_steps(subject: Any, turn: int | None, kind: str) -> dict[int, list[Step]]:
    """The steps of each turn the assertion looks at, by turn number."""
    if isinstance(subject, Turn) and turn is None:
        return {subject.index: list(subject.steps)}
    run = run_of(subject, kind)
    numbers = [turn] if turn is not None else sorted({step.turn for step in run.steps})
    return {number: run.steps_of_turn(number) for number in numbers}


class LatencyAssertion(Assertion):
    """Shared by the latency budgets: a budget in seconds and an optional turn number."""

    def __init__(self, seconds: float, *, turn: int | None = None) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            raise ValueError(f"a latency budget is a positive number of seconds, got {seconds!r}")
        self.seconds = float(seconds)
        self.turn = turn

    def describe(self) -> str:
        where = "" if self.turn is None else f", turn={self.turn}"
        return f"{self.seconds:g}s{where}"

    def graded(self, actual: float, what: str, **context: Any) -> AssertionResult:
        if actual <= self.seconds:
            return self.result(1.0, "", seconds=actual, **context)
        message = f"{what} took {actual:.3f}s, over the budget of {self.seconds:g}s"
        return self.result(self.seconds / actual, message, seconds=actual, **context)


class TurnWithin(LatencyAssertion):
    """Every turn (or turn ``turn``) took at most ``seconds`` by the run's clock."""

    kind = "turn_within"

    def evaluate(self, subject: Any) -> AssertionResult:
        timed: dict[int, float] = {}
        for number, steps in _turn_steps(subject, self.turn, self.kind).items():
            span = _span(steps)
            if span is None:
                return self.not_evaluable(f"turn {number} has no step timestamps", turn=number)
            timed[number] = span
        if not timed:
            return self.not_evaluable("no turn was recorded yet")
        slowest = max(timed, key=lambda number: timed[number])
        return self.graded(timed[slowest], f"turn {slowest}", turn=slowest)


class TrialWithin(LatencyAssertion):
    """The run, first step's start to last step's end, took at most ``seconds``."""

    kind = "trial_within"

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)

    def evaluate(self, subject: Any) -> AssertionResult:
        span = _span(run_of(subject, self.kind).steps)
        if span is None:
            return self.not_evaluable("the run has no step timestamps")
        return self.graded(span, "the run")


class FirstToolCallWithin(LatencyAssertion):
    """The first tool call started at most ``seconds`` after its turn started."""

    kind = "first_tool_call_within"
    needs = "tools"

    def evaluate(self, subject: Any) -> AssertionResult:
        if (missing := self.unreported(subject)) is not None:
            return missing
        for number, steps in _turn_steps(subject, self.turn, self.kind).items():
            executions = [run for step in steps for run in step.tool_executions]
            if not executions:
                continue
            start = _seconds(steps[0].started_at)
            stamps = [_seconds(execution.started_at) for execution in executions]
            if start is None or None in stamps:
                return self.not_evaluable(
                    f"turn {number} has no timestamps for its tool calls", turn=number
                )
            called = min(stamp for stamp in stamps if stamp is not None)
            name = executions[stamps.index(called)].name
            return self.graded(
                max(called - start, 0.0),
                f"the first tool call ({name}, turn {number})",
                turn=number,
                tool=name,
            )
        where = "" if self.turn is None else f" in turn {self.turn}"
        return self.result(False, f"no tool was called{where}")


class _FirstArrival(LatencyAssertion):
    """Shared by the budgets on when a turn's answer began to arrive (the client's clock)."""

    field = ""
    what = ""

    def evaluate(self, subject: Any) -> AssertionResult:
        timings = _timings(subject, self.kind)
        if self.turn is not None:
            timings = [timing for timing in timings if timing.turn == self.turn]
        if not timings:
            where = "" if self.turn is None else f" for turn {self.turn}"
            return self.not_evaluable(
                f"no turn was timed{where} (a trial replayed from the cache, or a subject "
                "that is not a Turn or the trial's timings)"
            )
        arrived: dict[int, float] = {}
        for timing in timings:
            seconds = getattr(timing, self.field)
            if seconds is None:
                why = (
                    "it suspended (approvals or an interrupt) before any text came"
                    if timing.first_event is not None
                    else "it did not stream (a server without the 'streaming' capability, "
                    "or HttpTarget(stream=False))"
                )
                return self.not_evaluable(
                    f"turn {timing.turn} has no time for {self.what}: {why}", turn=timing.turn
                )
            arrived[timing.turn] = max(arrived.get(timing.turn, 0.0), seconds)
        slowest = max(arrived, key=lambda number: arrived[number])
        return self.graded(arrived[slowest], f"{self.what} of turn {slowest}", turn=slowest)


def _timings(subject: Any, kind: str) -> list[TurnTiming]:
    if isinstance(subject, Turn):
        return [] if subject.timing is None else [subject.timing]
    if isinstance(subject, TurnTiming):
        return [subject]
    if isinstance(subject, list | tuple) and all(
        isinstance(item, TurnTiming | Turn) for item in subject
    ):
        return [timing for item in subject for timing in _timings(item, kind)]
    raise TypeError(
        f"{kind} reads when a turn's answer arrived: check a Turn, a list of them or the "
        f"trial's ctx.timings, not a {type(subject).__name__}"
    )


class FirstTokenWithin(_FirstArrival):
    """The first text of the reply arrived at most ``seconds`` after the turn was sent,
    by the client's clock: every timed turn's (the slowest), or turn ``turn``'s."""

    kind = "first_token_within"
    field = "first_token"
    what = "the first token"


class FirstEventWithin(_FirstArrival):
    """The turn's first streamed event arrived at most ``seconds`` after it was sent, by
    the client's clock: every timed turn's (the slowest), or turn ``turn``'s."""

    kind = "first_event_within"
    field = "first_event"
    what = "the first event"
