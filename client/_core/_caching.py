"""A trial through the run cache: replay the recording while the inputs match, then live.

A failed conversation is never recorded. Rules: see ARCHITECTURE.md, "The run cache".
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec
from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    ContentPart,
    Step,
    ToolFault,
    __version__,
    compact_json,
)

from ._target import Session, Target, TargetIdentity, Turn, faults_option

NEVER_RECORDED = "sends images or files, which are never recorded"


class RecordedTurn(msgspec.Struct, kw_only=True):
    """One input and the accumulated, redacted run it produced."""

    kind: str  # "send" or "decide"
    index: int
    message: str = ""
    decisions: dict[str, Any] | None = None
    run: AgentRun = msgspec.field(default_factory=AgentRun)
    steps: list[Step] = msgspec.field(default_factory=list)


class SlotMeta(msgspec.Struct, kw_only=True):
    """What a trial's latest recording was made against (to explain a later miss)."""

    key: str
    agent_name: str
    agent_version: str
    agent_source: str = ""
    dependencies: str = ""
    evalport: str = ""


class Recording(msgspec.Struct, kw_only=True):
    """The turns of one trial's session."""

    key: str
    case_id: str
    trial: int
    target: str
    evalport_version: str
    session_id: str | None = None
    turns: list[RecordedTurn] = msgspec.field(default_factory=list)


class Recordings(Protocol):
    """What a caching target uses of its :class:`RunCache`."""

    fresh: bool
    misses: list[str]

    async def load(self, key: str) -> Recording | None: ...

    async def save(self, recording: Recording) -> None: ...

    async def note(self, slot: str, meta: SlotMeta) -> None: ...

    async def explain(self, slot: str, meta: SlotMeta) -> str: ...


def _decisions(decisions: Mapping[str, ApprovalDecision]) -> dict[str, Any]:
    return {call: msgspec.to_builtins(decision) for call, decision in sorted(decisions.items())}


class CachingTarget:
    """A :class:`Target` for one trial: replays the recording, records live turns."""

    def __init__(
        self,
        inner: Target,
        cache: Recordings,
        key: str,
        *,
        case_id: str,
        trial: int,
        slot: tuple[str, SlotMeta] | None = None,
        live: str | None = None,
    ) -> None:
        self.inner = inner
        self.live = live
        """Why this trial never replays (it reads what no recording holds), or ``None``."""
        self.cache = cache
        self.key = key
        self.case_id = case_id
        self.trial = trial
        self.slot = slot
        self.sessions: list[CachingSession] = []
        self._missed: int | None = None  # where this trial's reason is in cache.misses

    def missed(self, reason: str, *, overrides: bool = False) -> None:
        """Note why this trial was not replayed: its first reason, unless a later one
        ``overrides`` it (a reason that holds on every run, whatever came first)."""
        line = f"{self.case_id} [trial {self.trial}]: {reason}"
        if self._missed is None:
            self._missed = len(self.cache.misses)
            self.cache.misses.append(line)
        elif overrides:
            self.cache.misses[self._missed] = line

    @property
    def identity(self) -> TargetIdentity:
        return self.inner.identity

    @property
    def cached(self) -> bool:
        """Every turn of every session of this trial came from the recording."""
        return bool(self.sessions) and all(session.cached for session in self.sessions)

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session:
        # A case that opens several sessions gets one recording per session.
        key = self.key if not self.sessions else f"{self.key}-{len(self.sessions)}"
        if faults:  # other faults, another recording
            key = f"{key}-{hashlib.sha256(compact_json(list(faults))).hexdigest()[:16]}"
        session = CachingSession(
            self,
            key,
            None if self.live else await self.cache.load(key),
            {
                "case_id": case_id,
                "description": description,
                "metadata": metadata,
                **faults_option(faults),
            },
        )
        self.sessions.append(session)
        return session

    async def attach(self, session_id: str) -> Session:
        return await self.inner.attach(session_id)

    async def aclose(self) -> None:
        """The wrapped target belongs to the caller; nothing to close here."""


class CachingSession:
    """One session: replaying while the inputs match, live after that."""

    def __init__(
        self,
        owner: CachingTarget,
        key: str,
        recording: Recording | None,
        open_kwargs: dict[str, Any],
    ) -> None:
        self._owner = owner
        self._key = key
        self._recording = recording
        self._open_kwargs = open_kwargs
        self._done: list[RecordedTurn] = []
        self._live: Session | None = None
        self._broken = False
        self._closed = False

    @property
    def cached(self) -> bool:
        return self._live is None and bool(self._done)

    @property
    def id(self) -> str:
        if self._live is not None:
            return self._live.id
        recorded = self._recording.session_id if self._recording else None
        return f"cached:{recorded or self._key[:12]}"

    @property
    def run(self) -> AgentRun:
        if self._live is not None:
            return self._live.run
        return self._done[-1].run if self._done else AgentRun()

    def _replay(self, kind: str, message: str, decisions: dict[str, Any] | None) -> Turn | None:
        if self._live is not None or self._recording is None:
            return None
        position = len(self._done)
        if position >= len(self._recording.turns):
            return None
        recorded = self._recording.turns[position]
        if (recorded.kind, recorded.message, recorded.decisions) != (kind, message, decisions):
            return None
        self._done.append(recorded)
        return Turn(index=recorded.index, message=message, run=recorded.run, steps=recorded.steps)

    async def _why_live(self) -> str:
        owner = self._owner
        if owner.live:
            return owner.live
        if self._recording is None:
            if owner.slot is None or self._key != owner.key:
                return "--fresh: recordings are not read" if owner.cache.fresh else "no recording"
            return await owner.cache.explain(*owner.slot)
        turns = len(self._recording.turns)
        if len(self._done) >= turns:
            return f"the recording ends after {turns} turn(s) and the case sent more"
        return f"turn {len(self._done) + 1} sent another input than the recording"

    async def _go_live(self) -> Session:
        if self._live is not None:
            return self._live
        self._owner.missed(await self._why_live())
        session = await self._owner.inner.open(**self._open_kwargs)
        self._live = session
        replayed, self._done = self._done, []
        for recorded in replayed:  # bring the fresh session to the same point, live
            if recorded.kind == "send":
                turn = await session.send(recorded.message)
            else:
                decisions = msgspec.convert(recorded.decisions, dict[str, ApprovalDecision])
                turn = await session.decide(decisions)
            self._remember(recorded.kind, recorded.message, recorded.decisions, turn)
        return session

    def _remember(self, kind: str, message: str, decisions: Any, turn: Turn) -> None:
        self._done.append(
            RecordedTurn(
                kind=kind,
                index=turn.index,
                message=message,
                decisions=decisions,
                run=turn.run,
                steps=list(turn.steps),
            )
        )

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        if parts:  # never recorded: a recording would have to keep the bytes to replay them
            self._broken = True
            self._owner.missed(NEVER_RECORDED, overrides=True)
            return await (await self._go_live()).send(message, parts=parts)
        replayed = self._replay("send", message, None)
        if replayed is not None:
            return replayed
        try:
            session = await self._go_live()
            turn = await session.send(message)
        except BaseException:
            self._broken = True
            raise
        self._remember("send", message, None, turn)
        return turn

    async def decide(self, decisions: Mapping[str, ApprovalDecision]) -> Turn:
        plain = _decisions(decisions)
        replayed = self._replay("decide", "", plain)
        if replayed is not None:
            return replayed
        try:
            session = await self._go_live()
            turn = await session.decide(decisions)
        except BaseException:
            self._broken = True
            raise
        self._remember("decide", "", plain, turn)
        return turn

    async def refresh(self) -> AgentRun:
        if self._live is not None:
            return await self._live.refresh()
        return self.run

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        live, self._live = self._live, None
        if live is None:
            return
        try:
            await live.close()
        finally:
            if not self._broken and self._done:
                slot = self._owner.slot
                if slot is not None and self._key == self._owner.key:
                    await self._owner.cache.note(*slot)
                await self._owner.cache.save(
                    Recording(
                        key=self._key,
                        case_id=self._owner.case_id,
                        trial=self._owner.trial,
                        target=self._owner.identity.key(),
                        evalport_version=__version__,
                        session_id=live.id,
                        turns=self._done,
                    )
                )
            self._live = live  # keep answering ``id``/``run`` after close
