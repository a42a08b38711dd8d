"""What ``evalport serve`` runs: the target made into an agent, in the server's loop when
it must (async resources are made there); a bad target is exit 2 before the server binds.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

from evalport.protocol import ProblemType
from evalport.protocol._loopback import local_request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ._app import EvalAdapter
from ._problems import HTTPProblem
from .adapters._detect import framework_adapter

Build = Callable[[object], EvalAdapter]


def _takes_no_arguments(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        parameter.default is not inspect.Parameter.empty
        or parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        for parameter in parameters
    )


def _context_factory(target: object) -> Callable[[], Any] | None:
    """A no-argument callable returning an async context manager, if ``target`` is one."""
    if not callable(target) or inspect.isclass(target) or not _takes_no_arguments(target):
        return None
    if inspect.isasyncgenfunction(target):
        return contextlib.asynccontextmanager(target)
    if inspect.isasyncgenfunction(inspect.unwrap(target)):  # @asynccontextmanager
        return target
    return None


def is_deferred(target: object) -> bool:
    """Whether ``target`` is made in the server's loop (an async factory or generator)."""
    if _context_factory(target) is not None:
        return True
    return (
        callable(target)
        and not inspect.isclass(target)
        and inspect.iscoroutinefunction(target)
        and _takes_no_arguments(target)
    )


def as_agent(value: object, *, say: Callable[[str], None]) -> object:
    """``value``, or its framework's adapter around it (``say`` tells which)."""
    recognised = framework_adapter(value)
    if recognised is None:
        return value
    say(
        f"serving the {recognised.framework} with "
        f"evalport.server.adapters.{recognised.wrapper} (its defaults; wrap it yourself "
        "to pass options)"
    )
    return recognised.agent


class _UnfitStore(Exception):
    """The session store would lose sessions: the start-up fails, saying why."""


class ServedApp:
    """The ASGI app ``evalport serve`` runs: the adapter's app, built at once or at start-up."""

    def __init__(
        self,
        target: object,
        build: Build,
        *,
        prefix: str = "",
        say: Callable[[str], None],
        closing: Callable[[], object] | None = None,
        allow_eviction: bool = False,
    ) -> None:
        self._allow_eviction = allow_eviction
        self._target = target
        self._build = build
        self._prefix = prefix
        self._say = say
        self._stack = contextlib.AsyncExitStack()
        if closing is not None:  # pushed first: runs last
            self._stack.push_async_callback(asyncio.to_thread, closing)
        self.adapter: EvalAdapter | None = None
        self._app: ASGIApp | None = None
        if not is_deferred(target):
            self._serve(as_agent(target, say=say))

    def _serve(self, agent: object) -> None:
        self.adapter = self._build(agent)
        self._app = self.adapter.app(self._prefix)

    def drain(self) -> None:
        """Drain the adapter (before a shutdown), once there is one."""
        if self.adapter is not None:
            self.adapter.drain()

    async def _start(self) -> None:
        if self._app is not None:
            return
        target = self._target
        context = _context_factory(target)
        if context is not None:
            made = await self._stack.enter_async_context(context())
        else:
            assert callable(target)
            made = await target()
        if made is None:
            raise TypeError(f"{_name(target)} returned no agent")
        self._serve(as_agent(made, say=self._say))

    async def _check_store(self) -> None:
        """The session store's eviction policy (see ARCHITECTURE.md, "evalport serve")."""
        assert self.adapter is not None
        store = self.adapter.sessions.store
        read = getattr(store, "eviction_policy", None)  # a Redis store
        if read is None or self._allow_eviction:
            return
        policy = await read()
        if policy is None:
            self._say(
                "cannot read the store's maxmemory-policy (CONFIG refused, or Redis unreachable):"
                " it must be noeviction, or Redis may evict live sessions"
            )
        elif policy != "noeviction":
            raise _UnfitStore(
                f"the session store's maxmemory-policy is {policy}: Redis would evict live "
                "sessions once full; set maxmemory-policy noeviction (or pass "
                "--allow-eviction)"
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            assert self._app is not None, "no agent before start-up"
            await self._app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self._start()
                    await self._check_store()
                except _UnfitStore as error:
                    self._say(str(error))
                    await self._stack.aclose()
                    await send({"type": "lifespan.startup.failed", "message": ""})
                    return
                except Exception as error:
                    text = (
                        f"{_name(self._target)} failed at start-up: {type(error).__name__}: {error}"
                    )
                    self._say(text)  # uvicorn adds that start-up failed
                    await self._stack.aclose()  # (the trace provider's shutdown included)
                    await send({"type": "lifespan.startup.failed", "message": ""})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _name(target: object) -> str:
    return getattr(target, "__qualname__", None) or type(target).__qualname__


def stderr_line(text: str) -> None:
    print(f"evalport serve: {text}", file=sys.stderr)


class LocalCallersOnly:
    """``403`` to a request that does not come from this machine (see ARCHITECTURE.md,
    "evalport serve")."""

    def __init__(self, app: ASGIApp, bound: str) -> None:
        self.app = app
        self.bound = bound

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = _refused(dict(scope["headers"]), self.bound)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refused(headers: dict[bytes, bytes], bound: str) -> Response | None:
    if not local_request(headers, bound):
        return HTTPProblem(
            ProblemType.FORBIDDEN,
            "This server has no token and answers only requests from this machine: call it "
            "as http://127.0.0.1:PORT (or localhost), not through another host name or from "
            "a web page of another site.",
        ).response()
    has_body = headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers
    if has_body and b"content-type" not in headers:
        return HTTPProblem(
            ProblemType.UNSUPPORTED_MEDIA_TYPE, "Send the body as application/json."
        ).response()
    return None
