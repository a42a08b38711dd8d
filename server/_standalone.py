"""The standalone app (:class:`ProtocolApp`): the adapter's endpoints behind an exact path
switch, nothing else.
"""

from __future__ import annotations

import logging
import sys
import uuid
from typing import Final

from evalport.protocol import ProblemType
from starlette.datastructures import URL
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ._problems import HTTPProblem

logger = logging.getLogger("evalport.server")
details_logger = logging.getLogger("evalport.agent.details")

_SESSIONS: Final = "/evals/sessions"


class ProtocolApp:
    """An ASGI app serving the protocol's endpoints under ``prefix``.

    No router, middleware or exception handler sits in front of the endpoints, which
    authenticate, check the method and make every error a problem themselves. Paths are
    matched as strings, the hot one first (``{prefix}/evals/sessions/{id}/turns``, then the
    session, the sessions, ``/health`` and, with approvals, ``.../approvals``), against
    ``scope["path"]`` without ``scope["root_path"]`` (a host's ``Mount``, a proxy's
    ``--root-path``); the session id is one non-empty segment, set in
    ``scope["path_params"]`` as Starlette's routes do. An unknown path (a trailing slash
    too, which Starlette redirected) is a 404 ``not-found`` before authentication; a method
    a route does not serve is its 405 after it, with ``Allow``. ``lifespan`` events are
    acknowledged, a ``websocket`` is closed before it is accepted, and a scope the app cannot
    read is a logged 500 ``internal``: no exception reaches the server.
    """

    __slots__ = ("_exact", "_ids", "_session", "_start", "_tails")

    def __init__(
        self,
        prefix: str,
        *,
        turns: ASGIApp,
        session: ASGIApp,
        sessions: ASGIApp,
        health: ASGIApp,
        approvals: ASGIApp | None = None,
    ) -> None:
        self._exact = {prefix + _SESSIONS: sessions, prefix + "/health": health}
        self._ids = prefix + _SESSIONS + "/"  # where session paths start
        self._start = len(self._ids)
        self._session = session
        self._tails = {"turns": turns}  # what follows "{id}/"
        if approvals is not None:
            self._tails["approvals"] = approvals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await _not_http(scope, receive, send)
            return
        try:
            path: str = scope["path"]
            root = scope.get("root_path")
            if root and path.startswith(root):  # Starlette's get_route_path, inlined
                if path == root:
                    path = ""
                elif path[len(root)] == "/":
                    path = path[len(root) :]
            endpoint, session_id = self._match(path)
            if session_id is not None:
                params = scope.get("path_params")
                scope["path_params"] = (
                    {**params, "session_id": session_id} if params else {"session_id": session_id}
                )
        except Exception:
            await internal_problem(scope)(scope, receive, send)  # logs the scope's fault
            return
        if endpoint is None:
            await self._not_found(path, scope, receive, send)
            return
        await endpoint(scope, receive, send)

    def _match(self, path: str) -> tuple[ASGIApp | None, str | None]:
        """The endpoint of a route path and its session id, or ``(None, None)``."""
        if path.startswith(self._ids):
            session_id, slash, tail = path[self._start :].partition("/")
            endpoint = self._tails.get(tail) if slash else self._session
            if endpoint is None or not session_id:
                return None, None
            return endpoint, session_id
        return self._exact.get(path), None

    async def _not_found(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        instance = safe_instance(scope)
        detail = "No such route."
        if len(path) > 1 and path.endswith("/") and self._match(path.rstrip("/"))[0] is not None:
            detail = (
                f"No such route; without the trailing slash it is {(instance or path).rstrip('/')}."
            )
        response = HTTPProblem(ProblemType.NOT_FOUND, detail).response(instance)
        await response(scope, receive, send)


def request_path(scope: Scope) -> str:
    """The request's full path as Starlette's ``request.url.path`` reads it."""
    return URL(scope=scope).path


def safe_instance(scope: Scope) -> str | None:
    """:func:`request_path` for error answers: ``None`` when the scope cannot give one."""
    try:
        return request_path(scope)
    except Exception:
        path = scope.get("path")
        return path if isinstance(path, str) else None


def internal_problem(scope: Scope, *, details: bool = True) -> Response:
    """The 500 ``internal`` problem for the exception being handled, logged with an error
    id and the exception's type; its message and traceback too if ``details`` (the
    adapter's trace policy is verbatim), else at DEBUG on ``evalport.agent.details``."""
    error_id = str(uuid.uuid4())
    method, path = scope.get("method"), scope.get("path")
    if details:
        logger.exception("internal error %s on %s %s", error_id, method, path)
    else:
        kind = type(sys.exc_info()[1]).__name__
        logger.error(
            "internal error %s on %s %s: %s (message and traceback withheld by the trace "
            "policy; DEBUG on logger evalport.agent.details shows them)",
            error_id, method, path, kind,
        )  # fmt: skip
        details_logger.debug("internal error %s", error_id, exc_info=True)
    return HTTPProblem(
        ProblemType.INTERNAL, f"The server failed unexpectedly (error id {error_id})."
    ).response(safe_instance(scope))


async def _not_http(scope: Scope, receive: Receive, send: Send) -> None:
    kind = scope.get("type")
    if kind == "lifespan":
        while True:
            message = await receive()
            if message.get("type") == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message.get("type") == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif kind == "websocket":
        await send({"type": "websocket.close", "code": 1000, "reason": ""})
