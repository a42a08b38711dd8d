"""Where the run cache keeps its recordings: the store interface and two stores (a folder,
Redis). A store raises on any failure and never retries. Rules: see ARCHITECTURE.md,
"The run cache".
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode

from evalport.protocol import MissingExtraError, require
from evalport.protocol._redis_url import connect, is_redis_url, parse_redis_url, redacted
from evalport.protocol.runtime import load_object

KEY: Final = re.compile(r"[a-z0-9-]+(/[a-z0-9-]+)*")
PREFIX: Final = "evalport:run-cache:"


@runtime_checkable
class CacheStore(Protocol):
    """What the run cache needs from a store: bytes by key (see ARCHITECTURE.md, "The run
    cache")."""

    async def get(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or ``None`` when there are none."""
        ...

    async def put(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key``, replacing what was there."""
        ...

    async def aclose(self) -> None:
        """Release connections and files; the store is not used afterwards."""
        ...


class FolderCacheStore:
    """Recordings as JSON files under a folder (the default store)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def __repr__(self) -> str:
        return f"folder {self.folder}"

    def path(self, key: str) -> Path:
        """The file of ``key``."""
        if len(key) > 200 or not KEY.fullmatch(key):
            raise ValueError(f"run cache: {key!r} is not a store key")
        return self.folder / f"{key}.json"

    async def get(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    async def put(self, key: str, value: bytes) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(value)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    async def aclose(self) -> None:
        """Nothing to release."""


class RedisCacheStore:
    """Recordings in Redis, shared by every machine that reaches it (the ``redis`` extra)."""

    def __init__(self, url: str, *, timeout: float = 5.0, max_connections: int = 16) -> None:
        redis_url, namespace = _split_namespace(url)
        parsed = parse_redis_url(redis_url)  # a bad URL says so before the extra is needed
        require("redis", "redis", "the Redis run cache store")
        self._shown = redacted(url)
        self.prefix = f"{PREFIX}{namespace}:" if namespace else PREFIX
        self._timeout_ms = int(timeout * 1000)
        self._wait_replicas = parsed.wait_replicas
        self._client, self._others = connect(
            parsed, timeout=timeout, max_connections=max_connections
        )

    def __repr__(self) -> str:
        return self._shown

    async def get(self, key: str) -> bytes | None:
        value: bytes | None = await self._client.get(self.prefix + key)
        return value

    async def put(self, key: str, value: bytes) -> None:
        await self._client.set(self.prefix + key, value)
        if self._wait_replicas:
            have = await self._client.execute_command("WAIT", self._wait_replicas, self._timeout_ms)
            if int(have) < self._wait_replicas:
                raise ConnectionError(
                    f"only {have} of {self._wait_replicas} replicas acknowledged the write"
                )

    async def aclose(self) -> None:
        for client in (self._client, *self._others):
            await client.aclose()


def _split_namespace(url: str) -> tuple[str, str]:
    """``url`` without its ``namespace`` option, and that option ("" for none)."""
    base, _, query = url.partition("?")
    options = parse_qsl(query, keep_blank_values=True)
    names = [value for name, value in options if name == "namespace"]
    if len(names) > 1 or (names and not re.fullmatch(r"[A-Za-z0-9_.-]+", names[0])):
        raise ValueError(
            f"Redis URL {redacted(url)!r}: namespace is given once, as letters, digits, "
            "'_', '.' or '-' (?namespace=my-project)"
        )
    rest = [(name, value) for name, value in options if name != "namespace"]
    return (f"{base}?{urlencode(rest)}" if rest else base), (names[0] if names else "")


def open_cache_store(spec: str) -> CacheStore:
    """The store ``spec`` names: a Redis URL, ``module:Name`` or ``path/to/file.py:Name``."""
    if is_redis_url(spec):
        try:
            return RedisCacheStore(spec)
        except MissingExtraError as error:
            raise ValueError(str(error)) from None
    if ":" not in spec:
        raise ValueError(
            f"{redacted(spec)!r} is neither a Redis URL (redis://HOST:6379/0, rediss://, "
            "unix://, redis+sentinel://, redis+cluster://) nor module:Name or "
            "path/to/file.py:Name"
        )
    factory: Any = load_object(spec)  # ValueError naming what could not be imported
    store = factory()
    if not isinstance(store, CacheStore):
        raise ValueError(
            f"{spec!r} made a {type(store).__name__}, not a cache store: it needs "
            "async get(key), put(key, value) and aclose()"
        )
    return store
