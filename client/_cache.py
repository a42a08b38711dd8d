"""The run cache: record each trial's turns, replay them while the case sends the same.

Rules:

- The cache stores **what the agent did, never a verdict**: for every turn, what was sent
  (a message, or approval decisions) and the redacted decoded run that came back.
  Assertions and judges always run again on the replayed runs.
- A recording's key covers the case id, its dataset row, the trial index, the target's
  identity (URL or local agent, agent name and version from ``/health``) and the evalport
  version (:meth:`RunCache.key`). A new agent version, a new row or another trial index
  therefore misses; editing a case's assertions does not. A session opened with tool
  faults keys its recording by them too (their compact JSON's hash).
- :class:`CachingTarget` wraps a target for one trial. Each ``send``/``decide`` is answered
  from the recording while the inputs match it, in order. At the first input that differs,
  or once the recording is used up, the session goes live: it opens a fresh session on the
  real target, sends the inputs of this session so far again, then continues live. A trial
  is **cached** only when every turn came from the recording.
- A session that went live (or had no recording) is recorded when it closes, unless a
  turn raised: a failed conversation is never stored. ``fresh`` skips reading and still
  records (re-record everything).
- Recordings are JSON files under the cache folder, written atomically; a recording that
  cannot be read counts as a miss and is replaced. ``attach`` is never cached: it reads a
  session that lives elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    Step,
    ToolFault,
    TracePolicy,
    __version__,
    compact_json,
)

from ._target import Session, Target, TargetIdentity, Turn, faults_option


class RecordedTurn(msgspec.Struct, kw_only=True):
    """One input and the accumulated, redacted run it produced."""

    kind: str  # "send" or "decide"
    index: int
    message: str = ""
    decisions: dict[str, Any] | None = None
    run: AgentRun = msgspec.field(default_factory=AgentRun)
    steps: list[Step] = msgspec.field(default_factory=list)


class Recording(msgspec.Struct, kw_only=True):
    """The turns of one trial's session."""

    key: str
    case_id: str
    trial: int
    target: str
    evalport_version: str
    session_id: str | None = None
    turns: list[RecordedTurn] = msgspec.field(default_factory=list)


def _plain(value: Any) -> Any:
    """JSON data of a dataset row (a mapping, a Struct, plain data; else its repr)."""
    if isinstance(value, Mapping):
        value = {str(key): item for key, item in value.items()}
    try:
        return msgspec.to_builtins(value)
    except TypeError:
        return repr(value)


def _decisions(decisions: Mapping[str, ApprovalDecision]) -> dict[str, Any]:
    return {call: msgspec.to_builtins(decision) for call, decision in sorted(decisions.items())}


class RunCache:
    """Recordings in a folder. ``fresh=True`` records without reading."""

    def __init__(self, folder: str | Path, *, fresh: bool = False) -> None:
        self.folder = Path(folder)
        self.fresh = fresh
        self.errors: list[str] = []

    @staticmethod
    def key(
        *, case_id: str, row: Any, trial: int, identity: TargetIdentity, policy: str = ""
    ) -> str:
        """The recording key of one trial. ``policy`` is the trace policy's description:
        recordings hold redacted runs, so a run recorded under ``verbatim()`` must never
        answer a target whose policy is ``safe()``."""
        material = compact_json(
            {
                "case": case_id,
                "row": _plain(row),
                "trial": trial,
                "target": identity.key(),
                "policy": policy,
                "evalport": __version__,
            }
        )
        return hashlib.sha256(material).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def load(self, key: str) -> Recording | None:
        """The recording under ``key``, or ``None`` (a miss, or ``fresh``)."""
        if self.fresh:
            return None
        try:
            data = self.path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            self.errors.append(f"run cache: cannot read {self.path(key)}: {error}")
            return None
        try:
            return msgspec.json.decode(data, type=Recording)
        except msgspec.DecodeError:
            return None

    def store(self, recording: Recording) -> None:
        """Write a recording atomically; a failure is kept in :attr:`errors`."""
        path = self.path(recording.key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(handle, "wb") as file:
                file.write(msgspec.json.encode(recording))
            os.replace(temporary, path)
        except OSError as error:
            self.errors.append(f"run cache: cannot write {path}: {error}")

    def wrap(
        self,
        target: Target,
        *,
        case_id: str,
        row: Any,
        trial: int,
        policy: TracePolicy | None = None,
    ) -> CachingTarget:
        """A target for one trial that replays or records through this cache; ``policy``
        is the target's trace policy (read from ``target.policy`` when not given)."""
        if policy is None:
            policy = getattr(target, "policy", None)
        key = self.key(
            case_id=case_id,
            row=row,
            trial=trial,
            identity=target.identity,
            policy=policy.describe() if isinstance(policy, TracePolicy) else "",
        )
        return CachingTarget(target, self, key, case_id=case_id, trial=trial)


class CachingTarget:
    """A :class:`Target` for one trial: replays the recording, records live turns."""

    def __init__(
        self, inner: Target, cache: RunCache, key: str, *, case_id: str, trial: int
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.key = key
        self.case_id = case_id
        self.trial = trial
        self.sessions: list[CachingSession] = []

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
            self.cache.load(key),
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

    async def _go_live(self) -> Session:
        if self._live is not None:
            return self._live
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

    async def send(self, message: str) -> Turn:
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
                self._owner.cache.store(
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
