"""The adapter (:class:`EvalAdapter`: what it promises a host is in its docstring) and the
ASGI endpoint of each path. After the turn's one entry the endpoint has one path
(ARCHITECTURE.md, "The path of a turn through the server").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final, NamedTuple

import msgspec
from evalport.protocol import (
    CONTENT_PARTS_CAPABILITY,
    DELTA_CAPABILITY,
    INTERRUPTS_CAPABILITY,
    PROBLEM_CONTENT_TYPE,
    PROTOCOL_VERSION,
    STREAMING_CAPABILITY,
    AgentInfo,
    ApprovalsRequest,
    CreateSessionRequest,
    CreateSessionResponse,
    Health,
    ProblemType,
    TurnRequest,
    __version__,
    encode,
)
from evalport.protocol.runtime import agent_identity, declared_tools
from msgspec import UNSET
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ._auth import BearerAuth
from ._limits import Limits
from ._problems import HTTPProblem
from ._records import Outcome, RunPolicy, log_details
from ._requests import (
    JSON,
    Headers,
    content_parts_unsupported,
    decoded,
    faults_disabled,
    headers_of,
    idempotency_key,
    query_of,
    read_body,
    since_of,
)
from ._sessions import SessionManager
from ._standalone import ProtocolApp, internal_problem, request_path, safe_instance
from ._streams import Streamed, end_stream, last_event_id, wants_stream
from ._tracing import APPROVALS_ROUTE, TurnTracing
from .stores import SessionStore, open_store

# Every path takes every common method, so that a wrong one is our 405 problem, not the host's.
_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


Answer = Response | Outcome | Streamed
Handler = Callable[[Scope, Receive, Headers], Awaitable[Answer]]
_CONTENT_TYPES: Final = {
    False: (b"content-type", JSON.encode()),
    True: (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
}


class _Endpoints(NamedTuple):
    """The ASGI endpoint of each protocol path (``approvals`` is ``None`` when disabled)."""

    turns: _Endpoint
    session: _Endpoint
    sessions: _Endpoint
    health: _Endpoint
    approvals: _Endpoint | None


class EvalAdapter:
    """Serve ``agent`` (any shape :func:`evalport.protocol.runtime.session_factory` accepts).

    :meth:`routes` is the primitive: Starlette routes under a prefix for a host's own app
    (``Mount`` works too; the host answers other paths); :meth:`app` serves the same
    endpoints without a router (:class:`ProtocolApp`). Nothing depends on a lifespan. Every
    error is an ``application/problem+json`` problem made by the adapter itself, so a host's
    exception handlers never reformat it (an unexpected failure is a 500 ``internal`` with an
    error id the log repeats). Bodies, headers and query parameters are decoded strictly: not
    JSON 400, the wrong shape or an unknown field 422 naming its JSON path, past
    ``Limits.max_body_bytes`` 413 (a turn's names the content part it was cut in), a
    ``Content-Type`` that is not JSON 415.

    - ``token``: bearer auth, required unless ``token=None`` says the host authenticates;
      ``/health`` needs it too unless ``public_health=True``.
    - ``store``: a :class:`~evalport.server.stores.SessionStore`, or a string for
      :func:`~evalport.server.stores.open_store` (``"memory"``, ``"redis://host:6379/0"``).
    - ``policy``: a trace policy applied to every run before it leaves the service. Logs
      quote an agent's error message and traceback only when runs are verbatim (no policy,
      or a verbatim one); otherwise the error id and type, the rest at DEBUG on
      ``evalport.agent.details``.
    - Capabilities ``/health`` lists: ``delta`` (``?since=N`` on a turn or an attach asks
      for the run as a delta) always; ``approvals`` and ``interrupts`` unless
      ``approvals=False``; ``content-parts`` unless ``content_parts=False`` (then a turn with
      parts is a 422 ``content-parts-unsupported``); ``streaming`` unless
      ``streaming=False`` (a turn asked with ``Accept: text/event-stream`` answers its
      events as it runs, its last the body it answers otherwise); ``faults`` only with
      ``faults=True`` (else a session asking for tool faults is a 422 ``faults-disabled``);
      ``tracing`` with ``tracing`` set (each turn drawn as OpenTelemetry spans continuing the
      caller's ``traceparent``; the ``otel`` extra).
    - :meth:`drain` before a shutdown; ``/health`` shows ``loopHeld`` once a turn held the
      event loop too long.
    """

    def __init__(
        self,
        agent: object,
        *,
        token: str | None,
        name: str | None = None,
        version: str | None = None,
        limits: Limits | None = None,
        store: SessionStore | str | None = None,
        policy: RunPolicy | None = None,
        public_health: bool = False,
        approvals: bool = True,
        faults: bool = False,
        tracing: Any = False,
        content_parts: bool = True,
        streaming: bool = True,
    ) -> None:
        self.limits = limits or Limits()
        if isinstance(store, str):
            store = open_store(store)
        self.sessions = SessionManager(agent, limits=self.limits, store=store, policy=policy)
        self._auth = BearerAuth(token) if token is not None else None
        self._public_health = public_health
        self._approvals = approvals
        self._faults = faults
        self._content_parts = content_parts
        self._draining = False
        self.log_details = log_details(policy)
        """Whether the logs may quote agents' error texts (see :func:`~._records.log_details`)."""
        identity = agent_identity(agent, name, version)
        tools = declared_tools(agent)  # /health lists them; absent when none are declared
        capabilities = ["attach", "delete", "idempotency", DELTA_CAPABILITY]
        if approvals:
            capabilities.append("approvals")
            capabilities.append(INTERRUPTS_CAPABILITY)
        if policy is not None:
            capabilities.append("redaction")
        if faults:
            capabilities.append("faults")
        self._tracing = TurnTracing(tracing, identity.name, policy) if tracing else None
        if self._tracing is not None:
            capabilities.append("tracing")
        if content_parts:
            capabilities.append(CONTENT_PARTS_CAPABILITY)
        self._streaming = streaming
        if self._streaming:
            capabilities.append(STREAMING_CAPABILITY)
        self._health_of = Health(
            status="ok",
            protocol=PROTOCOL_VERSION,
            agent=AgentInfo(name=identity.name, version=identity.version),
            capabilities=capabilities,
            evalport_version=__version__,
            tools=msgspec.UNSET if tools is None else tools,
        )
        self._health = encode(self._health_of)

    # -- assembly --------------------------------------------------------------------------------

    def routes(self, prefix: str = "") -> list[BaseRoute]:
        """The protocol routes under ``prefix`` (``""`` or ``/path`` without a trailing slash)."""
        endpoints = self._endpoints(prefix)
        sessions = f"{prefix}/evals/sessions"
        session = sessions + "/{session_id}"
        routes: list[BaseRoute] = [  # the hot route first: hosts match in order
            Route(session + "/turns", endpoints.turns, methods=_METHODS),
            Route(session, endpoints.session, methods=_METHODS),
            Route(sessions, endpoints.sessions, methods=_METHODS),
            Route(f"{prefix}/health", endpoints.health, methods=_METHODS),
        ]
        if endpoints.approvals is not None:
            routes.append(Route(session + "/approvals", endpoints.approvals, methods=_METHODS))
        return routes

    def app(self, prefix: str = "") -> ProtocolApp:
        """A standalone ASGI app serving the same endpoints as :meth:`routes`, without a router.

        Unknown paths and methods are problems too; see :class:`ProtocolApp`.
        """
        endpoints = self._endpoints(prefix)
        return ProtocolApp(
            prefix,
            turns=endpoints.turns,
            session=endpoints.session,
            sessions=endpoints.sessions,
            health=endpoints.health,
            approvals=endpoints.approvals,
        )

    @property
    def draining(self) -> bool:
        """Whether :meth:`drain` was called."""
        return self._draining

    def drain(self) -> None:
        """Stop taking new work before a shutdown; what is in flight finishes.

        Afterwards ``/health``, new sessions and new turns answer 503 ``draining`` with
        ``Retry-After`` (a load balancer stops routing here), and so do retried turns
        waiting for their first attempt on another replica; attach, delete and approvals
        still work, so suspended turns can be finished. Call it from the host's shutdown
        hook before the server stops accepting connections.
        """
        self._draining = True
        self.sessions.drain()

    async def aclose(self) -> None:
        """Close every live session (cancelling suspended turns) and the store."""
        await self.sessions.aclose()

    # -- plumbing ----------------------------------------------------------------------------------

    def _endpoints(self, prefix: str) -> _Endpoints:
        if prefix and (not prefix.startswith("/") or prefix.endswith("/")):
            raise ValueError(f"prefix must look like '/agent' (or be empty), not {prefix!r}")
        return _Endpoints(
            turns=self._guard({"POST": self._turn}, drains=True),
            session=self._guard({"GET": self._attach, "DELETE": self._delete}),
            sessions=self._guard({"POST": self._create}, drains=True),
            health=self._guard(
                {"GET": self._health_endpoint}, public=self._public_health, drains=True
            ),
            approvals=self._guard({"POST": self._decide}) if self._approvals else None,
        )

    def _guard(
        self, endpoints: dict[str, Handler], *, public: bool = False, drains: bool = False
    ) -> _Endpoint:
        """One path's ASGI endpoint: method dispatch, auth, draining, every error a problem."""
        if "GET" in endpoints:
            endpoints = {**endpoints, "HEAD": endpoints["GET"]}
        return _Endpoint(self, endpoints, None if public else self._auth, drains)

    # -- endpoints ---------------------------------------------------------------------------------

    async def _health_endpoint(self, scope: Scope, receive: Receive, headers: Headers) -> Answer:
        held = self.sessions.watchdog.longest
        if held is None:
            return Response(self._health, media_type=JSON)
        if self._public_health:  # a caller without the token sees no live session id
            held = msgspec.structs.replace(held, session_id=msgspec.UNSET)
        health = msgspec.structs.replace(self._health_of, loop_held=held)
        return Response(encode(health), media_type=JSON)

    async def _create(self, scope: Scope, receive: Receive, headers: Headers) -> Answer:
        body = await read_body(receive, headers, self.limits.max_body_bytes)
        create = decoded(body, CreateSessionRequest) if body.strip() else CreateSessionRequest()
        if create.faults and not self._faults:
            raise faults_disabled()
        session_id, expires_at = await self.sessions.create(create)
        location = f"{request_path(scope).rstrip('/')}/{session_id}"
        return Response(
            encode(CreateSessionResponse(session_id=session_id, expires_at=expires_at)),
            201,
            headers={"Location": location},
            media_type=JSON,
        )

    async def _attach(self, scope: Scope, receive: Receive, headers: Headers) -> Answer:
        since = since_of(scope.get("query_string", b""))
        body = await self.sessions.attach(scope["path_params"]["session_id"], since)
        return Response(body, media_type=JSON)

    async def _delete(self, scope: Scope, receive: Receive, headers: Headers) -> Answer:
        await self.sessions.delete(scope["path_params"]["session_id"])
        return Response(status_code=204)

    async def _turn(self, scope: Scope, receive: Receive, headers: Headers) -> Answer:
        key = idempotency_key(headers)
        since = since_of(scope.get("query_string", b""))
        after = last_event_id(headers.get(b"last-event-id"))  # checked, streamed or not
        turn = decoded(
            await read_body(receive, headers, self.limits.max_body_bytes, parts=True), TurnRequest
        )
        if turn.parts and not self._content_parts:
            raise content_parts_unsupported()
        message = "" if turn.message is UNSET else turn.message
        parts = () if turn.parts is UNSET else turn.parts
        session_id = scope["path_params"]["session_id"]
        stream = self._streaming and wants_stream(headers.get(b"accept"))
        entry = self.sessions.turns.turn(session_id, message, key, parts, since, stream=stream)
        if self._tracing is not None:  # spans are drawn from the answer, a delta too
            entry = self._tracing.turn(headers.get(b"traceparent"), session_id, entry)
        answer = await entry
        if isinstance(answer, Outcome):
            return answer
        if answer.job is None:  # joined the stream of its key's turn: after Last-Event-ID
            return Streamed(answer.stream, after)
        answer.job.add_done_callback(partial(end_stream, answer.stream, scope, self.log_details))
        return Streamed(answer.stream, 0)  # (a retry that starts the turn reads it whole)

    async def _decide(self, scope: Scope, receive: Receive, headers: Headers) -> Answer:
        query_of(scope.get("query_string", b""))
        decide = decoded(
            await read_body(receive, headers, self.limits.max_body_bytes), ApprovalsRequest
        )
        session_id = scope["path_params"]["session_id"]
        if self._tracing is None:
            return await self.sessions.decide(session_id, decide.decisions)
        live = self.sessions.live.get(session_id)  # the suspended run, drawn up to here
        run = live.run if live is not None and live.suspended else None
        drawn = 0 if run is None else sum(step.turn == run.turns for step in run.steps)
        return await self._tracing.turn(
            headers.get(b"traceparent"),
            session_id,
            self.sessions.decide(session_id, decide.decisions),
            route=APPROVALS_ROUTE,
            drawn=drawn,
        )


class _Endpoint:
    """The ASGI endpoint of one path (Starlette routes a class instance as plain ASGI).

    It reads the session id from ``scope["path_params"]``, which Starlette's ``Route`` and
    :class:`~evalport.server._standalone.ProtocolApp` both set.
    """

    __slots__ = ("_adapter", "_allow", "_auth", "_drains", "_endpoints")

    def __init__(
        self,
        adapter: EvalAdapter,
        endpoints: dict[str, Handler],
        auth: BearerAuth | None,
        drains: bool,
    ) -> None:
        self._adapter = adapter
        self._endpoints = endpoints
        self._auth = auth
        self._drains = drains
        self._allow = ", ".join(endpoints)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            headers = headers_of(scope["headers"])
            if self._auth is not None:
                self._auth.check(headers.get(b"authorization"))
            method = scope["method"]
            endpoint = self._endpoints.get(method)
            if endpoint is None:
                raise HTTPProblem(
                    ProblemType.METHOD_NOT_ALLOWED,
                    f"{method} is not allowed here; use {self._allow}.",
                    headers={"Allow": self._allow},
                )
            if self._drains and self._adapter.draining:
                raise HTTPProblem(
                    ProblemType.DRAINING,
                    "The server is shutting down; retry on another replica.",
                    retry_after=self._adapter.limits.retry_after,
                )
            answer = await endpoint(scope, receive, headers)
        except HTTPProblem as problem:
            answer = problem.response(safe_instance(scope))
        except Exception:
            answer = internal_problem(scope, details=self._adapter.log_details)
        if isinstance(answer, Outcome):
            body = answer.body
            await send(
                {
                    "type": "http.response.start",
                    "status": answer.status,
                    "headers": [
                        (b"content-length", str(len(body)).encode()),
                        _CONTENT_TYPES[answer.status >= 400],
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
        elif isinstance(answer, Streamed):
            await answer.send(send)
        else:
            await answer(scope, receive, send)
