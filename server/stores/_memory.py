"""The in-process session store (the default): a dict and a clock. No coroutine here ever
waits, so every operation is atomic on the event loop; one process holds every turn, so it
records no holder's key.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from ._base import (
    BeginTurn,
    Finish,
    FinishTurn,
    Lease,
    NewSession,
    StoredSession,
    TurnStart,
)


class _Entry(msgspec.Struct, gc=False):
    # Untracked by the garbage collector (it holds bytes, strings, numbers and a dict of
    # bytes, never a cycle): thousands of idle sessions then add nothing to its full passes.
    meta: bytes
    run: bytes
    expires: float
    version: int
    state: str = "idle"
    lease_token: str | None = None
    lease_expires: float = 0.0
    results: dict[str, bytes] | None = None
    appended: list[bytes] | None = None

    def stored(self, seen: int = 0) -> StoredSession:
        if seen and seen == self.version:
            return StoredSession(meta=self.meta, run=b"", state=self.state, version=seen)
        appended = () if self.appended is None else tuple(self.appended)
        return StoredSession(self.meta, self.run, self.state, self.version, appended)


class MemoryStore:
    """Sessions in a dict. ``clock`` (monotonic seconds) is replaceable for tests."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        # Expired sessions dropped on the way (reads, a full cap), reported by the next
        # purge_expired() so that the adapter closes their agents too.
        self._gone: list[str] = []

    def _live(self, session_id: str, now: float) -> _Entry | None:
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        if entry.expires <= now and not self._leased(entry, now):
            del self._entries[session_id]
            self._gone.append(session_id)
            return None
        return entry

    @staticmethod
    def _leased(entry: _Entry, now: float) -> bool:
        return entry.lease_token is not None and entry.lease_expires > now

    async def create(self, new: NewSession) -> bool:
        now = self._clock()
        if len(self._entries) >= new.limit:
            self._purge(now)  # expired sessions make room
            if len(self._entries) >= new.limit:
                return False
        self._entries[new.session_id] = _Entry(new.meta, new.run, now + new.ttl, new.version)
        return True

    async def read(self, session_id: str, *, ttl: float | None = None) -> StoredSession | None:
        now = self._clock()
        entry = self._live(session_id, now)
        if entry is None:
            return None
        if ttl is not None:
            entry.expires = now + ttl
        return entry.stored()

    async def delete(self, session_id: str) -> bool:
        return self._entries.pop(session_id, None) is not None

    async def acquire(self, session_id: str, token: str, *, lease: float, ttl: float) -> Lease:
        return self._acquire(session_id, token, lease, ttl)

    def _acquire(self, session_id: str, token: str, lease: float, ttl: float) -> Lease:
        now = self._clock()
        entry = self._live(session_id, now)
        if entry is None:
            return Lease.MISSING
        if self._leased(entry, now):
            return Lease.BUSY
        entry.lease_token = token
        entry.lease_expires = now + lease
        entry.expires = now + ttl
        return Lease.ACQUIRED

    async def release(self, session_id: str, token: str) -> None:
        entry = self._entries.get(session_id)
        if entry is not None and entry.lease_token == token:
            _release_entry(entry, self._clock())

    async def get_result(self, session_id: str, key: str) -> bytes | None:
        entry = self._live(session_id, self._clock())
        if entry is None or entry.results is None:
            return None
        return entry.results.get(key)

    @staticmethod
    def _put_result(entry: _Entry, key: str, record: bytes, keep: int) -> None:
        results = entry.results
        if results is None:
            results = entry.results = {}
        results.pop(key, None)
        results[key] = record
        while len(results) > keep:
            del results[next(iter(results))]

    async def begin_turn(self, begin: BeginTurn) -> TurnStart:
        """The key's record; unless it answers, ``acquire`` and ``read`` (``lost`` and
        ``keep`` are not needed: see ARCHITECTURE.md, "The store contract")."""
        session_id = begin.session_id
        entry = self._live(session_id, self._clock())
        if begin.key is not None and entry is not None and entry.results is not None:
            record = entry.results.get(begin.key)
            if record is not None:
                return TurnStart(lease=None, replay=record)
        outcome = self._acquire(session_id, begin.token, begin.lease, begin.ttl)
        if outcome is not Lease.ACQUIRED:
            return TurnStart(lease=outcome)
        entry = self._entries[session_id]
        if entry.state == "suspended":
            _release_entry(entry, self._clock())
            return TurnStart(lease=Lease.BUSY, suspended=True)
        return TurnStart(lease=outcome, session=entry.stored(begin.seen))

    async def finish_turn(self, finish: FinishTurn) -> Finish:
        """Write the run (or append the turn), keep the record and release the lease, only
        if ``token`` took the lease last (it may have lapsed since)."""
        now = self._clock()
        session_id = finish.session_id
        entry = self._entries.get(session_id)
        if entry is None or entry.lease_token != finish.token:
            return Finish.LOST
        if entry.lease_expires <= now and self._live(session_id, now) is None:
            return Finish.LOST  # the lease lapsed and the session expired since
        if finish.append:
            if entry.version != finish.base:
                return Finish.STALE
            if entry.appended is None:
                entry.appended = []
            entry.appended.append(finish.append)
        else:
            entry.run = finish.run
            entry.appended = None
        entry.version = finish.version
        entry.state = finish.state
        entry.expires = now + finish.ttl
        if finish.key is not None:
            self._put_result(entry, finish.key, finish.record, finish.keep)
        _release_entry(entry, now)
        return Finish.STORED

    async def count(self) -> int:
        self._purge(self._clock())
        return len(self._entries)

    async def purge_expired(self) -> list[str]:
        self._purge(self._clock())
        gone, self._gone = self._gone, []
        return gone

    def _purge(self, now: float) -> None:
        expired = [
            session_id
            for session_id, entry in self._entries.items()
            if entry.expires <= now and not self._leased(entry, now)
        ]
        for session_id in expired:
            del self._entries[session_id]
        self._gone.extend(expired)

    async def aclose(self) -> None:
        self._entries.clear()
        self._gone.clear()


def _release_entry(entry: _Entry, now: float) -> None:
    entry.lease_token = None
    entry.expires = max(entry.expires, now)  # a released session may expire from now on
