"""The channel's wire: one request out, its status, headers and body back.

The channel (``_channel.py``) keeps the retries, timeouts, idempotency keys, credentials
and errors; under it one seam, :meth:`Wire.send` (method, URL, headers, body in; a
:class:`Reply` out), has two implementations:

- :class:`AiohttpWire`, the default: an aiohttp connection pool, no httpx objects on the
  way, because httpx's client, request and response objects cost the client more CPU per
  call than the socket does (``benchmarks/runner.py --http-only`` measures it).
- :class:`HttpxWire`: the channel's ``httpx.AsyncClient``. A channel sends over it when
  the caller passed a ``transport``, when the environment names a proxy for the base URL
  (httpx's proxy settings apply unchanged), and while respx or pytest-httpx has replaced
  the send method of httpx's pool or transport (:func:`mocked`, read at every request),
  so mocks see every request and none reaches the network.

Rules both wires keep:

- Timeouts keep httpx's meaning: ``connect`` bounds opening a connection
  (:class:`httpx.ConnectTimeout`), ``read`` the wait for each piece of the response,
  headers and body (:class:`httpx.ReadTimeout`), ``pool`` the wait for one of
  ``max_connections`` (:class:`httpx.PoolTimeout`; on aiohttp the wait happens here, so
  aiohttp never queues). aiohttp has no write timeout: a write that stalls ends as a
  read timeout.
- Failures are httpx's exception types, as httpx's own transport raises them, because
  the retry rules read them (``_channel._retriable``): nothing sent is
  :class:`httpx.ConnectError` or :class:`httpx.ConnectTimeout`, a server that hung up is
  :class:`httpx.RemoteProtocolError`, a reset connection :class:`httpx.ReadError`.
- The body is read whole before :meth:`send` returns; redirects are never followed; the
  base headers (``Accept``, credentials) go with every request (a wire only ever sends
  to the base URL's origin); cookies a server sets are sent back to it, as httpx does.
- aiohttp resends a ``GET`` or ``DELETE`` once when a kept-alive connection turns out
  closed by the server (httpx's pool discards such a connection before using it); the
  retry rules are applied above this, unchanged.
- Certificates are checked with httpx's SSL context (certifi, ``SSL_CERT_FILE``).
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import httpcore
import httpx

if TYPE_CHECKING:
    import aiohttp


class Reply:
    """What a wire answered: the status, the headers (case-insensitive) and the body."""

    __slots__ = ("content", "headers", "method", "status_code", "url")

    def __init__(
        self, status_code: int, headers: Mapping[str, str], content: bytes, method: str, url: str
    ) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content
        self.method = method
        self.url = url

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300


class Wire(Protocol):
    async def send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> Reply: ...

    async def aclose(self) -> None: ...


def mocked() -> bool:
    """Whether a mocking library has replaced the send method of httpx's own transport."""
    return not (
        _own(httpcore.AsyncConnectionPool, "handle_async_request")
        and _own(httpx.AsyncHTTPTransport, "handle_async_request")
    )


def _own(cls: type, name: str) -> bool:
    qualname = getattr(getattr(cls, name), "__qualname__", None)
    return qualname == f"{cls.__qualname__}.{name}"


def proxied(url: httpx.URL) -> bool:
    """Whether the environment names a proxy for ``url`` (``HTTP_PROXY``, ``NO_PROXY``...)."""
    proxies = urllib.request.getproxies_environment()  # the environment only, as httpx reads it
    if not (proxies.get(url.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(url.host)  # with proxies in the environment: NO_PROXY


class HttpxWire:
    """Sends through an ``httpx.AsyncClient`` (its transport, auth, proxies, mocks)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> Reply:
        response = await self.client.request(method, url, content=body, headers=headers)
        return Reply(response.status_code, response.headers, response.content, method, url)

    async def aclose(self) -> None:
        await self.client.aclose()


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


class AiohttpWire:
    """Sends over one aiohttp session (created at the first request)."""

    def __init__(
        self, limits: httpx.Limits, timeout: httpx.Timeout, headers: Mapping[str, str]
    ) -> None:
        self._limits = limits
        self._timeout = timeout
        self._headers = dict(headers)
        self._session: aiohttp.ClientSession | None = None
        self._aio: ModuleType | None = None
        self._client_timeout: Any = None
        self._ssl: Any = None
        self._slots = (
            asyncio.Semaphore(limits.max_connections)
            if limits.max_connections is not None
            else None
        )

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> Reply:
        slots = self._slots
        if slots is not None:
            try:
                async with asyncio.timeout(self._timeout.pool):
                    await slots.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout("no connection became free in time") from None
        try:
            return await self._send(method, url, headers, body)
        finally:
            if slots is not None:
                slots.release()

    async def _send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> Reply:
        if self._session is None or self._aio is None:
            self._aio = _aiohttp()
            self._session = self._open(self._aio)
        session, aio = self._session, self._aio
        try:
            async with session.request(
                method,
                url,
                headers=headers,
                data=body,
                allow_redirects=False,
                timeout=self._client_timeout,
                ssl=self._ssl_context() if url.startswith("https:") else True,
            ) as response:
                content = await response.read()
        except aio.ClientError as error:
            raise _mapped(aio, error) from error
        return Reply(response.status, response.headers, content, method, url)

    def _open(self, aio: ModuleType) -> aiohttp.ClientSession:
        limits, timeout = self._limits, self._timeout
        keepalive = limits.keepalive_expiry if limits.keepalive_expiry is not None else 5.0
        connector = aio.TCPConnector(limit=limits.max_connections or 0, keepalive_timeout=keepalive)
        self._client_timeout = aio.ClientTimeout(
            sock_connect=timeout.connect, sock_read=timeout.read
        )
        session: aiohttp.ClientSession = aio.ClientSession(
            connector=connector,
            headers=self._headers,
            cookie_jar=aio.CookieJar(unsafe=True),  # httpx's client keeps cookies of IP hosts too
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


def _mapped(aio: ModuleType, error: BaseException) -> httpx.TransportError:
    for kind, ours in _errors(aio):
        if isinstance(error, kind):
            return ours(str(error) or type(error).__name__)
    raise AssertionError("aiohttp.ClientError is the last row")  # pragma: no cover
