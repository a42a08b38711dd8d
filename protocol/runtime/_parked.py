"""A session's run as it is kept: objects during a turn (or while hot), encoded between turns.

Rules: see ARCHITECTURE.md, "The agent runtime: sessions and turns".
"""

from __future__ import annotations

from typing import Any

import msgspec

from .._delta import SETTLED_STATUSES, TAIL_LISTS
from .._messages import RunEnvelope
from .._models import AgentRun

_encode_envelope = msgspec.json.Encoder().encode
_decode_envelope = msgspec.json.Decoder(RunEnvelope).decode

# the run's lists that only grow at their end (their items of settled turns never change)


class ParkedRun:
    """One session's accumulated run, encoded whenever the session is idle (unless hot)."""

    __slots__ = ("_finished", "_hot", "_measured", "_parked", "_run")

    def __init__(self, run: AgentRun | None, session_id: str, *, hot: bool = False) -> None:
        self._run = run
        self._hot = hot
        self._finished: AgentRun | None = None
        self._parked = b""
        # list name: (items, their bytes), once measured (none for a session never measured)
        self._measured: dict[str, tuple[int, int]] | None = None
        if run is None:
            self._parked = _encode_envelope(RunEnvelope(run=AgentRun(session_id=session_id)))

    @property
    def run(self) -> AgentRun:
        """The run object (decoded on demand)."""
        run = self._run
        if run is None:
            run = self._run = _decode_envelope(self._parked).run
            self._measured = None
        return run

    @property
    def envelope(self) -> bytes:
        """``{"run": ...}`` as the protocol sends it (no copy when parked)."""
        if self._run is None:
            return self._parked
        return _encode_envelope(RunEnvelope(run=self._run))

    def snapshot(self) -> AgentRun:
        """A deep copy of the run."""
        return _decode_envelope(self.envelope).run

    def park(self, idle: bool) -> AgentRun:
        """The run object as it is now; kept only encoded from here on if ``idle`` (and
        the run is not hot)."""
        finished, self._finished = self._finished, None
        if finished is not None and self._run is None:
            return finished  # encoded already when the turn completed
        run = self.run
        if idle and not self._hot:
            self._parked = _encode_envelope(RunEnvelope(run=run))
            self._run = None
        return run

    def finish(self) -> None:
        """Encode a completed turn's run now (unless hot); the next :meth:`park` returns
        the object."""
        if self._run is not None and not self._hot:
            self._finished = self._run
            self._parked = _encode_envelope(RunEnvelope(run=self._run))
            self._run = None

    def rest(self, envelope: bytes | None = None) -> None:
        """Keep a hot run only encoded until it is read again (its session is idle);
        ``envelope``: the run's encoding if the host holds it already (shared, not made)."""
        if self._run is not None:
            self._parked = envelope or _encode_envelope(RunEnvelope(run=self._run))
            self._run = None
            self._measured = None

    def size(self) -> int:
        """The length of :attr:`envelope`, exact, without re-encoding a hot run: settled
        turns' items are measured once."""
        run = self._run
        if run is None:
            return len(self._parked)
        if run.status not in SETTLED_STATUSES:  # items of the latest turn may still change
            return len(self.envelope)
        measured = self._measured
        if measured is None:
            measured = self._measured = {}
        emptied: dict[str, Any] = {}
        size = 0
        for name in TAIL_LISTS:
            items = getattr(run, name)
            if items is msgspec.UNSET:
                continue
            emptied[name] = []
            count, length = measured.get(name, (0, 0))
            if len(items) < count:  # (never, for a run that only grows: measure again)
                count, length = 0, 0
            if len(items) > count:
                # "[a,b]" is 2 bytes more than the items and their commas; one comma
                # joins them to those measured before
                length += len(_encode_envelope(items[count:])) - 2 + (1 if count else 0)
                measured[name] = count, length = len(items), length
            size += length
        frame = msgspec.structs.replace(run, **emptied)
        return size + len(_encode_envelope(RunEnvelope(run=frame)))
