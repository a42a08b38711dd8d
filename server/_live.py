"""The agents that live in this process, and how far each one is.

Rules:

- A live agent is current when the stored run is the one it reached (it remembers that
  run's version, or from a store without versions its bytes: :class:`~._runlog.Reached`);
  then a turn continues it. Otherwise (this process has not seen the
  session, or another replica moved it on since) the agent is rebuilt from the stored
  run: the session factory again, then the handler's ``restore(history, run)`` hook.
- A session suspended in the store but not here is suspended on another replica: it
  takes no turn here (409 ``session-suspended``).
- Forgetting a session closes its live agent (cancelling a turn it still runs) and stops
  answering relayed approvals for it.
- An attach is answered from a hot agent's run only while no turn of it is between
  taking the lease and storing its run (or being dropped): a turn ended but not yet
  stored (its store call may still fail) is never sent.
- Agents keep their runs as objects between turns (``hot``, :mod:`evalport.protocol.runtime`)
  while they are among the :data:`HOT_SESSIONS` that took a turn last; an agent that
  falls out of them parks its run (kept encoded until its next turn; one busy or
  suspended then parks once its run is stored), so that many idle sessions hold bytes,
  not trees of objects. A session is hot from its second turn: a new session's first
  turn parks its run once stored (most sessions are short, and keeping their runs
  costs them more than the one decode it saves a long one).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from evalport.protocol import AgentRun
from evalport.protocol.runtime import AgentSession, SessionInfo

from ._records import SUSPENDED, decode_meta, not_found, session_info, suspended_elsewhere
from ._runlog import Reached, stored_run
from .stores import ApprovalRelay, MemoryStore, SessionStore, StoredSession, StoreUnavailable

HOT_SESSIONS: Final = 64
"""How many sessions (the latest to take a turn) keep their runs as objects."""

HOT_BYTES: Final = 256 * 2**20
"""How large (stored bytes) the runs that the hot sessions keep as objects may be
together: 64 runs of the default ``max_run_bytes`` (16 MiB) would hold 1 GiB and more
as objects; past this, the coldest park first (the latest always stays hot)."""

_UNKNOWN: Final = Reached(0, b"", 0, 0)


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
        self._agents: dict[str, AgentSession] = {}
        self._seen: dict[str, Reached] = {}  # the stored run each live agent has reached
        # the hot sessions, latest last, with their runs' encoding when the store holds it
        # (written whole, as the run is): parking shares it instead of making a copy
        self._hot: OrderedDict[str, bytes | None] = OrderedDict()
        self._hot_bytes = 0  # the stored sizes of the hot runs (as reached)
        self._shares = isinstance(store, MemoryStore)  # (it holds the bytes it is given)
        # sessions whose turn ended but whose run the store may not hold yet (from the
        # lease until :meth:`reached` or :meth:`forget`): no attach is answered from them
        self._finishing: set[str] = set()

    def __len__(self) -> int:
        return len(self._agents)

    def get(self, session_id: str) -> AgentSession | None:
        """The session's live agent, current or not."""
        return self._agents.get(session_id)

    def ids(self) -> list[str]:
        return list(self._agents)

    async def open(self, info: SessionInfo) -> AgentSession:
        """A new session's agent (not yet live: :meth:`adopt` it once stored)."""
        return await AgentSession.from_factory(self._factory, info, **self._options)

    def adopt(self, session_id: str, live: AgentSession, reached: Reached) -> None:
        """``live`` is the session's agent, and ``reached`` what the store holds."""
        self._agents[session_id] = live
        self._seen[session_id] = reached
        if reached.since:  # (a new session is not hot: see the module's rules)
            self._touch(session_id)

    def reached(self, session_id: str, reached: Reached, envelope: bytes | None = None) -> None:
        """The session's live agent reached ``reached``, which the store now holds
        (``envelope``: its run's encoding, if made; a hot session keeps it only when the
        store holds those same bytes, as the in-process store does: else a copy)."""
        before = self._seen.get(session_id, _UNKNOWN)
        self._seen[session_id] = reached
        self._finishing.discard(session_id)
        hot = self._hot
        if session_id in hot:
            hot[session_id] = envelope if self._shares else None
            self._hot_bytes += reached.whole + reached.appended - before.whole - before.appended
            if self._hot_bytes > HOT_BYTES:  # (as many as before: only the bytes may pass)
                self._cool()
        elif (live := self._agents.get(session_id)) is not None:
            live.park(envelope)  # a first turn, or pushed out of the hot ones while it ran

    def finishing(self, session_id: str) -> None:
        """A turn on the session took the lease: until it stores its run (:meth:`reached`)
        or the agent is dropped (:meth:`forget`), the live run may hold what the store
        does not, so :meth:`hot_run` gives none."""
        self._finishing.add(session_id)

    def settled(self, session_id: str) -> None:
        """The session's turn ended with nothing to store (its lease released)."""
        self._finishing.discard(session_id)

    def reached_of(self, session_id: str) -> Reached:
        """What the store holds of the run the session's live agent reached (nothing known:
        a version of 0)."""
        return self._seen.get(session_id, _UNKNOWN)

    def hot_run(self, session_id: str, stored: StoredSession) -> AgentRun | None:
        """The run object of the session's live agent if it is hot, idle and reached
        ``stored`` (then it is the run ``stored`` holds, before the server's policy)."""
        live = self._agents.get(session_id)
        if (
            live is None
            or session_id not in self._hot
            or session_id in self._finishing
            or live.busy
            or live.suspended
            or not self.reached_of(session_id).matches(stored)
        ):
            return None
        return live.run

    def _touch(self, session_id: str) -> None:
        """The session takes a turn: it is hot; the one that took none the longest, past
        :data:`HOT_SESSIONS`, parks its run."""
        hot = self._hot
        if session_id in hot:
            hot.move_to_end(session_id)  # (as many and as large: nothing to park)
            return
        hot[session_id] = None
        reached = self._seen.get(session_id, _UNKNOWN)
        self._hot_bytes += reached.whole + reached.appended
        self._cool()

    def _cool(self) -> None:
        """Park the coldest sessions while more than :data:`HOT_SESSIONS`, or more than
        :data:`HOT_BYTES` of runs, are hot (the latest stays)."""
        hot, seen = self._hot, self._seen
        while len(hot) > HOT_SESSIONS or (len(hot) > 1 and self._hot_bytes > HOT_BYTES):
            coldest, envelope = hot.popitem(last=False)
            reached = seen.get(coldest, _UNKNOWN)
            self._hot_bytes -= reached.whole + reached.appended
            live = self._agents.get(coldest)
            if live is not None:
                live.park(envelope)

    async def forget(self, session_id: str) -> None:
        """Close the session's live agent, if any, and stop answering relayed approvals."""
        reached = self._seen.pop(session_id, _UNKNOWN)
        if session_id in self._hot:
            del self._hot[session_id]
            self._hot_bytes -= reached.whole + reached.appended
        self._finishing.discard(session_id)
        if self._relay is not None:
            with contextlib.suppress(StoreUnavailable):
                await self._relay.unlisten(session_id)
        live = self._agents.pop(session_id, None)
        if live is not None:
            await live.close()

    async def current(self, session_id: str, stored: StoredSession | None = None) -> AgentSession:
        """The session's agent, rebuilt from the store unless the live one is current
        (``stored``: the session as the store returned it with the lease, if it did)."""
        if stored is None:
            stored = await self._store.read(session_id)
        if stored is None:
            await self.forget(session_id)
            raise not_found(session_id)
        live = self._agents.get(session_id)
        reached = self._seen.get(session_id, _UNKNOWN)
        if live is not None and reached.matches(stored):
            self._seen[session_id] = reached.versioned(stored)
            if reached.since:  # (a first turn parks its run: see the module's rules)
                self._touch(session_id)
            return live
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
        live = await AgentSession.restore(self._factory, info, run, **self._options)
        self.adopt(session_id, live, Reached.of(stored, run))
        return live
