"""Turns as OpenTelemetry spans in the agent service (``EvalAdapter(tracing=...)``).

Rules:

- Off unless asked. ``tracing=True`` traces through the global ``TracerProvider`` (the
  one the host configured; with none, the OpenTelemetry API drops every span) and a
  ``TracerProvider`` through that one, both with the ``otel`` extra; ``evalport serve
  --otlp URL`` sends the spans to that collector itself
  (:class:`~evalport.protocol._otlp.OtlpExporter`, no extra needed), of the turns its
  ``OTEL_TRACES_SAMPLER`` samples (:mod:`evalport.protocol._sampling`).
- Each turn request is a server span ``invoke_agent <agent>`` (with ``http.route``) that
  continues the trace named by the request's W3C ``traceparent`` header (a new trace
  without one), with the turn's steps and tool executions inside as the run recorded them
  (:mod:`evalport.protocol._otel`). A turn answered with a problem is a span with
  ``error.type`` set to the HTTP status. Through a ``TracerProvider`` the turn span is
  the current span while the turn runs, so the agent's own spans nest under it.
- A turn that suspends goes on in the approvals requests that resume it: each is a span
  of its own (``http.route`` the approvals route, continuing its own ``traceparent``)
  with only the steps that the turn's earlier spans did not draw.
- Each step is drawn once: a request that answers a turn already drawn (a repeated
  idempotency key) is a span with ``evalport.replayed = true`` and no step or tool span.
  The service remembers what it drew for its last :data:`REMEMBERED` sessions.
- Spans are drawn from the run as it leaves the service: after the adapter's trace
  policy, or :meth:`TracePolicy.safe` when the adapter has none, so a collector never
  receives a payload the policy would digest. The turn hands the sink the response body
  as it is (:class:`~evalport.protocol._otel.Draw`); the sink draws it, in the exporter's
  background thread for ``--otlp``. The replay bookkeeping reads only the turn number and
  the step count (:func:`~evalport.protocol._otel.turn_and_steps`).
- Tracing never fails a turn: spans that cannot be drawn or handed over are dropped and
  logged (:func:`~evalport.protocol._otel.failed`).
- A collector that is down costs a turn nothing: spans leave through a bounded queue in
  the background; those lost are counted and logged (``evalport.tracing``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec
from evalport.protocol._extras import require
from evalport.protocol._otel import SERVER, Draw, Sink, failed, turn_and_steps
from evalport.protocol._otlp import OtlpExporter

from ._records import Outcome, RunPolicy

TURNS_ROUTE: Final = "/evals/sessions/{session_id}/turns"
APPROVALS_ROUTE: Final = "/evals/sessions/{session_id}/approvals"
REMEMBERED: Final = 10_000
"""Sessions whose last drawn turn and step count the service keeps (oldest forgotten)."""


def _sink(tracing: Any) -> Sink:
    if isinstance(tracing, OtlpExporter):
        return tracing
    api = require("evalport.protocol._otel_api", "otel", "tracing")
    sink: Sink = api.ApiSink(tracing, "evalport.server")
    return sink


class TurnTracing:
    """Draws each turn an adapter runs as spans (see the module rules)."""

    def __init__(self, tracing: Any, agent: str, policy: RunPolicy | None) -> None:
        self._sink = _sink(tracing)
        self._agent = agent
        self._safe = policy is None  # the sink applies TracePolicy.safe() before drawing
        self._drawn: dict[str, tuple[int, int]] = {}  # session: (turn, its steps drawn)

    async def turn(
        self,
        traceparent: str | None,
        session_id: str,
        run: Callable[[], Awaitable[Outcome]],
        *,
        route: str = TURNS_ROUTE,
        drawn: int = 0,
    ) -> Outcome:
        """Run ``run`` in a server span on ``route``; then hand the sink the steps of the
        turn it answers to draw, but for the first ``drawn`` (drawn by an earlier span)."""
        sink = self._sink
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self._agent,
            "evalport.session.id": session_id,
            "http.request.method": "POST",
            "http.route": route,
        }
        span = sink.begin(f"invoke_agent {self._agent}", SERVER, traceparent, attributes)
        material: Draw | None = None
        try:
            live = sink.current(span)
            if live is None:
                outcome = await run()
            else:
                with live:
                    outcome = await run()
            if outcome.is_problem:
                attributes["error.type"] = str(outcome.status)
                span.record.error = True
            elif span.sampled:
                try:
                    material = self._material(attributes, session_id, outcome.body, drawn)
                except Exception as failure:
                    failed(f"drawing a turn of session {session_id}", failure)
        except BaseException as error:
            attributes["error.type"] = type(error).__name__
            span.record.error = True
            raise
        finally:
            span.record.end = time.time_ns()
            try:  # a plain try, no context manager: this runs on every turn
                sink.finish(span, [], material)
            except Exception as failure:
                failed(f"tracing a turn of session {session_id}", failure)
        return outcome

    def _material(
        self, attributes: dict[str, Any], session_id: str, body: bytes, drawn: int
    ) -> Draw | None:
        """What the sink draws for the turn ``body`` answers, after the replay bookkeeping
        (read from a small view of ``body``; the sink draws from the run's view)."""
        found = turn_and_steps(body)
        if found is None:
            return None
        turn, steps = found
        last_turn, last_steps = self._drawn.pop(session_id, (0, 0))
        if last_turn > turn:  # an earlier turn, answered again
            drawn = steps
        elif last_turn == turn:  # this turn again: drawn up to last_steps already
            drawn = max(drawn, last_steps)
        if last_turn >= turn and drawn >= steps:
            attributes["evalport.replayed"] = True
        self._drawn[session_id] = max((last_turn, last_steps), (turn, steps))
        if len(self._drawn) > REMEMBERED:
            del self._drawn[next(iter(self._drawn))]
        return Draw(msgspec.Raw(body), self._agent, turn, drawn, self._safe)


def serve_provider(endpoint: str, service: str) -> OtlpExporter:
    """The exporter sending to ``endpoint`` over OTLP/HTTP (``evalport serve --otlp``)."""
    return OtlpExporter(endpoint, service)
