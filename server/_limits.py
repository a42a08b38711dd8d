"""The adapter's limits, in one frozen value.

Rules:

- Every limit has a safe default and is validated when the value is built, so a bad
  setting fails at start-up, not at the first request.
- ``turn_timeout`` counts the agent's own time; time a turn spends suspended on approvals
  does not count (each HTTP call that drives the turn gets the full timeout).
- ``session_ttl`` is an *idle* TTL: every turn, attach or approvals call renews it. A
  session that is suspended still expires with it.
- A turn's lease on its session: with a store that renews leases (Redis) it lasts
  ``lease_ttl`` and the replica running the turn renews it every third of that, so a
  replica that dies mid-turn frees its session within ``lease_ttl``; with any other
  store it lasts :attr:`Limits.lease_seconds` (the turn timeout + 5 s).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits of one adapter (all times in seconds)."""

    max_body_bytes: int = 1_048_576
    """Largest request body accepted (413 above)."""
    turn_timeout: float | None = 120.0
    """Longest a turn may run before it is cancelled (504); ``None`` for no limit."""
    session_ttl: float = 1800.0
    """Idle time after which a session expires (404 afterwards)."""
    max_sessions: int = 1000
    """Live sessions held at once (503 with ``Retry-After`` above)."""
    retry_after: int = 5
    """Seconds a client is told to wait after a 503."""
    idempotency_keys: int = 256
    """Idempotency records kept per session (the oldest are forgotten first)."""
    lease_ttl: float = 15.0
    """A turn's lease between renewals, with a store that renews leases (Redis): a
    replica that dies mid-turn blocks its session this long at most. A turn that blocks
    the event loop for longer (no renewal can run) may lose its lease to another turn."""

    def __post_init__(self) -> None:
        if self.max_body_bytes < 64:
            raise ValueError(f"max_body_bytes must be at least 64, not {self.max_body_bytes}")
        if self.turn_timeout is not None and self.turn_timeout <= 0:
            raise ValueError(f"turn_timeout must be positive or None, not {self.turn_timeout}")
        if self.session_ttl <= 0:
            raise ValueError(f"session_ttl must be positive, not {self.session_ttl}")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {self.max_sessions}")
        if self.retry_after < 0:
            raise ValueError(f"retry_after must not be negative, not {self.retry_after}")
        if self.idempotency_keys < 1:
            raise ValueError(f"idempotency_keys must be at least 1, not {self.idempotency_keys}")
        if not self.lease_ttl > 0:
            raise ValueError(f"lease_ttl must be positive, not {self.lease_ttl}")

    @property
    def lease_seconds(self) -> float:
        """How long a turn's lease lasts with a store that cannot renew it (the turn
        timeout + 5 s, or the session TTL + 5 s without a turn timeout)."""
        return (self.turn_timeout or self.session_ttl) + 5.0
