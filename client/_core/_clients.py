"""The HTTP clients of one origin: ``httpx.AsyncClient`` objects, each with a small pool.

A session holds one client for its life; nothing of a client's behaviour is ours but
which client it gets. Rules: see ARCHITECTURE.md, "HTTP clients of a target".
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Final

import httpx

DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=5.0, read=300.0, write=30.0, pool=30.0)
"""Every target's waits unless told otherwise: 5 s to connect, 300 s to read (an agent turn
may run many steps)."""


def timeout_of(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """The waits a target's ``timeout=`` means: seconds bound every wait (5 s at most to
    connect), an ``httpx.Timeout`` is used as it is, ``None`` is :data:`DEFAULT_TIMEOUT`."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout, connect=min(float(timeout), 5.0))


PER_CLIENT: Final = 4
"""Callers per client: above it, a new client. httpx's pool does work in proportion to its
connections times its waiting requests, so small is cheap: the runner's client CPU per
case at concurrency 20 and 400 was 4.0 and 4.3 ms with 4, 4.7 and 4.2 ms with 8, 5.6 and
6.3 ms with 16, 9.1 ms at 400 with one client of 400 connections (2026-12-07)."""


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, made once: each client would load the CA bundle anew
    (47 ms of CPU a client, 2.8 ms with this one)."""
    return httpx.create_ssl_context()


def pool_limits(per_client: int = PER_CLIENT) -> httpx.Limits:
    """Each client's pool: every holder keeps its connection alive between calls."""
    return httpx.Limits(max_connections=4 * per_client, max_keepalive_connections=per_client)


class ClientSet:
    """The ``httpx.AsyncClient`` objects of one origin (see ARCHITECTURE.md, "HTTP clients
    of a target")."""

    def __init__(
        self, make: Callable[[], httpx.AsyncClient], *, per_client: int | None = PER_CLIENT
    ) -> None:
        self._make = make
        self._per_client = per_client
        self._held: dict[httpx.AsyncClient, int] = {}
        self.closed = False

    @property
    def clients(self) -> list[httpx.AsyncClient]:
        """The clients made so far."""
        return list(self._held)

    def hold(self) -> httpx.AsyncClient:
        """A client for one caller, until :meth:`release`."""
        if self.closed:
            raise RuntimeError("this set of HTTP clients was closed")
        held = self._held
        client = min(held, key=held.__getitem__, default=None)
        limit = self._per_client
        if client is None or (limit is not None and held[client] >= limit):
            client = self._make()
            held[client] = 0
        held[client] += 1
        return client

    def release(self, client: httpx.AsyncClient) -> None:
        """The caller is done with ``client`` (releasing twice is harmless)."""
        if self._held.get(client, 0) > 0:
            self._held[client] -= 1

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[httpx.AsyncClient]:
        """A client held for one block (a single call, or a judge's exchange)."""
        client = self.hold()
        try:
            yield client
        finally:
            self.release(client)

    async def aclose(self) -> None:
        """Close every client; the set makes no more."""
        self.closed = True
        clients, self._held = list(self._held), {}
        for client in clients:
            await client.aclose()
