"""Loopback: who counts as "this machine" for a server that has no token.

``evalport serve --insecure-no-auth`` and ``evalport view`` answer without credentials, so
they listen on a loopback address only. That alone does not keep a web page out: through
DNS rebinding a page's own host name can point at 127.0.0.1, and any page may send a
blind cross-site request. The rules both servers follow:

- :func:`is_loopback` says whether an address to listen on is loopback: ``localhost``
  or any address of 127.0.0.0/8 and ``::1``, in any numeric form the OS takes
  (``127.1``, ``127.0.0.2``).
- :func:`local_request` says whether a request may be answered: its ``Host`` names a
  loopback address, ``localhost`` or the address the server bound (with or without a
  port; any address literal when it bound them all, ``0.0.0.0`` or ``::``), never
  another name, which is what DNS rebinding needs; if a browser sent an ``Origin``, that
  origin names one of them too, and ``Sec-Fetch-Site`` does not say ``cross-site``. A
  request from a page served by another site is refused even when it reached the right
  address.
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
    bound on ``bound`` (see the module's rules)."""
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
