"""The in-process session store (the default): a dict, a clock and nothing else.

It follows every rule of :mod:`evalport.server.stores._base` and is a
:class:`~evalport.server.stores._base.TurnStore` like the Redis store: the adapter drives
both through the same calls. No coroutine here ever waits, so every operation, a turn's
``begin_turn`` and ``finish_turn`` included, is atomic on the event loop. It records no
holder's key (``same_key`` is never true, ``lost`` is ignored): one process holds every
turn, its turns die with it, and the adapter's own table of keys in flight covers
repeats. It keeps runs as logs, with versions (a turn appends what it added). Suitable
for one process; services with several replicas need a shared store.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from ._base import Lease, StoredSession, TurnStart, new_version


class _Entry(msgspec.Struct, gc=False):
    # Untracked by the garbage collector (it holds bytes, strings, numbers and a dict of
    # bytes, never a cycle): thousands of idle sessions then add nothing to its full passes.
    meta: bytes
    run: bytes
    expires: float
    state: str = "idle"
    lease_token: str | None = None
    lease_expires: float = 0.0
    results: dict[str, bytes] | None = None
    version: int = 1
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

    async def create(
        self, session_id: str, meta: bytes, run: bytes, *, ttl: float, limit: int
    ) -> bool:
        now = self._clock()
        if len(self._entries) >= limit:
            self._purge(now)  # expired sessions make room
            if len(self._entries) >= limit:
                return False
        self._entries[session_id] = _Entry(meta, run, now + ttl, version=new_version())
        return True

    async def read(self, session_id: str, *, ttl: float | None = None) -> StoredSession | None:
        now = self._clock()
        entry = self._live(session_id, now)
        if entry is None:
            return None
        if ttl is not None:
            entry.expires = now + ttl
        return entry.stored()

    async def write(
        self, session_id: str, run: bytes, *, state: str, ttl: float, token: str | None = None
    ) -> bool:
        now = self._clock()
        entry = self._live(session_id, now)
        if entry is None or (token is not None and entry.lease_token != token):
            return False
        _write_entry(entry, run, state, now + ttl)
        return True

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
        return self._get_result(session_id, key)

    def _get_result(self, session_id: str, key: str) -> bytes | None:
        entry = self._live(session_id, self._clock())
        if entry is None or entry.results is None:
            return None
        return entry.results.get(key)

    async def put_result(self, session_id: str, key: str, record: bytes, *, keep: int) -> None:
        self._put_result(session_id, key, record, keep)

    def _put_result(self, session_id: str, key: str, record: bytes, keep: int) -> None:
        entry = self._live(session_id, self._clock())
        if entry is None:
            return
        results = entry.results
        if results is None:
            results = entry.results = {}
        results.pop(key, None)
        results[key] = record
        while len(results) > keep:
            del results[next(iter(results))]

    async def begin_turn(
        self,
        session_id: str,
        token: str,
        *,
        lease: float,
        ttl: float,
        key: str | None = None,
        lost: bytes = b"",
        keep: int = 0,
        seen: int = 0,
    ) -> TurnStart:
        """``get_result(key)``; unless it answers, ``acquire`` and ``read`` (``lost`` and
        ``keep`` are not needed: see the module's rules)."""
        if key is not None and (record := self._get_result(session_id, key)) is not None:
            return TurnStart(lease=None, replay=record)
        outcome = self._acquire(session_id, token, lease, ttl)
        if outcome is not Lease.ACQUIRED:
            return TurnStart(lease=outcome)
        entry = self._entries[session_id]
        if entry.state == "suspended":
            _release_entry(entry, self._clock())
            return TurnStart(lease=Lease.BUSY, suspended=True)
        return TurnStart(lease=outcome, session=entry.stored(seen))

    async def finish_turn(
        self,
        session_id: str,
        token: str,
        *,
        run: bytes | None,
        state: str,
        ttl: float,
        key: str | None = None,
        record: bytes = b"",
        keep: int = 0,
        append: bytes = b"",
        base: int = 0,
    ) -> int:
        """``write`` (unless ``run`` is ``None``; with ``append``, that turn added to the
        log instead), ``put_result`` (if ``key``), ``release``, only if ``token`` took the
        lease last (it may have lapsed since); the run's version, or 0, storing nothing,
        if another acquisition took it since (or it was released); -1, storing nothing,
        if the turn to append was cut against another version than the stored one."""
        now = self._clock()
        entry = self._entries.get(session_id)
        if entry is None or entry.lease_token != token:
            return 0
        if entry.lease_expires <= now and self._live(session_id, now) is None:
            return 0  # the lease lapsed and the session expired since
        if run is None and append and entry.version != base:
            return -1  # (not the run the turn was cut against: the caller writes it whole)
        # The same three steps on the entry at hand.
        if run is not None:
            _write_entry(entry, run, state, now + ttl)
        elif append:
            if entry.appended is None:
                entry.appended = []
            entry.appended.append(append)
            entry.version = new_version()
            entry.state = state
            entry.expires = now + ttl
        if key is not None:
            self._put_result(session_id, key, record, keep)
        _release_entry(entry, now)
        return entry.version

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


def _write_entry(entry: _Entry, run: bytes, state: str, expires: float) -> None:
    entry.run = run
    entry.appended = None
    entry.version = new_version()
    entry.state = state
    entry.expires = expires


def _release_entry(entry: _Entry, now: float) -> None:
    entry.lease_token = None
    entry.expires = max(entry.expires, now)  # a released session may expire from now on
