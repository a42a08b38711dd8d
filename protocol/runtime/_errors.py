"""What an :class:`~evalport.protocol.runtime.AgentSession` raises when it cannot take a call.

The session's rules (:mod:`evalport.protocol.runtime`) say when each is raised; the server
adapter maps them to problems (409 ``session-busy``, ``session-suspended``,
``not-suspended``; 422 for decisions that do not match; 504 ``turn-timeout``).
:class:`SessionBusy`, :class:`SessionSuspended` and :class:`NotSuspended` are the very
classes every target raises (defined once, in the tree of :mod:`evalport.protocol`'s
errors), so ``except SessionBusy`` catches them wherever they come from. The session's
own errors join that tree where they mean the same: :class:`SessionClosed` is a
``SessionNotFound`` (and a ``RuntimeError``, as the session's state errors always were),
:class:`DecisionError` a ``RequestRejected`` (and a ``ValueError``),
:class:`TurnTimeout` a ``TurnTimedOut`` (and a ``TimeoutError``); each adds what the
server needs (the ids that do not match, the timed-out run).
"""

from __future__ import annotations

from .._models import AgentRun
from .._problems import NotSuspended as NotSuspended
from .._problems import RequestRejected, SessionNotFound, TurnTimedOut
from .._problems import SessionBusy as SessionBusy
from .._problems import SessionSuspended as SessionSuspended


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


class TurnTimeout(TurnTimedOut, TimeoutError):
    """The agent did not finish the turn in time; ``run`` records the timed-out turn."""

    def __init__(self, timeout: float, run: AgentRun) -> None:
        super().__init__(f"the turn did not finish within {timeout:g} s")
        self.timeout = timeout
        self.run = run
