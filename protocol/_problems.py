"""Problem types (RFC 9457) and the one tree of errors every target raises.

Clients branch on a problem's ``type``, never its ``title`` or ``detail``. Each error is
defined here once and re-exported where its users are (see ARCHITECTURE.md,
"Problems and errors")::

    TargetError                  an agent target could not take a call
    ├── TargetUnavailable        cannot reach it, 5xx, 429/503 after the retries
    ├── AuthFailed               401 / 403
    ├── SessionNotFound          404: unknown, expired or deleted session
    ├── SessionConflict          409: the session cannot take this call now (also a
    │   │                        RuntimeError, as the runtime's state errors always were)
    │   ├── SessionBusy          a turn is already running
    │   ├── SessionSuspended     the session waits for approval decisions
    │   ├── NotSuspended         decisions sent with nothing pending
    │   └── TurnLost             the turn's holder died without an outcome
    ├── TurnTimedOut             504: the turn did not finish in time
    ├── RequestRejected          any other 4xx
    │   ├── FaultsUnsupported    tool faults sent to a server without them
    │   └── ContentPartsUnsupported  content parts sent to a server without them
    └── ProtocolError            a response the client cannot use (also a ValueError)

:class:`RequestError` is the server's side: a request body it cannot accept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._models import AgentRun

PROBLEM_CONTENT_TYPE: Final = "application/problem+json"

_BASE: Final = "urn:evalport:problem:"


class ProblemType:
    """The stable problem ``type`` URIs, with the status each is returned with."""

    MALFORMED_JSON = _BASE + "malformed-json"  # 400
    UNAUTHORIZED = _BASE + "unauthorized"  # 401
    FORBIDDEN = _BASE + "forbidden"  # 403: a server without a token refused a non-local caller
    NOT_FOUND = _BASE + "not-found"  # 404: unknown route
    SESSION_NOT_FOUND = _BASE + "session-not-found"  # 404: unknown or expired session
    METHOD_NOT_ALLOWED = _BASE + "method-not-allowed"  # 405
    SESSION_BUSY = _BASE + "session-busy"  # 409: a turn is already in flight
    SESSION_SUSPENDED = _BASE + "session-suspended"  # 409: waiting for approval decisions
    NOT_SUSPENDED = _BASE + "not-suspended"  # 409: decisions posted with none pending
    TURN_LOST = _BASE + "turn-lost"  # 409: a key's first attempt died without an outcome
    PAYLOAD_TOO_LARGE = _BASE + "payload-too-large"  # 413
    RUN_TOO_LARGE = _BASE + "run-too-large"  # 413: the session's run is at its size limit
    UNSUPPORTED_MEDIA_TYPE = _BASE + "unsupported-media-type"  # 415
    INVALID_BODY = _BASE + "invalid-body"  # 422
    IDEMPOTENCY_MISMATCH = _BASE + "idempotency-key-reused"  # 422
    FAULTS_DISABLED = _BASE + "faults-disabled"  # 422: tool faults sent to a server without them
    CONTENT_PARTS_UNSUPPORTED = _BASE + "content-parts-unsupported"  # 422: parts, not taken
    RATE_LIMITED = _BASE + "rate-limited"  # 429 (+ Retry-After): too many requests
    SESSION_LIMIT = _BASE + "session-limit"  # 503 (+ Retry-After)
    DRAINING = _BASE + "draining"  # 503 (+ Retry-After)
    STORE_UNAVAILABLE = _BASE + "store-unavailable"  # 503 (+ Retry-After)
    TURN_TIMEOUT = _BASE + "turn-timeout"  # 504
    INTERNAL = _BASE + "internal"  # 500

    STATUS: Final[dict[str, int]] = {
        MALFORMED_JSON: 400,
        UNAUTHORIZED: 401,
        FORBIDDEN: 403,
        NOT_FOUND: 404,
        SESSION_NOT_FOUND: 404,
        METHOD_NOT_ALLOWED: 405,
        SESSION_BUSY: 409,
        SESSION_SUSPENDED: 409,
        NOT_SUSPENDED: 409,
        TURN_LOST: 409,
        PAYLOAD_TOO_LARGE: 413,
        RUN_TOO_LARGE: 413,
        UNSUPPORTED_MEDIA_TYPE: 415,
        INVALID_BODY: 422,
        IDEMPOTENCY_MISMATCH: 422,
        FAULTS_DISABLED: 422,
        CONTENT_PARTS_UNSUPPORTED: 422,
        RATE_LIMITED: 429,
        SESSION_LIMIT: 503,
        DRAINING: 503,
        STORE_UNAVAILABLE: 503,
        TURN_TIMEOUT: 504,
        INTERNAL: 500,
    }


class RequestError(ValueError):
    """A request body the server cannot accept: malformed JSON (400) or invalid (422).

    ``path`` is the JSON path of the offending field (``$.message``) when there is one.
    """

    def __init__(self, problem_type: str, detail: str, path: str | None = None) -> None:
        super().__init__(detail)
        self.problem_type = problem_type
        self.status = ProblemType.STATUS[problem_type]
        self.detail = detail
        self.path = path


class TargetError(Exception):
    """Base of every error a target raises.

    ``status`` is the HTTP status (``None`` when no response came, or in process),
    ``problem_type`` the RFC 9457 ``type`` (sent by the server, or the one it would send),
    ``detail`` its ``detail``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        problem_type: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.problem_type = problem_type
        self.detail = detail


class TargetUnavailable(TargetError):
    """The target cannot be reached or cannot serve now (after any retries)."""


class AuthFailed(TargetError):
    """The target refused the credentials (401 or 403)."""


class SessionNotFound(TargetError):
    """The session does not exist (any more): unknown, expired or deleted."""


class SessionConflict(TargetError, RuntimeError):
    """The session cannot take this call in its current state (409)."""


class SessionBusy(SessionConflict):
    """A turn is already running on the session."""


class SessionSuspended(SessionConflict):
    """The session waits for approval decisions (``Session.decide``) before a new turn."""


class NotSuspended(SessionConflict):
    """Decisions were sent but nothing is pending."""


class TurnLost(SessionConflict):
    """The turn under this key ended without a stored outcome (its replica died, or stalled
    and lost its lease to another turn); its effects are unknown. Send it under a new key
    to run it again."""


class TurnTimedOut(TargetError, TimeoutError):
    """The agent did not finish the turn in time: the server's turn timeout (504), or the
    runtime's (``AgentSession``, ``LocalTarget(turn_timeout=...)``). Raised by the runtime
    itself, it carries ``timeout`` (the limit in seconds) and ``run`` (the run with the
    timed-out turn recorded); otherwise both are ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        timeout: float | None = None,
        run: AgentRun | None = None,
        status: int | None = None,
        problem_type: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message, status=status, problem_type=problem_type, detail=detail)
        self.timeout = timeout
        self.run = run


class RequestRejected(TargetError):
    """The target refused the request as sent (400, 413, 415, 422, ...)."""


class FaultsUnsupported(RequestRejected):
    """Tool faults were asked of a target whose server does not accept them."""


class ContentPartsUnsupported(RequestRejected):
    """A turn with content parts was asked of a target whose server does not take them
    (its ``/health`` lacks the ``content-parts`` capability)."""


class ProtocolError(TargetError, ValueError):
    """A response the client cannot use. Names the field (``path``) and quotes the start of
    the body (``excerpt``; the client redacts it before it reaches an error)."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        excerpt: str = "",
        status: int | None = None,
    ) -> None:
        text = message if not excerpt else f"{message}; body starts: {excerpt}"
        super().__init__(text, status=status)
        self.path = path
        self.excerpt = excerpt
