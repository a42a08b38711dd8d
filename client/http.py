"""HttpTarget: drive an agent through the evalport protocol over HTTP.

Rules:

- ``open`` checks ``GET /health`` once per target (protocol version, agent name and
  version; skip it with ``health_check=False``), then ``POST /evals/sessions``. ``send`` is
  ``POST .../turns``, ``decide`` ``POST .../approvals``, ``refresh`` and ``attach`` are
  ``GET /evals/sessions/{id}``, ``close`` is ``DELETE`` (a session already gone is fine).
- Every run a server returns is decoded leniently and passed through the target's trace
  policy (:meth:`TracePolicy.safe` unless told otherwise) before anything sees it.
- The token goes only to the base URL's origin: redirects are never followed (a 3xx is
  an error that names where it pointed), and the token and credential headers are
  scrubbed from every error text. ``repr`` never shows them.
- Retries follow :mod:`evalport.client.retry`: a turn carries an ``Idempotency-Key`` and
  is retried only if the server lists the ``idempotency`` capability.
- One pooled ``httpx.AsyncClient`` with keep-alive per target; close it with
  ``aclose()`` or ``async with``. Timeouts: 5 s to connect, 300 s to read (an agent turn
  may run many steps); pass ``timeout=`` (seconds or an ``httpx.Timeout``) to change them.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final, Literal
from urllib.parse import quote

import httpx
import msgspec
from evalport.protocol import (
    PROTOCOL_VERSION,
    AgentRun,
    ApprovalsRequest,
    CreateSessionRequest,
    CreateSessionResponse,
    Health,
    Problem,
    TurnRequest,
    decode_response,
    decode_run,
    encode,
)
from evalport.protocol import ProtocolError as WireProtocolError
from evalport.protocol.policy import TracePolicy

from .errors import (
    ProtocolError,
    Secrets,
    SessionNotFound,
    TargetError,
    TargetUnavailable,
    body_excerpt,
    error_for,
)
from .retry import RetryPolicy, parse_retry_after
from .target import TargetIdentity, Turn
from .turns import DecisionInput, decisions_of, next_turn

__all__ = ["DEFAULT_TIMEOUT", "IDEMPOTENCY_CAPABILITY", "HttpSession", "HttpTarget"]

logger = logging.getLogger("evalport.client")

DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=5.0, read=300.0, write=30.0, pool=30.0)
IDEMPOTENCY_CAPABILITY: Final = "idempotency"
_SENSITIVE_HEADER_PARTS: Final = ("auth", "token", "key", "secret", "cookie", "session")

Mode = Literal["idempotent", "create", "keyed", "once"]


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


def _timeout_of(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout, connect=min(float(timeout), 5.0))


class HttpTarget:
    """An agent behind the evalport protocol (or an Instructor-compatible endpoint)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        policy: TracePolicy | None = None,
        health_check: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                f"base_url must be an absolute http(s) URL such as https://agent.example/, "
                f"got {url.copy_with(username=None, password=None)!s}"
            )
        credentials: dict[str, str] = {}
        plain: dict[str, str] = {"Accept": "application/json"}
        for name, value in (headers or {}).items():
            sensitive = any(part in name.lower() for part in _SENSITIVE_HEADER_PARTS)
            (credentials if sensitive else plain)[name] = value
        if token:
            credentials["Authorization"] = (
                token if token.lower().startswith("bearer ") else f"Bearer {token}"
            )
        self._secrets = Secrets(
            [
                token,
                url.password,
                *credentials.values(),
                *(v.split(" ", 1)[-1] for v in credentials.values()),
            ]
        )
        clean = url.copy_with(username=None, password=None, query=None, fragment=None)
        self.base_url = str(clean).rstrip("/") + "/"
        self.policy = policy if policy is not None else TracePolicy.safe()
        self.health_check = health_check
        self.retry = retry if retry is not None else RetryPolicy()
        self.health: Health | None = None
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=plain,
            auth=_OriginBoundHeaders(_origin(clean), credentials),
            timeout=_timeout_of(timeout),
            transport=transport,
            limits=limits or httpx.Limits(max_connections=100, max_keepalive_connections=20),
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"HttpTarget({self.base_url!r}, policy={self.policy.describe()})"

    # -- the Target protocol ------------------------------------------------------------

    @property
    def identity(self) -> TargetIdentity:
        agent = self.health.agent if self.health is not None else None
        return TargetIdentity(
            kind="http",
            location=self.base_url,
            agent_name=agent.name if agent is not None else "agent",
            agent_version=agent.version if agent is not None else "0",
        )

    @property
    def idempotent_turns(self) -> bool:
        """Whether turns may be retried: the server's health lists ``idempotency``."""
        return self.health is not None and IDEMPOTENCY_CAPABILITY in self.health.capabilities

    async def check(self) -> Health:
        """``GET /health``: the protocol version must match; records the agent's identity."""
        response = await self._request("GET", "health", mode="idempotent")
        health = self._decode_health(response)
        major = health.protocol.split(".", 1)[0]
        if major != PROTOCOL_VERSION:
            raise ProtocolError(
                f"{self.base_url}health speaks protocol {health.protocol!r}; this client "
                f"speaks {PROTOCOL_VERSION!r}: upgrade the side that is behind",
                path="$.protocol",
            )
        self.health = health
        return health

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> HttpSession:
        """Check health (once) and create a session."""
        await self._ensure_checked()
        body = encode(
            CreateSessionRequest(
                case_id=case_id,
                description=description,
                metadata=dict(metadata) if metadata is not None else None,
            )
        )
        response = await self._request("POST", "evals/sessions", body=body, mode="create")
        created = self._decode(response, CreateSessionResponse, "session")
        if not created.session_id:
            raise ProtocolError(
                "POST /evals/sessions answered an empty sessionId",
                path="$.sessionId",
                status=response.status_code,
            )
        run = AgentRun(session_id=created.session_id)
        return HttpSession(self, created.session_id, run, expires_at=created.expires_at)

    async def attach(self, session_id: str) -> HttpSession:
        """A session opened elsewhere (another process, another run), with its run so far."""
        if not session_id:
            raise ValueError("attach() needs the id of an existing session")
        await self._ensure_checked()
        session = HttpSession(self, session_id, AgentRun(session_id=session_id))
        await session.refresh()
        return session

    async def aclose(self) -> None:
        """Close the connection pool (sessions stay open on the server)."""
        await self._client.aclose()

    async def __aenter__(self) -> HttpTarget:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- plumbing (HttpSession uses these) ------------------------------------------------

    async def _ensure_checked(self) -> None:
        if self.health_check and self.health is None:
            await self.check()

    def _session_path(self, session_id: str, tail: str = "") -> str:
        return f"evals/sessions/{quote(session_id, safe='')}{tail}"

    def _scrubbed(self, text: str) -> str:
        return self._secrets.scrub(text)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        mode: Mode,
        headers: Mapping[str, str] | None = None,
        session_id: str | None = None,
    ) -> httpx.Response:
        """Send one call with the retries its ``mode`` allows; raises for non-2xx."""
        request_headers = dict(headers or {})
        if body is not None:
            request_headers["Content-Type"] = "application/json"
        retry = 0
        while True:
            try:
                response = await self._client.request(
                    method, path, content=body, headers=request_headers
                )
            except httpx.TransportError as error:
                retry += 1
                delay = self.retry.delay(retry) if _retriable(error, mode) else None
                if delay is None:
                    raise TargetUnavailable(
                        self._scrubbed(
                            f"{method} {self.base_url}{path} failed after {retry} "
                            f"attempt(s): {type(error).__name__}: {error}"
                        )
                    ) from None
                logger.info(
                    "retrying %s /%s in %.2fs after %s", method, path, delay, type(error).__name__
                )
                await self.retry.sleep(delay)
                continue
            if response.status_code in (429, 503) and mode != "once":
                retry += 1
                wait = parse_retry_after(response.headers.get("Retry-After"))
                delay = self.retry.delay(retry, wait)
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
            raise self._error(method, path, response, session_id, attempts=retry + 1)

    def _error(
        self,
        method: str,
        path: str,
        response: httpx.Response,
        session_id: str | None,
        attempts: int,
    ) -> TargetError:
        problem: Problem | None = None
        if response.content.lstrip()[:1] == b"{":
            try:
                problem = decode_response(response.content, Problem)
            except WireProtocolError:
                problem = None
        excerpt = ""
        if problem is None or not (problem.title or problem.detail):
            excerpt = body_excerpt(
                response.content, self._secrets, verbatim=self.policy.verbatim_payloads
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
            scrub=self._scrubbed,
        )

    def _wrap(self, error: WireProtocolError, response: httpx.Response) -> ProtocolError:
        text = str(error)
        if error.excerpt:
            text = text.removesuffix(f"; body starts: {error.excerpt}")
        excerpt = body_excerpt(
            response.content, self._secrets, verbatim=self.policy.verbatim_payloads
        )
        request = response.request
        return ProtocolError(
            self._scrubbed(f"{request.method} {request.url.path}: {text}"),
            path=error.path,
            excerpt=excerpt,
            status=response.status_code,
        )

    def _decode(self, response: httpx.Response, kind: type[Any], what: str) -> Any:
        try:
            return decode_response(response.content, kind, what=what)
        except WireProtocolError as error:
            raise self._wrap(error, response) from None

    def _decode_health(self, response: httpx.Response) -> Health:
        data = response.content
        if not data.strip():
            return Health()
        try:
            value = msgspec.json.decode(data)
        except msgspec.DecodeError:
            raise self._wrap(
                WireProtocolError(
                    "/health did not answer JSON: is base_url the adapter's address?"
                ),
                response,
            ) from None
        if not isinstance(value, dict):
            return Health()  # Instructor-style servers may answer any JSON
        health: Health = self._decode(response, Health, "health")
        return health

    def _run(self, response: httpx.Response) -> AgentRun:
        try:
            run = decode_run(response.content)
        except WireProtocolError as error:
            raise self._wrap(error, response) from None
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


class HttpSession:
    """One session on an :class:`HttpTarget`; ``run`` is the accumulated, redacted run."""

    def __init__(
        self,
        target: HttpTarget,
        session_id: str,
        run: AgentRun,
        *,
        expires_at: str | None = None,
    ) -> None:
        self._target = target
        self._id = session_id
        self._run = run
        self.expires_at = expires_at
        self.closed = False

    def __repr__(self) -> str:
        return f"HttpSession({self._id!r}, turns={self._run.turns})"

    @property
    def id(self) -> str:
        return self._id

    @property
    def run(self) -> AgentRun:
        return self._run

    @property
    def target(self) -> HttpTarget:
        return self._target

    async def send(self, message: str) -> Turn:
        """One user message; returns when the agent finished the turn or suspended it."""
        target = self._target
        response = await target._request(
            "POST",
            target._session_path(self._id, "/turns"),
            body=encode(TurnRequest(message=message)),
            mode="keyed" if target.idempotent_turns else "once",
            headers={"Idempotency-Key": uuid.uuid4().hex},
            session_id=self._id,
        )
        return self._advance(target._run(response), message)

    async def decide(self, decisions: Mapping[str, DecisionInput]) -> Turn:
        """Answer the pending approvals (call id -> decision) and resume the turn."""
        target = self._target
        body = encode(ApprovalsRequest(decisions=decisions_of(decisions)))
        response = await target._request(
            "POST",
            target._session_path(self._id, "/approvals"),
            body=body,
            mode="once",
            session_id=self._id,
        )
        return self._advance(target._run(response), None)

    async def refresh(self) -> AgentRun:
        """Read the accumulated run again (what ``attach`` does)."""
        target = self._target
        response = await target._request(
            "GET", target._session_path(self._id), mode="idempotent", session_id=self._id
        )
        self._run = target._run(response)
        return self._run

    async def close(self) -> None:
        """Delete the session on the server; a session already gone counts as closed."""
        if self.closed:
            return
        target = self._target
        with contextlib.suppress(SessionNotFound):
            await target._request(
                "DELETE", target._session_path(self._id), mode="idempotent", session_id=self._id
            )
        self.closed = True

    async def __aenter__(self) -> HttpSession:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    def _advance(self, run: AgentRun, message: str | None) -> Turn:
        turn = next_turn(self._run, run, message)
        self._run = run
        return turn
