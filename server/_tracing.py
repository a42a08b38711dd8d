"""Turns as OpenTelemetry spans in the agent service (``EvalAdapter(tracing=...)``).

Rules:

- Off unless asked. ``tracing=True`` traces through the global ``TracerProvider`` (the
  one the host configured; with none, the OpenTelemetry API drops every span), a
  ``TracerProvider`` traces through that one, and ``evalport serve --otlp URL`` builds one
  that exports over OTLP/HTTP in the background (``evalport[otel]``).
- Each turn request is a server span ``invoke_agent <agent>`` (with ``http.route``) that
  continues the trace named by the request's W3C ``traceparent`` header (a new trace
  without one), with the turn's steps and tool executions inside as the run recorded them
  (:mod:`evalport.protocol._otel`). A turn answered with a problem is a span with
  ``error.type`` set to the HTTP status.
- Spans are drawn from the run as it leaves the service: after the adapter's trace
  policy, or :meth:`TracePolicy.safe` when the adapter has none, so a collector never
  receives a payload the policy would digest.
- A collector that is down costs a turn nothing: spans leave through a bounded queue in
  the background; those lost are counted and logged (``evalport.tracing``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from evalport.protocol import AgentRun, ProtocolError, TracePolicy, decode_run
from evalport.protocol._extras import require

from ._records import Outcome, RunPolicy


def otel() -> ModuleType:
    """The span helpers, or a :class:`MissingExtraError` naming ``evalport[otel]``."""
    return require("evalport.protocol._otel", "otel", "tracing")


class TurnTracing:
    """Draws each turn an adapter runs as spans (see the module rules)."""

    def __init__(self, tracing: Any, agent: str, policy: RunPolicy | None) -> None:
        self._spans = otel()
        from opentelemetry import trace

        provider = trace.get_tracer_provider() if tracing is True else tracing
        self._tracer = provider.get_tracer("evalport.server")
        self._agent = agent
        self._safe = TracePolicy.safe() if policy is None else None

    async def turn(
        self, traceparent: str | None, session_id: str, run: Callable[[], Awaitable[Outcome]]
    ) -> Outcome:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self._agent,
            "evalport.session.id": session_id,
            "http.request.method": "POST",
            "http.route": "/evals/sessions/{session_id}/turns",
        }
        # span started after the turn with every attribute at once (set one by one: ~14% more CPU)
        started = time.time_ns()
        try:
            outcome = await run()
        except BaseException as error:
            attributes["error.type"] = type(error).__name__
            self._start(traceparent, attributes, started, failed=True).end()
            raise
        run_of_turn = None if outcome.is_problem else self._visible(outcome.body)
        if outcome.is_problem:
            attributes["error.type"] = str(outcome.status)
        elif run_of_turn is not None:
            attributes.update(
                self._spans.turn_attributes(run_of_turn, run_of_turn.turns, self._agent)
            )
        span = self._start(traceparent, attributes, started, failed=outcome.is_problem)
        try:
            if run_of_turn is not None:
                self._spans.record_steps(self._tracer, run_of_turn, run_of_turn.turns, span)
        finally:
            span.end()
        return outcome

    def _start(
        self, traceparent: str | None, attributes: dict[str, Any], started: int, *, failed: bool
    ) -> Any:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        span = self._tracer.start_span(
            f"invoke_agent {self._agent}",
            context=self._spans.remote_parent(traceparent),
            kind=SpanKind.SERVER,
            attributes=attributes,
            start_time=started,
        )
        if failed:
            span.set_status(Status(StatusCode.ERROR))
        return span

    def _visible(self, body: bytes) -> AgentRun | None:
        """The run a turn answered, as the trace policy lets it be seen."""
        try:
            run = decode_run(body)
        except ProtocolError:
            return None
        return self._safe.apply(run, in_place=True) if self._safe is not None else run


def serve_provider(endpoint: str, service: str) -> Any:
    """A provider that exports to ``endpoint`` over OTLP/HTTP (``evalport serve --otlp``)."""
    provider, _ = otel().exporting_provider(endpoint, service)
    return provider
