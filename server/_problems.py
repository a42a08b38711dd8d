"""Problem responses (RFC 9457): :class:`HTTPProblem`, which handlers raise and the adapter
turns into a response itself, and the problems of the session rules. A ``type`` is
stable, a ``title`` fixed per type; never a stack trace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from evalport.protocol import PROBLEM_CONTENT_TYPE, FieldError, Problem, ProblemType, encode
from evalport.protocol.runtime import AgentSession, DecisionError
from starlette.responses import Response

TITLES: Final[dict[str, str]] = {
    ProblemType.MALFORMED_JSON: "Malformed JSON",
    ProblemType.UNAUTHORIZED: "Unauthorized",
    ProblemType.FORBIDDEN: "Forbidden",
    ProblemType.NOT_FOUND: "Not found",
    ProblemType.SESSION_NOT_FOUND: "Session not found",
    ProblemType.METHOD_NOT_ALLOWED: "Method not allowed",
    ProblemType.SESSION_BUSY: "Session busy",
    ProblemType.SESSION_SUSPENDED: "Session suspended",
    ProblemType.NOT_SUSPENDED: "Not suspended",
    ProblemType.TURN_LOST: "Turn lost",
    ProblemType.PAYLOAD_TOO_LARGE: "Payload too large",
    ProblemType.RUN_TOO_LARGE: "Run too large",
    ProblemType.UNSUPPORTED_MEDIA_TYPE: "Unsupported media type",
    ProblemType.INVALID_BODY: "Invalid body",
    ProblemType.IDEMPOTENCY_MISMATCH: "Idempotency key reused",
    ProblemType.FAULTS_DISABLED: "Tool faults disabled",
    ProblemType.CONTENT_PARTS_UNSUPPORTED: "Content parts unsupported",
    ProblemType.SESSION_LIMIT: "Session limit reached",
    ProblemType.DRAINING: "Draining",
    ProblemType.STORE_UNAVAILABLE: "Store unavailable",
    ProblemType.TURN_TIMEOUT: "Turn timed out",
    ProblemType.INTERNAL: "Internal error",
}


class HTTPProblem(Exception):
    """An error response to send, as a problem document."""

    def __init__(
        self,
        problem_type: str,
        detail: str | None = None,
        *,
        errors: list[FieldError] | None = None,
        retry_after: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail or TITLES.get(problem_type, problem_type))
        self.problem_type = problem_type
        self.status = ProblemType.STATUS[problem_type]
        self.detail = detail
        self.errors = errors
        self.retry_after = retry_after
        self.headers = dict(headers or {})

    def body(self, instance: str | None = None) -> bytes:
        return problem_body(
            self.problem_type,
            self.detail,
            instance=instance,
            errors=self.errors,
            retry_after=self.retry_after,
        )

    def response(self, instance: str | None = None) -> Response:
        headers = dict(self.headers)
        if self.retry_after is not None:
            headers["Retry-After"] = str(self.retry_after)
        return Response(
            self.body(instance), self.status, headers=headers, media_type=PROBLEM_CONTENT_TYPE
        )


def problem_body(
    problem_type: str,
    detail: str | None = None,
    *,
    instance: str | None = None,
    errors: list[FieldError] | None = None,
    retry_after: int | None = None,
) -> bytes:
    """The encoded problem document."""
    return encode(
        Problem(
            type=problem_type,
            title=TITLES.get(problem_type, "Error"),
            status=ProblemType.STATUS[problem_type],
            detail=detail,
            instance=instance,
            errors=errors,
            retry_after=retry_after,
        )
    )


# -- the problems of the session rules ----------------------------------------------------


def not_found(session_id: str) -> HTTPProblem:
    return HTTPProblem(
        ProblemType.SESSION_NOT_FOUND,
        f"No live session {session_id!r}; it may have expired or been deleted.",
    )


def suspended(live: AgentSession) -> HTTPProblem:
    run = live.run
    ids = [approval.call_id for approval in run.pending_approvals]
    ids += [f"{asked.id} ({asked.kind})" for asked in run.pending_interrupts]
    return HTTPProblem(
        ProblemType.SESSION_SUSPENDED,
        f"The session waits for approval decisions or answers on {', '.join(ids)}; "
        "post them to its approvals first.",
    )


def key_reused() -> HTTPProblem:
    return HTTPProblem(
        ProblemType.IDEMPOTENCY_MISMATCH,
        "The Idempotency-Key was already used on this session with a different message.",
        errors=[FieldError(path="$.message", message="differs from the first use of this key")],
    )


def suspended_elsewhere() -> HTTPProblem:
    """409 ``session-suspended`` for a session suspended on another replica (or whose
    suspended turn this replica no longer holds)."""
    return HTTPProblem(
        ProblemType.SESSION_SUSPENDED,
        "The session waits for approval decisions on another replica; "
        "post them to that replica first.",
    )


def decision_problem(error: DecisionError) -> HTTPProblem:
    errors = (
        [
            FieldError(
                path=f"$.decisions[{json.dumps(call_id)}]", message="missing: this call is pending"
            )
            for call_id in error.missing
        ]
        + [
            FieldError(
                path=f"$.decisions[{json.dumps(call_id)}]", message="unknown: no such pending call"
            )
            for call_id in error.unknown
        ]
        + [
            FieldError(
                path=f"$.decisions[{json.dumps(key)}].decision",
                message="an interrupt takes 'answer', a tool call 'approve' or 'reject'",
            )
            for key in error.mismatched
        ]
    )
    return HTTPProblem(ProblemType.INVALID_BODY, str(error), errors=errors)
