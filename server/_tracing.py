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
- A turn that suspends goes on in the approvals requests that resume it: each is a span
  of its own (``http.route`` the approvals route, continuing its own ``traceparent``)
  with only the steps that the turn's earlier spans did not draw.
- Spans are drawn from the run as it leaves the service: after the adapter's trace
  policy, or :meth:`TracePolicy.safe` when the adapter has none, so a collector never
  receives a payload the policy would digest.
- A collector that is down costs a turn nothing: spans leave through a bounded queue in
  the background; those lost are counted and logged (``evalport.tracing``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, Final

from evalport.protocol import ProtocolError, TracePolicy, decode_run
from evalport.protocol._extras import require

from ._records import Outcome, RunPolicy

TURNS_ROUTE: Final = "/evals/sessions/{session_id}/turns"
APPROVALS_ROUTE: Final = "/evals/sessions/{session_id}/approvals"


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
        self,
        traceparent: str | None,
        session_id: str,
        run: Callable[[], Awaitable[Outcome]],
        *,
        route: str = TURNS_ROUTE,
        drawn: int = 0,
    ) -> Outcome:
        """Run ``run`` in a server span on ``route``; then draw the steps of the turn it
        answers, but for the first ``drawn`` (drawn by an earlier span)."""
        from opentelemetry.trace import SpanKind, Status, StatusCode

        spans = self._spans
        span = self._tracer.start_span(
            f"invoke_agent {self._agent}",
            context=spans.remote_parent(traceparent),
            kind=SpanKind.SERVER,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self._agent,
                "evalport.session.id": session_id,
                "http.request.method": "POST",
                "http.route": route,
            },
        )
        try:
            outcome = await run()
        except BaseException as error:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR))
            span.end()
            raise
        try:
            if outcome.is_problem:
                span.set_attribute("error.type", str(outcome.status))
                span.set_status(Status(StatusCode.ERROR))
            else:
                self._draw(span, outcome.body, drawn)
        finally:
            span.end()
        return outcome

    def _draw(self, span: Any, body: bytes, drawn: int) -> None:
        try:
            run = decode_run(body)
        except ProtocolError:
            return
        if self._safe is not None:
            run = self._safe.apply(run, in_place=True)
        turn = run.turns
        for name, value in self._spans.turn_attributes(run, turn, self._agent).items():
            span.set_attribute(name, value)
        self._spans.record_steps(self._tracer, run, turn, span, drawn)


def serve_provider(endpoint: str, service: str) -> Any:
    """A provider that exports to ``endpoint`` over OTLP/HTTP (``evalport serve --otlp``)."""
    provider, _ = otel().exporting_provider(endpoint, service)
    return provider
