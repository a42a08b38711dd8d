"""Redis URLs: one syntax for a single server, a Sentinel-watched master and a Cluster.

The forms users write are in docs/expose.md ("Redis in production"); a bad URL is a
``ValueError`` naming the part at fault, never the password. Rules: see ARCHITECTURE.md,
"Shared below the server and the client".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, unquote

import msgspec

Kind = Literal["server", "unix", "sentinel", "cluster"]
Bad = Callable[[str], ValueError]

_KINDS: Final[dict[str, tuple[Kind, bool]]] = {
    "redis": ("server", False),
    "rediss": ("server", True),
    "unix": ("unix", False),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
}
_DEFAULT_PORT: Final[dict[Kind, int]] = {
    "server": 6379,
    "unix": 0,
    "sentinel": 26379,
    "cluster": 6379,
}
_FORMS: Final[dict[Kind, str]] = {
    "server": "redis://[USER:PASSWORD@]HOST[:PORT][/DB]",
    "unix": "unix://[USER:PASSWORD@]/PATH/TO/SOCKET[?db=DB]",
    "sentinel": "redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB]",
    "cluster": "redis+cluster://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]",
}
_TLS_OPTIONS: Final = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs")
_CERT_REQS: Final = ("required", "optional", "none")


class RedisURL(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed Redis URL (ARCHITECTURE.md, "Shared below the server and the client")."""

    kind: Kind
    tls: bool
    hosts: tuple[tuple[str, int], ...] = ()
    path: str = ""
    username: str | None = None
    password: str | None = None
    db: int = 0
    service: str = ""
    tls_options: dict[str, str] = {}
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    wait_replicas: int = 0


def redacted(url: str) -> str:
    """``url`` without its passwords (``redis://user:secret@host`` -> ``redis://user:***@host``)."""
    scheme, sep, rest = url.partition("://")
    rest, question, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        userinfo, _, hosts = authority.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        authority = f"{user}{':***' if colon else ''}@{hosts}"
    query = "&".join(
        f"{part.partition('=')[0]}=***" if "password" in part.partition("=")[0] else part
        for part in query.split("&")
    )
    return f"{scheme}{sep}{authority}{slash}{path}{question}{query}"


def is_redis_url(spec: str) -> bool:
    """Whether ``spec`` starts with one of the Redis schemes."""
    return spec.partition("://")[0].lower() in _KINDS and "://" in spec


def parse_redis_url(url: str) -> RedisURL:
    """``url`` parsed; ``ValueError`` naming the fix if it is not one of the forms."""
    shown = redacted(url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _KINDS:
        raise ValueError(
            f"Redis URL {shown!r}: unknown scheme {scheme!r}; use redis://, rediss://, "
            "unix://, redis+sentinel://, rediss+sentinel://, redis+cluster:// or "
            "rediss+cluster://"
        )
    kind, tls = _KINDS[scheme.lower()]
    form = _FORMS[kind].replace("redis", "rediss", 1) if tls else _FORMS[kind]

    def bad(problem: str) -> ValueError:
        return ValueError(f"Redis URL {shown!r}: {problem}; the form is {form}")

    rest, _, fragment = rest.partition("#")
    if fragment:
        raise bad("a '#' must be percent-encoded (%23) in a password")
    rest, _, query = rest.partition("?")
    authority, _, path = rest.partition("/")
    username = password = None
    if "@" in authority:
        userinfo, _, authority = authority.rpartition("@")
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
        if password == "":
            raise bad("the password after ':' is empty")
    options = _options(query, bad)
    fields: dict[str, object] = {}
    if kind == "unix":
        if authority:
            raise bad(f"{authority!r} before the socket path: write unix:///PATH (three slashes)")
        if not path:
            raise bad("no socket path")
        fields["path"] = "/" + path
        fields["db"] = _number(options.pop("db", "0"), "db", bad)
    else:
        fields["hosts"] = _hosts(authority, _DEFAULT_PORT[kind], bad)
        parts = [unquote(part) for part in path.split("/")] if path else []
        if kind == "sentinel":
            if not parts or not parts[0]:
                raise bad("no service name after the hosts (the name the Sentinels monitor)")
            fields["service"] = parts.pop(0)
        if len(parts) > 1 or (parts and kind == "cluster" and parts[0] not in ("", "0")):
            raise bad(
                "a cluster has only db 0: drop the path"
                if kind == "cluster"
                else f"unexpected path {'/'.join(parts)!r}"
            )
        if parts and parts[0]:
            fields["db"] = _number(parts[0], "the db", bad)
        if kind == "server" and "," in authority:
            raise bad("one host only (several hosts are for redis+sentinel:// or redis+cluster://)")
    tls_options: dict[str, str] = {
        name: options.pop(name) for name in _TLS_OPTIONS if name in options
    }
    if tls_options and not tls:
        raise bad(f"{', '.join(tls_options)} need TLS: use the scheme {scheme}s… (rediss://)")
    if tls_options.get("ssl_cert_reqs", "required") not in _CERT_REQS:
        raise bad(f"ssl_cert_reqs is one of {', '.join(_CERT_REQS)}")
    if kind == "sentinel":
        fields["sentinel_username"] = options.pop("sentinel_username", None)
        fields["sentinel_password"] = options.pop("sentinel_password", None)
    if "wait_replicas" in options:
        if kind == "cluster":
            raise bad("wait_replicas is not supported with a cluster")
        fields["wait_replicas"] = _number(options.pop("wait_replicas"), "wait_replicas", bad)
    if options:
        accepted = [*(_TLS_OPTIONS if tls else ()), "wait_replicas"]
        if kind == "sentinel":
            accepted += ["sentinel_username", "sentinel_password"]
        if kind == "unix":
            accepted = ["db", "wait_replicas"]
        if kind == "cluster":
            accepted.remove("wait_replicas")
        raise bad(
            f"unknown option {', '.join(sorted(options))}"
            + (f" (accepted: {', '.join(accepted)})" if accepted else " (it takes none)")
        )
    return RedisURL(
        kind=kind,
        tls=tls,
        username=username,
        password=password,
        tls_options=tls_options,
        **fields,  # type: ignore[arg-type]
    )


def _options(query: str, bad: Bad) -> dict[str, str]:
    options: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name in options:
            raise bad(f"the option {name} is given twice")
        options[name] = value
    return options


def _number(text: str, what: str, bad: Bad) -> int:
    if not text.isdigit():
        raise bad(f"{what} must be a whole number, not {text!r}")
    return int(text)


def _hosts(authority: str, default_port: int, bad: Bad) -> tuple[tuple[str, int], ...]:
    if not authority:
        raise bad("no host")
    hosts = []
    for item in authority.split(","):
        if item.startswith("["):  # [IPv6]:port
            host, _, port_text = item[1:].partition("]")
            port_text = port_text.removeprefix(":")
        else:
            host, _, port_text = item.partition(":")
        if not host:
            raise bad(f"an empty host in {authority!r}")
        port = int(port_text) if port_text.isdigit() else -1 if port_text else default_port
        if not 1 <= port <= 65535:
            raise bad(f"the port of {item!r} must be a number from 1 to 65535")
        hosts.append((host, port))
    return tuple(hosts)


def connect(url: RedisURL, *, timeout: float, max_connections: int) -> tuple[Any, list[Any]]:
    """A redis-py asyncio client for ``url`` (at most ``max_connections`` connections, per
    node of a cluster; ``timeout`` to connect, for each answer and for a free connection)
    and the other clients to close with it (the Sentinels)."""
    import redis.asyncio as aioredis
    from redis.asyncio.cluster import ClusterNode, RedisCluster
    from redis.asyncio.sentinel import Sentinel

    common: dict[str, Any] = {
        "username": url.username,
        "password": url.password,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "health_check_interval": 30,
    }
    if url.tls:
        common.update(ssl=True, **url.tls_options)
    if url.kind == "cluster":
        nodes = [ClusterNode(host, port) for host, port in url.hosts]
        return RedisCluster(startup_nodes=nodes, max_connections=max_connections, **common), []
    if url.kind == "sentinel":
        sentinel_kwargs: dict[str, Any] = {
            "username": url.sentinel_username,
            "password": url.sentinel_password,
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
        }
        if url.tls:
            sentinel_kwargs.update(ssl=True, **url.tls_options)
        sentinel = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
            list(url.hosts), sentinel_kwargs=sentinel_kwargs, **common
        )
        client = sentinel.master_for(url.service, db=url.db, max_connections=max_connections)
        return client, list(sentinel.sentinels)
    # A blocking pool: under a burst, callers wait for one of ``max_connections``
    # connections (up to ``timeout``) instead of failing at once.
    if url.kind == "unix":
        common.update(connection_class=aioredis.UnixDomainSocketConnection, path=url.path)
        common.pop("health_check_interval")
    else:
        host, port = url.hosts[0]
        ssl = common.pop("ssl", False)
        common.update(host=host, port=port)
        if ssl:
            common.update(connection_class=aioredis.SSLConnection)
    pool = aioredis.BlockingConnectionPool(
        db=url.db, max_connections=max_connections, timeout=timeout, **common
    )
    return aioredis.Redis.from_pool(pool), []  # closing the client closes the pool
