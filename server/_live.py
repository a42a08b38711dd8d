"""The agents that live in this process and the stored run each reached (ARCHITECTURE.md,
"Replicas"). An agent continues a session only while it is current (the stored run is the
version it reached); else it is rebuilt from the store.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import msgspec
from evalport.protocol import AgentRun
from evalport.protocol.runtime import AgentSession, SessionInfo

from ._problems import not_found, suspended_elsewhere
from ._records import SUSPENDED, decode_meta, session_info
from ._runlog import Reached, stored_run
from .stores import ApprovalRelay, MemoryStore, SessionStore, StoredSession, StoreUnavailable

HOT_SESSIONS: Final = 64
"""How many sessions (the latest to take a turn) keep their runs as objects."""

HOT_BYTES: Final = 256 * 2**20
"""How large (stored bytes) the runs that the hot sessions keep as objects may be
together: 64 runs of the default ``max_run_bytes`` (16 MiB) would hold 1 GiB and more
as objects; past this, the coldest park first (the latest always stays hot)."""

_SWEEP_EVERY: Final = 1.0
_UNKNOWN: Final = Reached(0, 0, 0)


class Live(msgspec.Struct, gc=False):
    """A live session: its ``agent``, the stored run it ``reached``, whether a turn of it
    took the lease and has not stored its run yet (``finishing``: no attach is answered
    from it), and while hot the run's ``envelope`` when the store holds those bytes.

    Not tracked by the collector (one object fewer per live session for every full
    collection to walk): only the session tables refer to a record and nothing it holds
    refers back to it, so it is never part of a reference cycle."""

    agent: AgentSession
    reached: Reached
    finishing: bool = False
    envelope: bytes | None = None


class LiveSessions:
    """Live agents by session id, over ``store`` (``factory``: the adapted session factory;
    ``relay``: the store's approvals relay, if it has one; ``options``: the keyword
    arguments of every :class:`AgentSession` made here)."""

    def __init__(
        self,
        factory: Callable[[SessionInfo], Any],
        store: SessionStore,
        relay: ApprovalRelay | None,
        **options: Any,
    ) -> None:
        self._factory = factory
        self._options = {**options, "hot": True}  # every AgentSession's keyword arguments
        self._store = store
        self._relay = relay
        self._sessions: dict[str, Live] = {}
        self._hot: OrderedDict[str, Live] = OrderedDict()  # the LRU of hot ones, latest last
        self._hot_bytes = 0  # the stored sizes of the hot runs (as reached)
        self._shares = isinstance(store, MemoryStore)  # (it holds the bytes it is given)
        self._next_sweep = 0.0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> AgentSession | None:
        """The session's live agent, current or not."""
        live = self._sessions.get(session_id)
        return None if live is None else live.agent

    def ids(self) -> list[str]:
        return list(self._sessions)

    def seen(self, session_id: str) -> Reached:
        """The stored run the session's live agent reached (version 0: none known)."""
        live = self._sessions.get(session_id)
        return _UNKNOWN if live is None else live.reached

    async def open(self, info: SessionInfo) -> AgentSession:
        """A new session's agent (not yet live: :meth:`adopt` it once stored)."""
        return await AgentSession.from_factory(self._factory, info, **self._options)

    def adopt(self, session_id: str, agent: AgentSession, reached: Reached) -> None:
        """``agent`` is the session's agent, and ``reached`` what the store holds."""
        live = self._sessions[session_id] = Live(agent, reached)
        if reached.since:  # (a new session is not hot: see ARCHITECTURE.md, "Replicas")
            self._touch(session_id, live)

    def finishing(self, session_id: str) -> None:
        """A turn on the session took the lease: until it stores its run (:meth:`reached`)
        or the agent is dropped (:meth:`forget`), the live run may hold what the store
        does not, so :meth:`hot_run` gives none."""
        live = self._sessions.get(session_id)
        if live is not None:
            live.finishing = True

    def settled(self, session_id: str) -> None:
        """The session's turn ended with nothing to store (its lease released)."""
        live = self._sessions.get(session_id)
        if live is not None:
            live.finishing = False

    def reached(self, session_id: str, reached: Reached, envelope: bytes | None = None) -> None:
        """The session's live agent reached ``reached``, which the store now holds
        (``envelope``: its run's encoding, if made; a hot session keeps it only when the
        store holds those same bytes, as the in-process store does: else a copy)."""
        live = self._sessions.get(session_id)
        if live is None:
            return
        before, live.reached, live.finishing = live.reached, reached, False
        if session_id in self._hot:
            live.envelope = envelope if self._shares else None
            self._hot_bytes += reached.size - before.size
            if self._hot_bytes > HOT_BYTES:  # (as many as before: only the bytes may pass)
                self._cool()
        else:
            live.agent.park(envelope)  # a first turn, or pushed out of the hot ones while it ran

    def hot_run(self, session_id: str, stored: StoredSession) -> AgentRun | None:
        """The run object of the session's live agent if it is hot, idle and reached
        ``stored`` (then it is the run ``stored`` holds, before the server's policy)."""
        live = self._hot.get(session_id)
        if (
            live is None
            or live.finishing
            or live.agent.busy
            or live.agent.suspended
            or live.reached.version != stored.version
        ):
            return None
        return live.agent.run

    def _touch(self, session_id: str, live: Live) -> None:
        """The session takes a turn: it is hot; the one that took none the longest, past
        :data:`HOT_SESSIONS`, parks its run."""
        hot = self._hot
        if session_id in hot:
            hot.move_to_end(session_id)  # (as many and as large: nothing to park)
            return
        hot[session_id] = live
        self._hot_bytes += live.reached.size
        self._cool()

    def _cool(self) -> None:
        """Park the coldest sessions while more than :data:`HOT_SESSIONS`, or more than
        :data:`HOT_BYTES` of runs, are hot (the latest stays)."""
        hot = self._hot
        while len(hot) > HOT_SESSIONS or (len(hot) > 1 and self._hot_bytes > HOT_BYTES):
            _, coldest = hot.popitem(last=False)
            self._hot_bytes -= coldest.reached.size
            coldest.agent.park(coldest.envelope)
            coldest.envelope = None

    async def forget(self, session_id: str) -> None:
        """Close the session's live agent, if any, and stop answering relayed approvals."""
        live = self._sessions.pop(session_id, None)
        if self._hot.pop(session_id, None) is not None and live is not None:
            self._hot_bytes -= live.reached.size
        if self._relay is not None:
            with contextlib.suppress(StoreUnavailable):
                await self._relay.unlisten(session_id)
        if live is not None:
            await live.agent.close()

    async def sweep(self) -> None:
        """Purge expired sessions and close their agents (at most once a second)."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_EVERY
        for session_id in await self._store.purge_expired():
            await self.forget(session_id)

    async def current(self, session_id: str, stored: StoredSession | None = None) -> AgentSession:
        """The session's agent, rebuilt from the store unless the live one is current
        (``stored``: the session as the store returned it with the lease, if it did)."""
        if stored is None:
            stored = await self._store.read(session_id)
        if stored is None:
            await self.forget(session_id)
            raise not_found(session_id)
        live = self._sessions.get(session_id)
        if live is not None and live.reached.version == stored.version:
            if live.reached.since:  # (a first turn parks its run: see ARCHITECTURE.md, "Replicas")
                self._touch(session_id, live)
            return live.agent
        if stored.state == SUSPENDED:
            raise suspended_elsewhere()
        await self.forget(session_id)
        if not stored.run:  # left out as the version this process held: read it
            read = await self._store.read(session_id)
            if read is None:
                raise not_found(session_id)
            stored = read
        meta = decode_meta.decode(stored.meta)
        info = session_info(session_id, meta)
        run = stored_run(stored)
        agent = await AgentSession.restore(self._factory, info, run, **self._options)
        self.adopt(session_id, agent, Reached.of(stored, run))
        return agent
