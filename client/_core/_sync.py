"""A blocking facade over any target, for scripts and notebooks without an event loop; it
refuses to run inside a running one. Rules: see ARCHITECTURE.md, "Sessions of a trial:
pacing, tracking, attaching".
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, TypeVar

from evalport.protocol import AgentRun, ContentPart, ToolFault

from ._target import Session, Target, TargetIdentity, Turn, faults_option
from ._turns import DecisionLike, decisions_of
from .targets import HttpTarget

T = TypeVar("T")


class Blocking(Protocol):
    """Runs a coroutine to its end and returns its result (``SyncTarget``'s loop does)."""

    def __call__(self, coroutine: Coroutine[Any, Any, T]) -> T: ...


class SyncTarget:
    """Blocking calls on an async :class:`~evalport.client.Target`."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._runner: asyncio.Runner | None = asyncio.Runner()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            coroutine.close()
            raise RuntimeError("this SyncTarget is closed")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._runner.run(coroutine)
        coroutine.close()
        raise RuntimeError(
            "SyncTarget cannot block inside a running event loop; await the async target "
            "(SyncTarget.target) instead"
        )

    @property
    def target(self) -> Target:
        """The async target underneath."""
        return self._target

    @property
    def identity(self) -> TargetIdentity:
        return self._target.identity

    def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> SyncSession:
        opened = self._target.open(
            case_id=case_id, description=description, metadata=metadata, **faults_option(faults)
        )
        session = self._call(opened)
        return SyncSession(self._call, session)

    def attach(self, session_id: str) -> SyncSession:
        return SyncSession(self._call, self._call(self._target.attach(session_id)))

    def close(self) -> None:
        """Close the target and the private event loop; closing twice is harmless."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            runner.run(self._target.aclose())
        finally:
            runner.close()

    def __enter__(self) -> SyncTarget:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


class SyncSession:
    """Blocking calls on one session of a :class:`SyncTarget` (whose ``call`` runs each
    coroutine on the target's loop)."""

    def __init__(self, call: Blocking, session: Session) -> None:
        self._call = call
        self._session = session

    @property
    def id(self) -> str:
        return self._session.id

    @property
    def run(self) -> AgentRun:
        return self._session.run

    @property
    def session(self) -> Session:
        """The async session underneath."""
        return self._session

    def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        return self._call(self._session.send(message, parts=parts))

    def decide(self, decisions: Mapping[str, DecisionLike]) -> Turn:
        return self._call(self._session.decide(decisions_of(decisions)))

    def refresh(self) -> AgentRun:
        return self._call(self._session.refresh())

    def close(self) -> None:
        self._call(self._session.close())

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def connect(base_url: str, **options: Any) -> SyncTarget:
    """A blocking :class:`~evalport.client.HttpTarget` (same keyword options)."""
    return SyncTarget(HttpTarget(base_url, **options))
