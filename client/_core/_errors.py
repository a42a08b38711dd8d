"""How a target's failures become typed errors, with texts kept free of secrets.

Every error text passes through :class:`Secrets`; a body excerpt quotes no content unless
the trace policy is verbatim. Rules: see ARCHITECTURE.md, "Target errors".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

import httpx
import msgspec
from evalport.protocol import (
    AuthFailed,
    FaultsUnsupported,
    NotSuspended,
    Problem,
    ProblemType,
    ProtocolError,
    RequestRejected,
    SessionBusy,
    SessionConflict,
    SessionNotFound,
    SessionSuspended,
    TargetError,
    TargetUnavailable,
    TurnLost,
    TurnTimedOut,
    digest,
    is_digest,
)

_SCRUBBED: Final = "[redacted]"
EXCERPT_BYTES: Final = 512  # as much of a body as an error quotes (the wire's excerpt too)


class Secrets:
    """The secrets of one target, and :meth:`scrub` to take them out of a text."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[str | None]) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        found = {value for value in values if value and len(value) >= 4}
        self._values = sorted(found, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, _SCRUBBED)
        return text


# A JSON string literal, and whether a ':' follows it (then it is a key and stays).
_STRING: Final = re.compile(r'"((?:[^"\\]|\\.)*)"(\s*:)?')
_NUMBER: Final = re.compile(r"(?<![\w.<])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _shape_text(text: str) -> str:
    """Shape-only form of JSON-like text that may be cut or malformed."""

    def string(match: re.Match[str]) -> str:
        if match.group(2):
            return match.group(0)
        return f'"<string:{len(match.group(1).encode())}>"'

    return _NUMBER.sub("<number>", _STRING.sub(string, text))


def body_excerpt(
    data: bytes, secrets: Secrets, *, verbatim: bool = False, limit: int = EXCERPT_BYTES
) -> str:
    """The start of a response body, fit for an error message.

    Under a ``verbatim`` policy the body's start is quoted as it is. Otherwise nothing of
    its content is: a JSON body shows its shape only (keys stay, every value becomes
    ``"<string:N>"``, ``"<int>"``..., the preview form of a digest), and text that is not
    JSON (a proxy's HTML page, a stack trace) is named by its size and the start of its
    SHA-256, with the option that would quote it. Secrets are scrubbed either way.
    """
    text: str
    if verbatim:
        text = data[:limit].decode(errors="replace")
    else:
        try:
            value = msgspec.json.decode(data)
        except msgspec.DecodeError:
            head = data[:limit].decode(errors="replace")
            text = _shape_text(head) if head.lstrip()[:1] in ("{", "[", '"') else _unquoted(data)
        else:
            text = digest(value, limit)["preview"]  # a digest's preview is the shape
            if is_digest(value):  # digest() hands a digest back: shape its preview too
                text = _shape_text(value["preview"])[:limit]
    return secrets.scrub(text)


def _unquoted(data: bytes) -> str:
    """What a safe excerpt says of a body that is not JSON."""
    fingerprint = hashlib.sha256(data).hexdigest()[:16]
    return (
        f"<not JSON: {len(data)} bytes, sha256:{fingerprint}; quoted only under a "
        "verbatim trace policy (--trace-policy verbatim)>"
    )


def _said(problem: Problem | None, excerpt: str) -> str:
    if problem is None:
        return f"body: {excerpt}" if excerpt else "no body"
    parts = [part for part in (problem.title, problem.detail) if part]
    for field_error in problem.errors or ():
        parts.append(f"at {field_error.path}: {field_error.message}")
    if not parts and excerpt:
        parts.append(f"body: {excerpt}")
    return "; ".join(parts) or "no detail"


NOT_HERE: Final = (
    "the server answered, but the evalport protocol is not at this path: a mounted "
    "adapter's address includes its prefix (for example http://HOST:PORT/agent)"
)
"""Why a 404 from a route of the protocol (``/health``) names the mount prefix."""


def _where(location: str | None) -> str:
    if not location:
        return "an address it did not give"
    try:
        url = httpx.URL(location)
    except httpx.InvalidURL:
        return "an invalid address"
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def error_for(
    *,
    method: str,
    url: str,
    status: int,
    problem: Problem | None,
    excerpt: str,
    scrub: Callable[[str], str],
    location: str | None = None,
    retry_after: str | None = None,
    session_id: str | None = None,
    attempts: int = 1,
    credentials: bool = True,
) -> TargetError:
    """The typed error for a non-2xx answer; every text is passed through ``scrub``.

    ``attempts`` is how many requests were sent; ``credentials`` whether they carried any."""
    kind = problem.type if problem is not None and problem.type != "about:blank" else None
    said = _said(problem, excerpt)
    head = f"{method} {url} answered {status}"
    fields: dict[str, Any] = {
        "status": status,
        "problem_type": kind,
        "detail": scrub(problem.detail) if problem is not None and problem.detail else None,
    }
    if 300 <= status < 400:
        return ProtocolError(
            scrub(
                f"{head}, a redirect to {_where(location)}; evalport never follows "
                "redirects, so credentials cannot travel to another address: set base_url "
                "to the final address"
            ),
            status=status,
        )
    if status in (401, 403):
        refused = (
            "the target refused the credentials"
            if credentials
            else "the target asks for credentials and none were sent"
        )
        return AuthFailed(scrub(f"{head}: {refused} ({said}); check the token"), **fields)
    if status == 404:
        if session_id is not None and kind in (None, ProblemType.SESSION_NOT_FOUND):
            return SessionNotFound(
                scrub(f"session {session_id!r} not found (unknown, expired or deleted): {said}"),
                **fields,
            )
        return RequestRejected(
            scrub(f"{head} ({said}): {NOT_HERE}"),
            **fields,
        )
    if status == 409:
        conflict: type[SessionConflict] = {
            ProblemType.SESSION_SUSPENDED: SessionSuspended,
            ProblemType.NOT_SUSPENDED: NotSuspended,
            ProblemType.TURN_LOST: TurnLost,
        }.get(kind or "", SessionBusy)
        return conflict(scrub(f"{head}: {said}"), **fields)
    if status == 504 or kind == ProblemType.TURN_TIMEOUT:
        return TurnTimedOut(scrub(f"{head}: the turn did not finish in time ({said})"), **fields)
    if status in (429, 503) or status >= 500:
        wait = f"; Retry-After: {retry_after}" if retry_after else ""
        return TargetUnavailable(
            scrub(f"{head} after {attempts} attempt(s): {said}{wait}"), **fields
        )
    if kind == ProblemType.FAULTS_DISABLED:  # a replica without --allow-faults
        return FaultsUnsupported(scrub(f"{head}: {said}"), **fields)
    return RequestRejected(scrub(f"{head}: {said}"), **fields)
