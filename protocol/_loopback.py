"""Loopback: who counts as this machine for a server that has no token.

Listening on loopback does not stop DNS rebinding or cross-site requests, so each request
is checked too. Rules: see ARCHITECTURE.md, "Shared below the server and the client".
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """Whether the address ``host`` (as given to ``--host``) is this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        found = socket.getaddrinfo(host.strip("[]"), None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return False
    return all(ipaddress.ip_address(str(address[4][0])).is_loopback for address in found)


def _names_this_server(authority: str, bound: str) -> bool:
    """Whether a ``Host`` value or an origin's host part names the server bound on ``bound``."""
    try:
        name = urlsplit(f"//{authority}").hostname
    except ValueError:
        return False
    if name is None:
        return False
    if name in ("localhost", bound.strip("[]").lower()):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or bound in ("0.0.0.0", "::", "[::]")


def local_request(headers: Mapping[bytes, bytes], bound: str = "127.0.0.1") -> bool:
    """Whether a request with these (lower-case) headers may be answered by a server
    bound on ``bound`` (ARCHITECTURE.md, "Shared below the server and the client")."""
    host = headers.get(b"host", b"").decode("latin-1")
    if not _names_this_server(host, bound):
        return False
    if headers.get(b"sec-fetch-site", b"") == b"cross-site":
        return False
    origin = headers.get(b"origin")
    if origin is None:
        return True
    parts = urlsplit(origin.decode("latin-1"))
    return parts.scheme in ("http", "https") and _names_this_server(parts.netloc, bound)
