"""What an :class:`~evalport.protocol.runtime.AgentSession` raises when it cannot take a call.

The session's rules (:mod:`evalport.protocol.runtime`) say when each is raised; the server
adapter maps them to problems (409 ``session-busy``, ``session-suspended``,
``not-suspended``; 422 for decisions that do not match; 504 ``turn-timeout``).
:class:`SessionBusy`, :class:`SessionSuspended` and :class:`NotSuspended` are the very
classes every target raises (defined once, in the tree of :mod:`evalport.protocol`'s
errors), so ``except SessionBusy`` catches them wherever they come from. The session's
own errors join that tree where they mean the same: :class:`SessionClosed` is a
``SessionNotFound`` (and a ``RuntimeError``, as the session's state errors always were),
:class:`DecisionError` a ``RequestRejected`` (and a ``ValueError``) that adds what the
server needs (the ids that do not match); a turn that times out raises ``TurnTimedOut``
itself (a ``TimeoutError`` too), with the timed-out run (:func:`turn_timed_out`).
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
