"""Problem types (RFC 9457) and the errors that carry them.

Every error the server returns is ``application/problem+json`` whose ``type`` is one of the
stable URIs below; clients branch on ``type`` (or the status), never on ``title`` or
``detail``. A server never puts a stack trace on the wire.
"""

from __future__ import annotations

from typing import Final

PROBLEM_CONTENT_TYPE: Final = "application/problem+json"

_BASE: Final = "urn:evalport:problem:"


class ProblemType:
    """The stable problem ``type`` URIs, with the status each is returned with."""

    MALFORMED_JSON = _BASE + "malformed-json"  # 400
    UNAUTHORIZED = _BASE + "unauthorized"  # 401
    NOT_FOUND = _BASE + "not-found"  # 404: unknown route
    SESSION_NOT_FOUND = _BASE + "session-not-found"  # 404: unknown or expired session
    METHOD_NOT_ALLOWED = _BASE + "method-not-allowed"  # 405
    SESSION_BUSY = _BASE + "session-busy"  # 409: a turn is already in flight
    SESSION_SUSPENDED = _BASE + "session-suspended"  # 409: waiting for approval decisions
    NOT_SUSPENDED = _BASE + "not-suspended"  # 409: decisions posted with none pending
    TURN_LOST = _BASE + "turn-lost"  # 409: a key's first attempt died without an outcome
    PAYLOAD_TOO_LARGE = _BASE + "payload-too-large"  # 413
    UNSUPPORTED_MEDIA_TYPE = _BASE + "unsupported-media-type"  # 415
    INVALID_BODY = _BASE + "invalid-body"  # 422
    IDEMPOTENCY_MISMATCH = _BASE + "idempotency-key-reused"  # 422
    FAULTS_DISABLED = _BASE + "faults-disabled"  # 422: tool faults sent to a server without them
    RATE_LIMITED = _BASE + "rate-limited"  # 429 (+ Retry-After): too many requests
    SESSION_LIMIT = _BASE + "session-limit"  # 503 (+ Retry-After)
    DRAINING = _BASE + "draining"  # 503 (+ Retry-After)
    STORE_UNAVAILABLE = _BASE + "store-unavailable"  # 503 (+ Retry-After)
    TURN_TIMEOUT = _BASE + "turn-timeout"  # 504
    INTERNAL = _BASE + "internal"  # 500

    STATUS: Final[dict[str, int]] = {
        MALFORMED_JSON: 400,
        UNAUTHORIZED: 401,
        NOT_FOUND: 404,
        SESSION_NOT_FOUND: 404,
        METHOD_NOT_ALLOWED: 405,
        SESSION_BUSY: 409,
        SESSION_SUSPENDED: 409,
        NOT_SUSPENDED: 409,
        TURN_LOST: 409,
        PAYLOAD_TOO_LARGE: 413,
        UNSUPPORTED_MEDIA_TYPE: 415,
        INVALID_BODY: 422,
        IDEMPOTENCY_MISMATCH: 422,
        FAULTS_DISABLED: 422,
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


class ProtocolError(ValueError):
    """A response the client cannot use. Names the field and quotes a body excerpt."""

    def __init__(self, message: str, *, path: str | None = None, excerpt: str = "") -> None:
        text = message if not excerpt else f"{message}; body starts: {excerpt}"
        super().__init__(text)
        self.path = path
        self.excerpt = excerpt
