"""The channel's default transport: httpx requests and responses, aiohttp on the socket.

httpx stays the API (requests, responses, timeouts and errors are httpx's); only the
connection pool is aiohttp's, because httpx's own pool spends CPU per request that grows
with its number of connections (``benchmarks/runner.py`` measures both).

Rules:

- Timeouts keep httpx's meaning: ``connect`` bounds opening a connection
  (:class:`httpx.ConnectTimeout`), ``read`` the wait for each piece of the response,
  headers and body (:class:`httpx.ReadTimeout`), ``pool`` the wait for one of
  ``max_connections`` (:class:`httpx.PoolTimeout`; the wait happens here, so aiohttp
  never queues). aiohttp has no write timeout: a write that stalls ends as a read timeout.
- Errors land on the httpx exception that httpx's own transport raises for the same
  failure, because the retry rules read them (``_channel._retriable``): nothing sent is
  :class:`httpx.ConnectError` or :class:`httpx.ConnectTimeout`, a server that hung up is
  :class:`httpx.RemoteProtocolError`, a reset connection :class:`httpx.ReadError`.
- The body is read whole before the response is returned (the channel needs all of it)
  and the connection goes back to the pool at once. Redirects are not followed and
  bodies are not decompressed here: httpx does both (the channel follows none).
- aiohttp resends a ``GET`` or ``DELETE`` once when a kept-alive connection turns out
  closed by the server (httpx's pool discards such a connection before using it); the
  retry rules are applied above this, unchanged.
- Mocks: respx and pytest-httpx intercept httpx by replacing the send method of httpcore's
  pool or of httpx's transport. While either is replaced, requests go through httpx's own
  transport, so the mock sees every request and none reaches the network.
- Certificates are checked with httpx's SSL context (certifi, ``SSL_CERT_FILE``); proxies
  from the environment stay httpx's (it mounts its own transport for them).
"""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

if TYPE_CHECKING:
    import aiohttp


def _aiohttp() -> ModuleType:
    """aiohttp, imported at the first request (``import evalport.client`` stays light)."""
    try:
        import aiohttp
    except ImportError:
        raise ImportError(
            "HttpTarget sends over aiohttp, which is not installed. "
            "Run: pip install 'evalport[client]'"
        ) from None
    return aiohttp


def _errors(aio: ModuleType) -> tuple[tuple[type[BaseException], type[httpx.TransportError]], ...]:
    """aiohttp failure -> the httpx error httpx's own transport raises; the first match wins."""
    return (
        (aio.ConnectionTimeoutError, httpx.ConnectTimeout),
        (aio.ServerTimeoutError, httpx.ReadTimeout),
        (aio.ClientConnectorError, httpx.ConnectError),
        (aio.ServerDisconnectedError, httpx.RemoteProtocolError),
        (aio.ClientPayloadError, httpx.RemoteProtocolError),
        (aio.ClientResponseError, httpx.RemoteProtocolError),
        (aio.ClientOSError, httpx.ReadError),
        (aio.ClientError, httpx.TransportError),
    )


def mocked() -> bool:
    """Whether a mocking library has replaced the send method of httpx's own transport."""
    return not (
        _own(httpcore.AsyncConnectionPool, "handle_async_request")
        and _own(httpx.AsyncHTTPTransport, "handle_async_request")
    )


def _own(cls: type, name: str) -> bool:
    qualname = getattr(getattr(cls, name), "__qualname__", None)
    return qualname == f"{cls.__qualname__}.{name}"


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Sends httpx requests over one aiohttp session (created at the first request)."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._session: aiohttp.ClientSession | None = None
        self._aio: ModuleType | None = None
        self._ssl: Any = None
        self._slots = (
            asyncio.Semaphore(limits.max_connections)
            if limits.max_connections is not None
            else None
        )
        self._fallback: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if mocked():
            if self._fallback is None:
                self._fallback = httpx.AsyncHTTPTransport(limits=self._limits)
            return await self._fallback.handle_async_request(request)
        timeout = request.extensions.get("timeout", {})
        slots = self._slots
        if slots is not None:
            try:
                async with asyncio.timeout(timeout.get("pool")):
                    await slots.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout("no connection became free in time") from None
        try:
            return await self._send(request, timeout)
        finally:
            if slots is not None:
                slots.release()

    async def _send(self, request: httpx.Request, timeout: dict[str, Any]) -> httpx.Response:
        if self._session is None or self._aio is None:
            self._aio = _aiohttp()
            self._session = self._open(self._aio)
        session, aio = self._session, self._aio
        body = request.content or None  # httpx has read the body: the channel sends bytes
        try:
            async with session.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                data=body,
                allow_redirects=False,
                timeout=aio.ClientTimeout(
                    sock_connect=timeout.get("connect"), sock_read=timeout.get("read")
                ),
                ssl=self._ssl_context() if request.url.scheme == "https" else True,
            ) as response:
                content = await response.read()
        except aio.ClientError as error:
            raise _mapped(aio, error) from error
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=httpx.ByteStream(content),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    def _open(self, aio: ModuleType) -> aiohttp.ClientSession:
        limits = self._limits
        keepalive = limits.keepalive_expiry if limits.keepalive_expiry is not None else 5.0
        connector = aio.TCPConnector(limit=limits.max_connections or 0, keepalive_timeout=keepalive)
        session: aiohttp.ClientSession = aio.ClientSession(
            connector=connector,
            auto_decompress=False,
            cookie_jar=aio.DummyCookieJar(),  # httpx keeps the cookies
            timeout=aio.ClientTimeout(),
        )
        return session

    def _ssl_context(self) -> Any:
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._fallback is not None:
            await self._fallback.aclose()
            self._fallback = None


def _mapped(aio: ModuleType, error: BaseException) -> httpx.TransportError:
    for kind, ours in _errors(aio):
        if isinstance(error, kind):
            return ours(str(error) or type(error).__name__)
    raise AssertionError("aiohttp.ClientError is the last row")  # pragma: no cover
