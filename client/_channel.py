"""The channel under HttpTarget: one origin, its credentials, retries, errors, decoding.

Rules:

- Each call goes over one of two wires; which one, and the rules both keep, are in
  ``_transport.py``. Everything below is written once, above the wire.
- Credentials (the token, and headers whose names look like credentials) can only reach
  the base URL's origin: the channel sends only there and follows no redirect, and its
  ``httpx.AsyncClient`` attaches them by an auth flow that checks the request's origin;
  every text a channel puts in an error passes through :class:`Secrets`.
- Every request says ``User-Agent: evalport/<version>`` on either wire, so an agent
  service can tell evals apart. Header names are case-insensitive: a caller's header
  replaces a default of the same name in any case (``user-agent``, ``accept``), and the
  token replaces a caller's ``Authorization``.
- A closed channel sends nothing: a call after :meth:`Channel.aclose` raises
  :class:`RuntimeError` on either wire (httpx's client does the same).
- :meth:`Channel.request` applies the retry rules of :mod:`evalport.client._retry` for
  the call's mode and turns every non-2xx answer into a typed error.
- :meth:`Channel.run` decodes a run leniently and applies the trace policy in place; a
  body it cannot use is a :class:`ProtocolError` whose excerpt is redacted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, Literal

import httpx
import msgspec
from evalport.protocol import (
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

from ._errors import Secrets, body_excerpt, error_for
from ._retry import RetryPolicy, parse_retry_after
from ._trace_context import trace_headers
from ._transport import AiohttpWire, HttpxWire, Reply, Wire, mocked, proxied

logger = logging.getLogger("evalport.client")

DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=5.0, read=300.0, write=30.0, pool=30.0)
_SENSITIVE_HEADER_PARTS: Final = ("auth", "token", "key", "secret", "cookie", "session")

Mode = Literal["idempotent", "create", "keyed", "once"]
"""How a call may be retried: ``idempotent`` (GET, DELETE), ``create`` (a session),
``keyed`` (a turn under an Idempotency-Key the server honours), ``once``."""


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


class _OriginBoundHeaders(httpx.Auth):
    """Adds the credentials to requests for the base URL's origin, and to no other."""

    def __init__(self, origin: tuple[str, str, int | None], headers: dict[str, str]) -> None:
        self._origin = origin
        self._headers = headers

    def auth_flow(self, request: httpx.Request) -> Any:
        if _origin(request.url) == self._origin:
            request.headers.update(self._headers)
        yield request


def _put(headers: dict[str, str], name: str, value: str) -> None:
    """Set ``name``, dropping a header of the same name in any case."""
    for key in [key for key in headers if key.lower() == name.lower()]:
        del headers[key]
    headers[name] = value


def _timeout_of(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout, connect=min(float(timeout), 5.0))


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
        credentials: dict[str, str] = {}
        plain: dict[str, str] = {
            "Accept": "application/json",
            "User-Agent": f"evalport/{__version__}",
        }
        for name, value in (headers or {}).items():
            sensitive = any(part in name.lower() for part in _SENSITIVE_HEADER_PARTS)
            _put(credentials if sensitive else plain, name, value)
        if token:
            _put(
                credentials,
                "Authorization",
                token if token.lower().startswith("bearer ") else f"Bearer {token}",
            )
        self.secrets = Secrets(
            [
                token,
                url.password,
                *credentials.values(),
                *(value.split(" ", 1)[-1] for value in credentials.values()),
            ]
        )
        self.credentials = bool(credentials)
        self.base_url = str(clean).rstrip("/") + "/"
        self.policy = policy
        self.retry = retry
        self._limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self._timeout = _timeout_of(timeout)
        self._plain = plain
        self._auth = _OriginBoundHeaders(_origin(clean), credentials)
        self._transport = transport
        self._httpx: HttpxWire | None = None
        self._aiohttp: AiohttpWire | None = None
        self._closed = False
        if transport is None and not proxied(clean):
            self._aiohttp = AiohttpWire(self._limits, self._timeout, {**plain, **credentials})

    @property
    def client(self) -> httpx.AsyncClient:
        """The ``httpx.AsyncClient`` of the httpx wire."""
        return self._httpx_wire().client

    def _httpx_wire(self) -> HttpxWire:
        if self._httpx is None:  # made at first use: most channels never need it
            client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._plain,
                auth=self._auth,
                timeout=self._timeout,
                transport=self._transport,
                limits=self._limits,
                follow_redirects=False,
            )
            self._httpx = HttpxWire(client)
        return self._httpx

    def _wire(self) -> Wire:
        if self._aiohttp is None or mocked():
            return self._httpx_wire()
        return self._aiohttp

    async def aclose(self) -> None:
        self._closed = True
        for wire in (self._aiohttp, self._httpx):
            if wire is not None:
                await wire.aclose()

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
    ) -> Reply:
        """Send one call with the retries its ``mode`` allows; raises for non-2xx."""
        if self._closed:
            raise RuntimeError(
                f"cannot send {method} /{path}: this HttpTarget was closed (aclose() or the "
                "end of its `async with`); make a new one"
            )
        request_headers = {**trace_headers(), **(headers or {})}  # traceparent: _trace_context.py
        if body is not None:
            request_headers["Content-Type"] = "application/json"
        url = self.base_url + path
        attempts = 0  # requests actually sent (or tried), the first included
        while True:
            attempts += 1
            try:
                response = await self._wire().send(method, url, request_headers, body)
            except httpx.TransportError as error:
                delay = self.retry.delay(attempts) if _retriable(error, mode) else None
                if delay is None:
                    raise TargetUnavailable(
                        self.scrub(
                            f"{method} {self.base_url}{path} failed after {attempts} "
                            f"attempt(s): {type(error).__name__}: {error}"
                        )
                    ) from None
                logger.info(
                    "retrying %s /%s in %.2fs after %s", method, path, delay, type(error).__name__
                )
                await self.retry.sleep(delay)
                continue
            if response.status_code in (429, 503) and mode != "once":
                wait = parse_retry_after(response.headers.get("Retry-After"))
                delay = self.retry.delay(attempts, wait)
                if delay is not None:
                    logger.info(
                        "retrying %s /%s in %.2fs after %d",
                        method,
                        path,
                        delay,
                        response.status_code,
                    )
                    await self.retry.sleep(delay)
                    continue
            if response.is_success:
                return response
            raise self.error(method, path, response, session_id, attempts=attempts)

    def error(
        self,
        method: str,
        path: str,
        response: Reply,
        session_id: str | None,
        attempts: int,
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
            method=method,
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

    def protocol_error(self, error: ProtocolError, response: Reply) -> ProtocolError:
        text = str(error)
        if error.excerpt:
            text = text.removesuffix(f"; body starts: {error.excerpt}")
        excerpt = body_excerpt(
            response.content, self.secrets, verbatim=self.policy.verbatim_payloads
        )
        return ProtocolError(
            self.scrub(f"{response.method} {httpx.URL(response.url).path}: {text}"),
            path=error.path,
            excerpt=excerpt,
            status=response.status_code,
        )

    def decode(self, response: Reply, kind: type[Any], what: str) -> Any:
        try:
            return decode_response(response.content, kind, what=what)
        except ProtocolError as error:
            raise self.protocol_error(error, response) from None

    def health(self, response: Reply) -> Health:
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

    def run(self, response: Reply) -> AgentRun:
        try:
            run = decode_run(response.content)
        except ProtocolError as error:
            raise self.protocol_error(error, response) from None
        return self.policy.apply(run, in_place=True)


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
