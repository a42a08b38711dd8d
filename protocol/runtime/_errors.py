"""What an AgentSession raises when it cannot take a call, as members of the error tree.

See ARCHITECTURE.md, "Problems and errors".
"""

from __future__ import annotations

from .._models import AgentRun
from .._problems import NotSuspended as NotSuspended
from .._problems import RequestRejected, SessionNotFound
from .._problems import SessionBusy as SessionBusy
from .._problems import SessionSuspended as SessionSuspended
from .._problems import TurnTimedOut as TurnTimedOut


class SessionClosed(SessionNotFound, RuntimeError):
    """The session was closed (in process, what a server answers 404 for)."""


class DecisionError(RequestRejected, ValueError):
    """Decisions that do not match the pending ids exactly (``mismatched``: an interrupt
    id not given an ``answer``, or a call id given one)."""

    def __init__(
        self, missing: list[str], unknown: list[str], mismatched: list[str] | None = None
    ) -> None:
        parts = []
        if missing:
            parts.append("no decision for pending id(s): " + ", ".join(missing))
        if unknown:
            parts.append("decision(s) for unknown id(s): " + ", ".join(unknown))
        if mismatched:
            parts.append(
                "an interrupt takes an 'answer' and a tool call 'approve' or 'reject': "
                + ", ".join(mismatched)
            )
        super().__init__("; ".join(parts))
        self.missing = missing
        self.unknown = unknown
        self.mismatched = mismatched or []


def turn_timed_out(timeout: float, run: AgentRun) -> TurnTimedOut:
    """The runtime's turn timeout: a ``TurnTimedOut`` carrying the limit and the run."""
    return TurnTimedOut(f"the turn did not finish within {timeout:g} s", timeout=timeout, run=run)
