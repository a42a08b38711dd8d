"""The adapter's limits, in one frozen value checked when it is built (:class:`Limits`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

MAX_SECONDS: Final = 365 * 24 * 3600.0
"""The longest time any limit may name (one year)."""


_AT_LEAST: Final = {  # the whole-number limits and their least values
    "max_body_bytes": 64,
    "max_sessions": 1,
    "retry_after": 0,
    "idempotency_keys": 1,
    "turn_threads": 1,
    "max_run_bytes": 1024,
    "stream_buffer_bytes": 1024,
}


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits of one adapter (all times in seconds).

    Every limit has a safe default and is checked when the value is built, so a bad setting
    fails at start-up: every number finite, times at most a year (:data:`MAX_SECONDS`).
    ``turn_timeout`` counts the agent's own time, not time suspended on approvals (each call
    that drives the turn gets the whole timeout). ``session_ttl`` is an idle TTL: every turn,
    attach or approvals call renews it; a suspended session still expires with it. A turn's
    lease lasts ``lease_ttl`` with a store that renews leases (Redis), renewed every third
    of it, else :attr:`lease_seconds`. A sync turn that timed out keeps its thread and its
    session busy until its code returns. ``max_run_bytes`` refuses a turn (413
    ``run-too-large``) before the agent runs; a run may pass it by what its last accepted
    turn added.
    """

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
    turn_threads: int = 16
    """Worker threads for sync turns (each session uses one at most)."""
    max_run_bytes: int = 16 * 1_048_576
    """Largest accumulated run of a session (413 ``run-too-large`` for further turns)."""

    stream_buffer_bytes: int = 1_048_576
    """Events a streamed turn keeps for its readers, in bytes of frames (the oldest go
    first; a reader that falls behind them gets ``overflow``, the turn runs on)."""
    stream_heartbeat: float = 15.0
    """Seconds of silence after which a streamed turn sends a keep-alive comment."""

    def __post_init__(self) -> None:
        for name, least in _AT_LEAST.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be a whole number, not {value!r}")
            if value < least:
                raise ValueError(f"{name} must be at least {least}, not {value}")
        for name in ("turn_timeout", "session_ttl", "lease_ttl", "stream_heartbeat"):
            value = getattr(self, name)
            if value is None and name == "turn_timeout":
                continue
            if not (isinstance(value, int | float) and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
            if not 0 < value <= MAX_SECONDS:
                raise ValueError(
                    f"{name} must be above 0 and at most {MAX_SECONDS:.0f} seconds (a year), not {value!r}"
                )

    @property
    def lease_seconds(self) -> float:
        """How long a turn's lease lasts with a store that cannot renew it (the turn
        timeout + 5 s, or the session TTL + 5 s without a turn timeout)."""
        return (self.turn_timeout or self.session_ttl) + 5.0
