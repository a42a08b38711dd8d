"""Bearer-token authentication of the adapter's routes.

Rules:

- A request is authorized when its ``Authorization`` header is ``Bearer <token>`` (scheme
  case-insensitive) and the token equals the configured one. Both are hashed (SHA-256)
  and the digests compared with ``hmac.compare_digest``: constant time, and the length of
  the configured token does not show either.
- Otherwise the answer is 401 ``unauthorized`` with ``WWW-Authenticate: Bearer
  realm="evalport"`` (and ``error="invalid_token"`` when a token was sent but is wrong).
- ``token=None`` turns the check off: a host that mounts the routes behind its own auth
  middleware says so explicitly. The standalone server refuses to start that way unless
  it is bound to loopback and told ``--insecure-no-auth``.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from evalport.protocol import ProblemType

from ._problems import HTTPProblem

_REALM: Final = 'Bearer realm="evalport"'


class BearerAuth:
    """Checks the bearer token of a request's headers."""

    __slots__ = ("_digest",)

    def __init__(self, token: str) -> None:
        if not token or token != token.strip():
            raise ValueError(
                "the bearer token must be a non-empty string without surrounding spaces"
            )
        if not (token.isascii() and token.isprintable()):
            # HTTP header values are bytes that servers decode as latin-1: a non-ASCII
            # token could never match what a client sends, so refuse it at start-up.
            raise ValueError("the bearer token must be printable ASCII (e.g. token_urlsafe)")
        self._digest = hashlib.sha256(token.encode()).digest()

    def check(self, authorization: str | None) -> None:
        """Raise a 401 :class:`HTTPProblem` unless ``authorization`` carries the token."""
        if authorization is None:
            raise HTTPProblem(
                ProblemType.UNAUTHORIZED,
                "A bearer token is required (Authorization: Bearer <token>).",
                headers={"WWW-Authenticate": _REALM},
            )
        scheme, _, credentials = authorization.partition(" ")
        supplied = hashlib.sha256(credentials.strip().encode()).digest()
        if scheme.lower() != "bearer" or not hmac.compare_digest(supplied, self._digest):
            raise HTTPProblem(
                ProblemType.UNAUTHORIZED,
                "The bearer token is not valid.",
                headers={"WWW-Authenticate": _REALM + ', error="invalid_token"'},
            )
