"""The channel's wire: one request out, its status, headers and body back.

The channel (``_channel.py``) keeps the retries, timeouts, idempotency keys, credentials
and errors; under it one seam, :meth:`Wire.send` (method, URL, headers, body in; a
:class:`Reply` out), has two implementations:

- :class:`AiohttpWire`, the default: an aiohttp connection pool, no httpx objects on the
  way, because httpx's client, request and response objects cost the client more CPU per
  call than the socket does (``benchmarks/runner.py --http-only`` measures it).
- :class:`HttpxWire`: the channel's ``httpx.AsyncClient``. A channel sends over it when
  the caller passed a ``transport``; when httpx would send to the base URL through a proxy
  (:func:`proxied`: httpx's reading of ``urllib.request.getproxies()``, the environment
  and on macOS and Windows the system settings, with ``NO_PROXY`` entries matched as httpx
  matches them: ``host`` is the host and its subdomains, ``.host`` its subdomains only,
  ``host:port`` that port only, ``*`` no proxy at all), so httpx's proxy settings apply
  unchanged; and while a mock is active (:func:`mocked`, read at every request): respx
  (any ``using=``: a started respx router) or pytest-httpx (the send method of httpx's
  pool or transport replaced), so mocks see every request and none reaches the network.

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
- Response heads as large as httpx takes: a header line or field may be up to 100 KiB
  (aiohttp's own bound is 8190 bytes; httpcore bounds the whole head at 100 KiB).
- A wire never closed warns as aiohttp does ("Unclosed client session"): close the
  target with ``aclose()`` or ``async with``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import sys
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
    """Whether respx or pytest-httpx is mocking httpx now (see the module rules)."""
    return _respx_started() or not (
        _own(httpcore.AsyncConnectionPool, "handle_async_request")
        and _own(httpx.AsyncHTTPTransport, "handle_async_request")
    )


def _respx_started() -> bool:
    """A started respx router of any kind; respx registers each on its mocker while active."""
    respx = sys.modules.get("respx")  # never imported here: a test that mocks imported it
    mocks = getattr(respx, "mocks", None)
    if mocks is None:
        return False
    return any(mocker.routers for mocker in mocks.Mocker.registry.values())


def _own(cls: type, name: str) -> bool:
    qualname = getattr(getattr(cls, name), "__qualname__", None)
    return qualname == f"{cls.__qualname__}.{name}"


def proxied(url: httpx.URL) -> bool:
    """Whether httpx would send a request for ``url`` through a proxy (the module rules)."""
    proxies = urllib.request.getproxies()  # what httpx reads, system settings included
    if not (proxies.get(url.scheme) or proxies.get("all")):
        return False
    return not any(_bypassed(entry.strip(), url) for entry in proxies.get("no", "").split(","))


def _bypassed(entry: str, url: httpx.URL) -> bool:
    """Whether one ``NO_PROXY`` entry keeps ``url`` off the proxy, as httpx reads it."""
    if entry == "*":
        return True
    if not entry:
        return False
    if "://" in entry:
        pattern = entry
    elif _ip(entry, ipaddress.IPv4Address) or entry.lower() == "localhost":
        pattern = f"all://{entry}"  # an address (a /mask is not read) or localhost: exactly
    elif _ip(entry, ipaddress.IPv6Address):
        pattern = f"all://[{entry}]"
    else:
        pattern = f"all://*{entry}"  # a name: itself and its subdomains; ".name": subdomains
    try:
        parsed = httpx.URL(pattern)
    except httpx.InvalidURL:
        return False
    if parsed.scheme != "all" and parsed.scheme != url.scheme:
        return False
    if parsed.port is not None and parsed.port != url.port:
        return False
    host = parsed.host
    if host in ("", "*"):
        return True
    if host.startswith("*."):
        return url.host.endswith(host[1:]) and len(url.host) > len(host) - 1
    if host.startswith("*"):
        return url.host == host[1:] or url.host.endswith("." + host[1:])
    return url.host == host


def _ip(entry: str, kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    try:
        kind(entry.split("/")[0])
    except ValueError:
        return False
    return True


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


_MAX_HEAD = 100 * 1024  # httpcore's bound on a response head


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
            max_line_size=_MAX_HEAD,
            max_field_size=_MAX_HEAD,
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
