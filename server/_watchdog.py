"""The event-loop watchdog: a step of an async turn that holds the loop too long is logged
and shown in ``/health``; Python cannot interrupt it, only notice it (ARCHITECTURE.md,
"Sessions").
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Final

from evalport.protocol import LoopHold
from evalport.protocol.runtime import utc_now

logger = logging.getLogger("evalport.server")

HELD_AFTER: Final = 1.0
"""Seconds a step may hold the event loop before the watchdog reports it."""

_POLL: Final = 0.25


class Watchdog:
    """The step clock of one adapter's sessions (see ARCHITECTURE.md, "Sessions")."""

    def __init__(self, held_after: float = HELD_AFTER) -> None:
        self._held_after = held_after
        self._holder: tuple[str, int] | None = None
        self._since = 0.0
        self._warned = -1.0  # the start of the step already warned about
        self.longest: LoopHold | None = None
        """The longest hold so far, if any step held the loop past the threshold."""

    def step_started(self, session_id: str, turn: int) -> None:
        self._since = time.monotonic()
        self._holder = (session_id, turn)
        _watch(self)

    def step_ended(self) -> None:
        holder, self._holder = self._holder, None
        seconds = time.monotonic() - self._since
        if holder is None or seconds < self._held_after:
            return
        session_id, turn = holder
        logger.warning(
            "session %s turn %d held the event loop for %.1f s: the server answered nothing "
            "else meanwhile (an async agent must not block; run CPU-bound work in a sync "
            "agent or asyncio.to_thread)",
            session_id,
            turn,
            seconds,
        )
        if self.longest is None or seconds > self.longest.seconds:
            self.longest = LoopHold(
                session_id=session_id, turn=turn, seconds=round(seconds, 3), at=utc_now()
            )

    def check(self, now: float) -> None:
        """From the watchdog thread: warn once about a step holding the loop too long."""
        holder, since = self._holder, self._since
        if holder is None or since == self._warned or now - since < self._held_after:
            return
        self._warned = since
        logger.warning(
            "session %s turn %d has held the event loop for %.1f s so far",
            holder[0],
            holder[1],
            now - since,
        )


_watched: weakref.WeakSet[Watchdog] = weakref.WeakSet()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _watch(watchdog: Watchdog) -> None:
    """Have the process's watchdog thread check ``watchdog`` (starting the thread once)."""
    global _thread
    if watchdog in _watched and _thread is not None:
        return
    with _lock:
        _watched.add(watchdog)
        if _thread is None:
            _thread = threading.Thread(target=_run, name="evalport-watchdog", daemon=True)
            _thread.start()


def _run() -> None:
    while True:
        time.sleep(_POLL)
        now = time.monotonic()
        for watchdog in list(_watched):
            watchdog.check(now)
