"""A session's accumulated run as it is kept: decoded during a turn, encoded between turns.

Rules:

- Between turns the run is kept only encoded, as the protocol's ``{"run": ...}`` bytes:
  idle sessions then hold a few bytes objects instead of a tree of Python objects, which
  keeps memory and garbage-collection pauses small with many sessions. Reading
  :attr:`ParkedRun.run` decodes it again (once, until it is parked again).
- A completed turn's run is encoded by the turn's own task (:meth:`ParkedRun.finish`), so
  that the tree of objects it decoded lives within one pass of the loop; the caller still
  gets the object once (:meth:`ParkedRun.park` hands it over).
"""

from __future__ import annotations

import msgspec

from .._messages import RunEnvelope
from .._models import AgentRun

_encode_envelope = msgspec.json.Encoder().encode
_decode_envelope = msgspec.json.Decoder(RunEnvelope).decode


class ParkedRun:
    """One session's accumulated run, encoded whenever the session is idle."""

    __slots__ = ("_finished", "_parked", "_run")

    def __init__(self, run: AgentRun | None, session_id: str) -> None:
        self._run = run
        self._finished: AgentRun | None = None
        self._parked = b""
        if run is None:
            self._parked = _encode_envelope(RunEnvelope(run=AgentRun(session_id=session_id)))

    @property
    def run(self) -> AgentRun:
        """The run object (decoded on demand)."""
        run = self._run
        if run is None:
            run = self._run = _decode_envelope(self._parked).run
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
        """The run object as it is now; kept only encoded from here on if ``idle``."""
        finished, self._finished = self._finished, None
        if finished is not None and self._run is None:
            return finished  # encoded already when the turn completed
        run = self.run
        if idle:
            self._parked = _encode_envelope(RunEnvelope(run=run))
            self._run = None
        return run

    def finish(self) -> None:
        """Encode a completed turn's run now; the next :meth:`park` returns the object."""
        if self._run is not None:
            self._finished = self._run
            self._parked = _encode_envelope(RunEnvelope(run=self._run))
            self._run = None
