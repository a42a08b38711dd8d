"""Request and response bodies of the protocol routes (see ``openapi.yaml``).

Rules:

- Request bodies are decoded strictly by the server: unknown fields are refused, types are
  exact. Every request Struct is ``forbid_unknown_fields``.
- Response bodies are decoded leniently by the client (see :mod:`evalport.protocol.codec`).
- camelCase on the wire, like the run model.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .models import AgentRun

__all__ = [
    "AgentInfo",
    "ApprovalDecision",
    "ApprovalsRequest",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "FieldError",
    "Health",
    "Problem",
    "RunEnvelope",
    "TurnRequest",
]


class _Request(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Base of request bodies: strict."""


class _Response(msgspec.Struct, kw_only=True, rename="camel", gc=False):
    """Base of response bodies: unknown fields are ignored."""


class CreateSessionRequest(_Request):
    """``POST /evals/sessions``. Every field is optional; Instructor sends nulls."""

    case_id: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


class TurnRequest(_Request):
    """``POST /evals/sessions/{id}/turns``."""

    message: str


class ApprovalDecision(_Request):
    """A decision on one pending tool call. A rejection's reason reaches the agent."""

    decision: Literal["approve", "reject"]
    reason: str | None = None


class ApprovalsRequest(_Request):
    """``POST /evals/sessions/{id}/approvals``: a decision for every pending call id."""

    decisions: dict[str, ApprovalDecision]


class AgentInfo(_Response):
    """Who answers: the agent's name and version, as the service declares them."""

    name: str = "agent"
    version: str = "0"


class Health(_Response):
    """``GET /health``."""

    status: str = "ok"
    protocol: str = "1"
    agent: AgentInfo = msgspec.field(default_factory=AgentInfo)
    capabilities: list[str] = msgspec.field(default_factory=list)


class CreateSessionResponse(_Response):
    """201 from ``POST /evals/sessions``."""

    session_id: str
    expires_at: str | None = None


class RunEnvelope(_Response):
    """200 from a turn, an attach or an approvals call: the accumulated run."""

    run: AgentRun


class FieldError(_Response):
    """One invalid field of a request: a JSON path (``$.message``) and what is wrong."""

    path: str
    message: str


class Problem(_Response, omit_defaults=True):
    """An RFC 9457 problem document (``application/problem+json``)."""

    type: str = "about:blank"
    title: str = ""
    status: int = 500
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] | None = None
    retry_after: int | None = None
