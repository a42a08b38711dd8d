"""When a call is tried again, and how long it waits first: :class:`RetryPolicy`.

Rule: every retry loop of the client asks this policy, and only it; a call is retried
only when repeating it cannot do anything twice. See ARCHITECTURE.md, "Retries".
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime


def _no_jitter(delay: float) -> float:
    return delay


def _full_jitter(delay: float) -> float:
    return random.uniform(delay / 2, delay)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times, and how patiently, a target retries a call that may be retried."""

    attempts: int = 4
    """Tries in all, the first included (1 disables retries)."""
    backoff: float = 0.25
    """The first wait, in seconds; each further wait doubles it."""
    max_backoff: float = 5.0
    """No computed wait is longer than this."""
    max_retry_after: float = 60.0
    """A ``Retry-After`` longer than this is not waited for."""
    jitter: bool = True
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)
    statuses: frozenset[int] = frozenset({429, 503})
    """The answers that are retried; every other status is an answer, not an accident."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")
        if self.backoff < 0 or self.max_backoff < 0 or self.max_retry_after < 0:
            raise ValueError("backoff, max_backoff and max_retry_after must be >= 0")

    @classmethod
    def never(cls) -> RetryPolicy:
        """Every call is tried once."""
        return cls(attempts=1)

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        """The wait before retry number ``retry`` (1-based); ``None``: do not retry."""
        if retry >= self.attempts:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        computed = min(self.max_backoff, self.backoff * 2 ** (retry - 1))
        return (_full_jitter if self.jitter else _no_jitter)(computed)

    def after_answer(self, retry: int, status: int, retry_after: str | None) -> float | None:
        """The wait before retry ``retry`` after an answer with ``status`` and the header
        ``Retry-After`` (``None``: the answer stands)."""
        if status not in self.statuses:
            return None
        return self.delay(retry, parse_retry_after(retry_after))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))
