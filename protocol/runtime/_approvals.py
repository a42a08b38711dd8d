"""Approvals as the turn context sees them: a decision, a rejection, who takes requests."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import msgspec

from .._models import PendingApproval, PendingInterrupt


class ApprovalResult(msgspec.Struct, frozen=True, gc=False):
    """The decision on one approval request."""

    approved: bool
    reason: str | None = None


class ApprovalRejected(Exception):
    """Raised into the agent when an approver rejects a gated tool call."""

    def __init__(self, tool: str, reason: str | None) -> None:
        super().__init__(f"{tool} was rejected" + (f": {reason}" if reason else ""))
        self.tool = tool
        self.reason = reason


class Approvals(Protocol):
    """What the runtime gives a context so that it can suspend its turn: the future
    resolves to an :class:`ApprovalResult` for an approval, to the answer for an interrupt."""

    def register(self, pending: PendingApproval | PendingInterrupt) -> asyncio.Future[Any]: ...
