"""What an :class:`~evalport.protocol.runtime.AgentSession` raises when it cannot take a call.

The session's rules (:mod:`evalport.protocol.runtime`) say when each is raised; the server
adapter maps them to problems (409 ``session-busy``, ``session-suspended``,
``not-suspended``; 422 for decisions that do not match; 504 ``turn-timeout``).
"""

from __future__ import annotations

from .._models import AgentRun


class RuntimeStateError(RuntimeError):
    """A call the session cannot take in its current state."""


class SessionBusy(RuntimeStateError):
    """A turn is already running on this session."""


class SessionSuspended(RuntimeStateError):
    """The session waits for approval decisions; a new turn must wait."""


class NotSuspended(RuntimeStateError):
    """Decisions were posted but nothing is pending."""


class SessionClosed(RuntimeStateError):
    """The session was closed."""


class DecisionError(ValueError):
    """Decisions that do not match the pending call ids exactly."""

    def __init__(self, missing: list[str], unknown: list[str]) -> None:
        parts = []
        if missing:
            parts.append("no decision for pending call id(s): " + ", ".join(missing))
        if unknown:
            parts.append("decision(s) for unknown call id(s): " + ", ".join(unknown))
        super().__init__("; ".join(parts))
        self.missing = missing
        self.unknown = unknown


class TurnTimeout(TimeoutError):
    """The agent did not finish the turn in time; ``run`` records the timed-out turn."""

    def __init__(self, timeout: float, run: AgentRun) -> None:
        super().__init__(f"the turn did not finish within {timeout:g} s")
        self.timeout = timeout
        self.run = run
