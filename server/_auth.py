"""Bearer-token auth of the adapter's routes: both tokens hashed (SHA-256) and compared in
constant time, so neither the token nor its length shows; else 401 with
``WWW-Authenticate``. ``token=None`` is explicit: the host authenticates.
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
