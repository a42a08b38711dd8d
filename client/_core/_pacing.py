"""Target wrappers the runner puts around the target under test: pacing, tracking the
sessions of a trial, attaching to one existing session (never deleted). Rules: see
ARCHITECTURE.md, "Sessions of a trial: pacing, tracking, attaching".
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from evalport.protocol import AgentRun, ApprovalDecision, ContentPart, ToolFault

from ._target import Session, Target, TargetIdentity, Turn, faults_option


class RateLimiter:
    """Hands out evenly spaced start times, ``rps`` per second."""

    def __init__(self, rps: float) -> None:
        if rps <= 0:
            raise ValueError(f"rps must be positive, got {rps}")
        self.interval = 1.0 / rps
        self._next = 0.0

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)


class _WrappedSession:
    """Forwards everything to the wrapped session."""

    def __init__(self, inner: Session) -> None:
        self.inner = inner

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def run(self) -> AgentRun:
        return self.inner.run

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        return await self.inner.send(message, parts=parts)

    async def decide(self, decisions: Mapping[str, ApprovalDecision]) -> Turn:
        return await self.inner.decide(decisions)

    async def refresh(self) -> AgentRun:
        return await self.inner.refresh()

    async def close(self) -> None:
        await self.inner.close()


class _LimitedSession(_WrappedSession):
    def __init__(self, inner: Session, limiter: RateLimiter) -> None:
        super().__init__(inner)
        self.limiter = limiter

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        await self.limiter.acquire()
        return await self.inner.send(message, parts=parts)

    async def decide(self, decisions: Mapping[str, ApprovalDecision]) -> Turn:
        await self.limiter.acquire()
        return await self.inner.decide(decisions)

    async def refresh(self) -> AgentRun:
        await self.limiter.acquire()
        return await self.inner.refresh()


class _WrappedTarget:
    """Base of the target wrappers: same identity as the target they wrap."""

    def __init__(self, inner: Target) -> None:
        self.inner = inner

    @property
    def identity(self) -> TargetIdentity:
        return self.inner.identity

    async def aclose(self) -> None:
        await self.inner.aclose()


class RateLimitedTarget(_WrappedTarget):
    """A target whose requests start at most ``rps`` per second."""

    def __init__(self, inner: Target, rps: float) -> None:
        super().__init__(inner)
        self.limiter = RateLimiter(rps)

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session:
        await self.limiter.acquire()
        session = await self.inner.open(
            case_id=case_id, description=description, metadata=metadata, **faults_option(faults)
        )
        return _LimitedSession(session, self.limiter)

    async def attach(self, session_id: str) -> Session:
        await self.limiter.acquire()
        return _LimitedSession(await self.inner.attach(session_id), self.limiter)


class TrackingTarget(_WrappedTarget):
    """Remembers the sessions of one trial so that they can all be closed."""

    def __init__(self, inner: Target) -> None:
        super().__init__(inner)
        self.sessions: list[Session] = []

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session:
        session = await self.inner.open(
            case_id=case_id, description=description, metadata=metadata, **faults_option(faults)
        )
        self.sessions.append(session)
        return session

    async def attach(self, session_id: str) -> Session:
        """A session opened elsewhere: not tracked, so the runner never deletes it."""
        return await self.inner.attach(session_id)

    async def aclose(self) -> None:
        """The wrapped target belongs to the runner."""


class _KeptSession(_WrappedSession):
    async def close(self) -> None:
        """Never delete a session this run did not open."""


class AttachedTarget(_WrappedTarget):
    """Every ``open`` attaches to the same existing session instead."""

    def __init__(self, inner: Target, session_id: str) -> None:
        super().__init__(inner)
        self.session_id = session_id

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session:
        if faults:
            raise ValueError(
                "tool faults need a new session: an attached session keeps the faults it "
                "was opened with"
            )
        return _KeptSession(await self.inner.attach(self.session_id))

    async def attach(self, session_id: str) -> Session:
        return _KeptSession(await self.inner.attach(session_id))
