"""Turns as OpenTelemetry spans in the agent service (``EvalAdapter(tracing=...)``): a span
around the turn's one entry, ended from its outcome, each step drawn once
(ARCHITECTURE.md, "A traced turn").
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from functools import partial
from typing import Any, Final, TypeVar

from evalport.protocol._extras import require

from ._records import Outcome, RunPolicy
from ._turns import Turning

T = TypeVar("T", bound=Outcome | Turning)

TURNS_ROUTE: Final = "/evals/sessions/{session_id}/turns"
APPROVALS_ROUTE: Final = "/evals/sessions/{session_id}/approvals"
REMEMBERED: Final = 10_000
"""Sessions whose last drawn turn and step count the service keeps (oldest forgotten)."""


class TurnTracing:
    """Draws each turn an adapter runs as spans (see ARCHITECTURE.md, "A traced turn")."""

    def __init__(self, tracing: Any, agent: str, policy: RunPolicy | None) -> None:
        require("evalport.protocol.tracing", "otel", "tracing")
        from evalport.protocol.tracing import tracer_of

        self._tracer = tracer_of(tracing, "evalport.server")
        self._agent = agent
        self._safe = policy is None  # TracePolicy.safe() applies to what is drawn
        self._drawn: dict[str, tuple[int, int]] = {}  # session: (turn, its steps drawn)

    async def turn(
        self,
        traceparent: str | None,
        session_id: str,
        entry: Awaitable[T],
        *,
        route: str = TURNS_ROUTE,
        drawn: int = 0,
    ) -> T:
        """Await ``entry`` (a turn or a decision) in a server span on ``route``, current
        meanwhile; the span ends with the outcome (a streamed turn's, once its stream
        ends), drawing the steps of the turn it answers but for the first ``drawn``."""
        from evalport.protocol import tracing
        from opentelemetry.trace import SpanKind

        what = f"tracing a turn of session {session_id}"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self._agent,
            "evalport.session.id": session_id,
            "http.request.method": "POST",
            "http.route": route,
        }
        name = f"invoke_agent {self._agent}"
        try:
            span = tracing.start(self._tracer, name, SpanKind.SERVER, attributes, traceparent)
        except Exception as failure:  # the turn runs untraced
            tracing.failed(what, failure)
            return await entry
        try:
            with tracing.current(span):
                answer = await entry
        except BaseException as error:
            try:
                tracing.fail(span, type(error).__name__)
            finally:
                tracing.ends(span, None, what)
            raise
        if isinstance(answer, Turning):
            answer.stream.when_ended(partial(self._end, span, session_id, drawn))
        else:
            self._end(span, session_id, drawn, answer)
        return answer

    def _end(self, span: Any, session_id: str, drawn: int, outcome: Outcome) -> None:
        from evalport.protocol import tracing

        end = time.time_ns()
        try:  # a plain try, no context manager: this runs on every turn
            if outcome.is_problem:
                tracing.fail(span, str(outcome.status))
            elif span.is_recording():
                self._draw(span, session_id, outcome.body, drawn, end)
        except Exception as failure:
            tracing.failed(f"drawing a turn of session {session_id}", failure)
        tracing.ends(span, end, f"tracing a turn of session {session_id}")

    def _draw(self, span: Any, session_id: str, body: bytes, drawn: int, end: int) -> None:
        """Draw the turn ``body`` answers under ``span``, after the replay bookkeeping."""
        from evalport.protocol import tracing

        run = tracing.decode_view(body)
        turn = run.turns
        steps = sum(1 for step in run.steps if step.turn == turn)
        last_turn, last_steps = self._drawn.pop(session_id, (0, 0))
        if last_turn > turn:  # an earlier turn, answered again
            drawn = steps
        elif last_turn == turn:  # this turn again: drawn up to last_steps already
            drawn = max(drawn, last_steps)
        if last_turn >= turn and drawn >= steps:
            span.set_attribute("evalport.replayed", True)
        self._drawn[session_id] = max((last_turn, last_steps), (turn, steps))
        if len(self._drawn) > REMEMBERED:
            del self._drawn[next(iter(self._drawn))]
        tracing.draw(
            self._tracer,
            span,
            run,
            untimed=end,
            agent=self._agent,
            turn=turn,
            drawn=drawn,
            safe=self._safe,
        )
