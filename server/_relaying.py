"""Approvals relayed between replicas: the request body to the holder of the suspended
turn, its :class:`~._records.Outcome` back (ARCHITECTURE.md, "Replicas").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from evalport.protocol import (
    ApprovalDecision,
    ApprovalsRequest,
    ProblemType,
    decode_request,
    encode,
)

from ._problems import HTTPProblem, problem_body
from ._records import Outcome, decode_problem, decode_relayed, encode_relayed
from .stores import ApprovalRelay

logger = logging.getLogger("evalport.server")


async def forward_decisions(
    relay: ApprovalRelay,
    session_id: str,
    decisions: Mapping[str, ApprovalDecision],
    *,
    timeout: float,
) -> Outcome:
    """Send ``decisions`` to the replica holding the session's suspended turn."""
    request = encode(ApprovalsRequest(decisions=dict(decisions)))
    try:
        answer = await relay.forward(session_id, request, timeout=timeout)
    except TimeoutError:
        raise HTTPProblem(
            ProblemType.TURN_TIMEOUT,
            "The replica holding the suspended turn did not answer in time.",
        ) from None
    if answer is None:
        raise HTTPProblem(
            ProblemType.SESSION_BUSY,
            "The replica that suspended this session's turn is gone, and the turn with "
            "it; the session expires with its TTL (delete it to start over).",
        )
    outcome = decode_relayed.decode(answer)
    if outcome.is_problem:  # raised again here, so that headers (Retry-After) follow
        problem = decode_problem.decode(outcome.body)
        raise HTTPProblem(
            problem.type, problem.detail, errors=problem.errors, retry_after=problem.retry_after
        )
    return outcome


async def answer_relayed(
    decide: Callable[[Mapping[str, ApprovalDecision]], Awaitable[Outcome]],
    session_id: str,
    request: bytes,
) -> bytes:
    """The holder's side: decide on the relayed request and encode the outcome."""
    try:
        outcome = await decide(decode_request(request, ApprovalsRequest).decisions)
    except HTTPProblem as problem:
        outcome = Outcome(status=problem.status, body=problem.body())
    except Exception:
        logger.exception("relayed approvals failed on session %s", session_id)
        outcome = Outcome(
            status=500, body=problem_body(ProblemType.INTERNAL, "Relayed approvals failed.")
        )
    return encode_relayed.encode(outcome)
