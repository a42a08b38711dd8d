"""The channel under HttpTarget: one origin, its credentials, retries, errors, decoding.

Rule: credentials reach only the base URL's origin; every request goes through httpx
untouched; retries are the policy's. See ARCHITECTURE.md, "The HTTP channel".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final, Literal

import httpx
import msgspec
from evalport.protocol import (
    EVENT_STREAM,
    AgentRun,
    Health,
    Problem,
    ProtocolError,
    TargetError,
    TargetUnavailable,
    TracePolicy,
    __version__,
    decode_response,
    decode_run,
)
from httpx_sse import EventSource

from .._clients import PER_CLIENT, ClientSet, pool_limits, timeout_of, tls_context
from .._errors import Secrets, body_excerpt, error_for
from .._retry import RetryPolicy
from .._trace_context import trace_headers

logger = logging.getLogger("evalport.client")

_SENSITIVE_HEADER_PARTS: Final = ("auth", "token", "key", "secret", "cookie", "session")

Mode = Literal["idempotent", "create", "keyed", "once"]
"""How a call may be retried: ``idempotent`` (GET, DELETE), ``create`` (a session),
``keyed`` (a turn under an Idempotency-Key the server honours), ``once``."""


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


class _OriginBoundHeaders(httpx.Auth):
    """Adds the credentials to requests for the base URL's origin, and to no other."""

    def __init__(self, origin: tuple[str, str, int | None], headers: httpx.Headers) -> None:
        self._origin = origin
        self._headers = headers

    def auth_flow(self, request: httpx.Request) -> Any:
        if _origin(request.url) == self._origin:
            request.headers.update(self._headers)
        yield request


class Channel:
    """The connection to one agent service."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None,
        headers: Mapping[str, str] | None,
        timeout: float | httpx.Timeout | None,
        policy: TracePolicy,
        retry: RetryPolicy,
        transport: httpx.AsyncBaseTransport | None,
        limits: httpx.Limits | None,
    ) -> None:
        url = httpx.URL(base_url)
        clean = url.copy_with(username=None, password=None, query=None, fragment=None)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                "base_url must be an absolute http(s) URL such as https://agent.example/, "
                f"got {clean}"
            )
        credentials = httpx.Headers()  # setting a name replaces it in any case
        plain = httpx.Headers(
            {"Accept": "application/json", "User-Agent": f"evalport/{__version__}"}
        )
        for name, value in (headers or {}).items():
            sensitive = any(part in name.lower() for part in _SENSITIVE_HEADER_PARTS)
            (credentials if sensitive else plain)[name] = value
        if token:
            bearer = token if token.lower().startswith("bearer ") else f"Bearer {token}"
            credentials["Authorization"] = bearer
        self.secrets = Secrets(
            [
                token,
                url.password,
                *credentials.values(),
                *(value.split(" ", 1)[-1] for value in credentials.values()),
            ]
        )
        self.credentials = bool(credentials)
        self.base_url = base_url = str(clean).rstrip("/") + "/"
        self.policy = policy
        self.retry = retry
        auth = _OriginBoundHeaders(_origin(clean), credentials)
        waits = timeout_of(timeout)

        def make() -> httpx.AsyncClient:  # holds no `self`: a channel is no cycle
            return httpx.AsyncClient(
                base_url=base_url,
                headers=plain,
                auth=auth,
                timeout=waits,
                transport=transport,
                limits=limits or pool_limits(),
                verify=tls_context(),
                follow_redirects=False,
            )

        self.clients = ClientSet(make, per_client=None if transport is not None else PER_CLIENT)

    async def aclose(self) -> None:
        await self.clients.aclose()

    def hold(self, doing: str) -> httpx.AsyncClient:
        """A client for one caller (a session) until :meth:`release`; ``doing`` names the
        call a closed channel refuses."""
        if self.clients.closed:
            raise RuntimeError(
                f"cannot send {doing}: this HttpTarget was closed (aclose() or the end of "
                "its `async with`); make a new one"
            )
        return self.clients.hold()

    def release(self, client: httpx.AsyncClient) -> None:
        self.clients.release(client)

    @contextlib.asynccontextmanager
    async def holding(self, doing: str) -> AsyncIterator[httpx.AsyncClient]:
        client = self.hold(doing)
        try:
            yield client
        finally:
            self.release(client)

    def scrub(self, text: str) -> str:
        return self.secrets.scrub(text)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        mode: Mode,
        headers: Mapping[str, str] | None = None,
        session_id: str | None = None,
        via: httpx.AsyncClient | None = None,
    ) -> httpx.Response:
        """Send one call with the retries its ``mode`` allows; raises for non-2xx. ``via``
        is the client the caller holds (a session's); without it, one is held for the call."""
        if via is None:
            async with self.holding(f"{method} /{path}") as client:
                return await self.request(
                    method,
                    path,
                    body=body,
                    mode=mode,
                    headers=headers,
                    session_id=session_id,
                    via=client,
                )
        request_headers = {**trace_headers(), **(headers or {})}  # traceparent: _trace_context.py
        if body is not None:
            request_headers["Content-Type"] = "application/json"
        attempts = 0  # requests actually sent (or tried), the first included
        while True:
            attempts += 1
            try:
                response = await via.request(method, path, content=body, headers=request_headers)
            except httpx.TransportError as error:
                delay = self.retry.delay(attempts) if _retriable(error, mode) else None
                if delay is None:
                    raise TargetUnavailable(
                        self.scrub(
                            f"{method} {self.base_url}{path} failed after {attempts} "
                            f"attempt(s): {type(error).__name__}: {error}"
                        )
                    ) from None
                why = type(error).__name__
            else:
                if response.is_success:
                    return response
                retry_after = response.headers.get("Retry-After")
                delay = self.retry.after_answer(attempts, response.status_code, retry_after)
                if delay is None or mode == "once":
                    raise self._error(path, response, session_id, attempts)
                why = str(response.status_code)
            logger.info("retrying %s /%s in %.2fs after %s", method, path, delay, why)
            await self.retry.sleep(delay)

    async def stream(
        self,
        path: str,
        *,
        body: bytes,
        key: str,
        session_id: str,
        seen: Callable[[str], None],
        via: httpx.AsyncClient,
    ) -> httpx.Response:
        """POST a turn asking for its events (ARCHITECTURE.md, "The HTTP channel") through ``via``, the
        session's client: ``seen`` gets each event's name as it arrives; returns the answer
        as :meth:`request` would."""
        headers = {**trace_headers(), "Content-Type": "application/json"}
        headers |= {"Accept": EVENT_STREAM, "Idempotency-Key": key}
        attempts = 0
        while True:
            attempts += 1
            resumed_from = headers.get("Last-Event-ID")
            try:
                async with via.stream("POST", path, content=body, headers=headers) as got:
                    streamed = got.headers.get("content-type", "").startswith(EVENT_STREAM)
                    if not (got.is_success and streamed):
                        await got.aread()
                        if got.is_success:  # a server that does not stream this turn
                            return got
                        answered = got
                    else:
                        answered = None
                        events = EventSource(got).aiter_sse()
                        async for event in events:
                            if event.id:
                                headers["Last-Event-ID"] = event.id
                            if event.event == "result":
                                await _read_to_the_end(events)
                                return httpx.Response(200, content=event.data, request=got.request)
                            if event.event == "problem":
                                answered = _problem_response(event.data, got)
                                await _read_to_the_end(events)
                                break
                            if event.event == "overflow":
                                logger.info("session %s: %s", session_id, event.data)
                                return await self.request(
                                    "POST",
                                    path,
                                    body=body,
                                    mode="keyed",
                                    headers={"Idempotency-Key": key},
                                    session_id=session_id,
                                    via=via,
                                )
                            seen(event.event)
                if answered is not None:  # a problem, before the stream or as its end
                    retry_after = answered.headers.get("Retry-After")
                    delay = self.retry.after_answer(attempts, answered.status_code, retry_after)
                    why = str(answered.status_code)
                    if delay is None:
                        raise self._error(path, answered, session_id, attempts)
                    headers.pop("Last-Event-ID", None)  # the retry may start the turn anew
                else:
                    if headers.get("Last-Event-ID") != resumed_from:
                        attempts = 0  # this connection made progress: the budget is per cut
                    delay, why = self.retry.delay(max(attempts, 1)), "a stream cut short"
            except httpx.TransportError as error:
                if headers.get("Last-Event-ID") != resumed_from:
                    attempts = 0
                delay, why = self.retry.delay(max(attempts, 1)), type(error).__name__
                if delay is None:
                    raise TargetUnavailable(
                        self.scrub(
                            f"POST {self.base_url}{path} (streamed) failed after {attempts} "
                            f"attempt(s): {type(error).__name__}: {error}"
                        )
                    ) from None
            if delay is None:
                raise TargetUnavailable(
                    f"POST {self.base_url}{path}: the turn's stream ended before its final "
                    f"event {attempts} time(s) in a row"
                )
            logger.info("resuming the stream of POST /%s in %.2fs after %s", path, delay, why)
            await self.retry.sleep(delay)

    def _error(
        self, path: str, response: httpx.Response, session_id: str | None, attempts: int
    ) -> TargetError:
        problem: Problem | None = None
        if response.content.lstrip()[:1] == b"{":
            try:
                problem = decode_response(response.content, Problem)
            except ProtocolError:
                problem = None
        excerpt = ""
        if problem is None or not (problem.title or problem.detail):
            excerpt = body_excerpt(
                response.content, self.secrets, verbatim=self.policy.verbatim_payloads
            )
        return error_for(
            method=response.request.method,
            url=f"{self.base_url}{path}",
            status=response.status_code,
            problem=problem,
            excerpt=excerpt,
            location=response.headers.get("Location"),
            retry_after=response.headers.get("Retry-After"),
            session_id=session_id,
            attempts=attempts,
            credentials=self.credentials,
            scrub=self.scrub,
        )

    def protocol_error(self, error: ProtocolError, response: httpx.Response) -> ProtocolError:
        text = str(error)
        if error.excerpt:
            text = text.removesuffix(f"; body starts: {error.excerpt}")
        excerpt = body_excerpt(
            response.content, self.secrets, verbatim=self.policy.verbatim_payloads
        )
        return ProtocolError(
            self.scrub(f"{response.request.method} {response.request.url.path}: {text}"),
            path=error.path,
            excerpt=excerpt,
            status=response.status_code,
        )

    def decode(self, response: httpx.Response, kind: type[Any], what: str) -> Any:
        try:
            return decode_response(response.content, kind, what=what)
        except ProtocolError as error:
            raise self.protocol_error(error, response) from None

    def health(self, response: httpx.Response) -> Health:
        data = response.content
        if not data.strip():
            return Health()
        try:
            value = msgspec.json.decode(data)
        except msgspec.DecodeError:
            raise self.protocol_error(
                ProtocolError("/health did not answer JSON: is base_url the adapter's address?"),
                response,
            ) from None
        if not isinstance(value, dict):
            return Health()  # Instructor-style servers may answer any JSON
        health: Health = self.decode(response, Health, "health")
        return health

    def run(self, response: httpx.Response) -> AgentRun:
        try:
            run = decode_run(response.content)
        except ProtocolError as error:
            raise self.protocol_error(error, response) from None
        return self.policy.apply(run, in_place=True)


async def _read_to_the_end(events: AsyncIterator[Any]) -> None:
    """Read what follows a stream's final event (its end, at once from a server that keeps
    the protocol), so that its connection serves the session's next call instead of being
    closed half read; a server that keeps the stream open gets a second, then is cut."""
    with contextlib.suppress(TimeoutError, httpx.TransportError):
        async with asyncio.timeout(1.0):
            async for _ in events:
                pass


def _problem_response(data: str, streamed: httpx.Response) -> httpx.Response:
    """A streamed ``problem`` event as the response it stands for (its status and its
    ``retryAfter`` inside)."""
    try:
        problem = msgspec.json.decode(data)
        status = int(problem.get("status", 500))
        retry_after = problem.get("retryAfter")
    except (msgspec.DecodeError, AttributeError, TypeError, ValueError):
        status, retry_after = 500, None
    headers = {"Content-Type": "application/problem+json"}
    if isinstance(retry_after, int) and not isinstance(retry_after, bool):
        headers["Retry-After"] = str(retry_after)
    return httpx.Response(status, content=data, headers=headers, request=streamed.request)


def _retriable(error: httpx.TransportError, mode: Mode) -> bool:
    if mode == "once":
        return False
    if mode == "idempotent":
        return True
    never_sent = isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout))
    if mode == "create":
        return never_sent
    # "keyed": the server deduplicates by Idempotency-Key; a read that timed out means
    # the turn may still run, and repeating it would only meet a busy session.
    return never_sent or not isinstance(error, httpx.TimeoutException)
