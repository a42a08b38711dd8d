"""The run cache: record each trial's turns, replay them while the case sends the same.

Rules:

- The cache stores **what the agent did, never a verdict**: for every turn, what was sent
  (a message, or approval decisions) and the redacted decoded run that came back.
  Assertions and judges always run again on the replayed runs.
- A recording's key covers the case id, its dataset row, the trial index, the target's
  identity (URL or local agent, agent name and version from ``/health``; for a local
  agent also a fingerprint of its source files), the declared dependencies (the files
  matched by the ``cache-dependencies`` globs: their names and contents) and the evalport
  version (:meth:`RunCache.key`). A new agent version, an edited local agent, a changed
  dependency, a new row or another trial index therefore misses and records again;
  editing a case's assertions does not. A session opened with tool faults keys its
  recording by them too (their compact JSON's hash).
- Each trial also has a *slot* (case, row, trial, policy, target location) that points
  at its latest recording and what it was recorded against; a miss compares with it to
  say why the recording was not reused (:attr:`RunCache.misses`: the agent changed, a
  dependency changed, the case sent another input, ``--fresh``...).
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
  session that lives elsewhere. A session that sends images or files (content parts)
  goes live and is never recorded: its bytes never reach a cache file.
"""

from __future__ import annotations

import glob
import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from evalport.protocol import (
    AgentRun,
    ApprovalDecision,
    ContentPart,
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


def files_fingerprint(files: Iterable[tuple[str, str | Path]]) -> str:
    """A short hash of ``(name, path)`` pairs: each name and its file's content ("" for
    none). A file that cannot be read counts by its name and the error."""
    pairs = sorted((str(name), str(path)) for name, path in files)
    if not pairs:
        return ""
    hasher = hashlib.sha256()
    for name, path in pairs:
        hasher.update(name.encode() + b"\0")
        try:
            hasher.update(Path(path).read_bytes())
        except OSError as error:
            hasher.update(f"unreadable: {error.strerror}".encode())
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


def _static_root(pattern: str) -> Path:
    parts = Path(pattern).parts
    for index, part in enumerate(parts):
        if any(char in part for char in "*?["):
            return Path(*parts[:index]) if index else Path()
    return Path(pattern).parent


def dependency_files(patterns: Sequence[str]) -> list[tuple[str, str]]:
    """The files the ``cache-dependencies`` globs match (``**`` spans folders), each named
    by its path below the glob's fixed part."""
    found: dict[str, tuple[str, str]] = {}
    for pattern in patterns:
        root = _static_root(pattern)
        for name in glob.glob(pattern, recursive=True):
            if os.path.isfile(name):
                label = os.path.relpath(name, root) if str(root) else name
                found[os.path.abspath(name)] = (label, name)
    return list(found.values())


class RunCache:
    """Recordings in a folder. ``fresh=True`` records without reading; ``dependencies``
    are globs of files the recordings depend on (``cache-dependencies``)."""

    def __init__(
        self, folder: str | Path, *, fresh: bool = False, dependencies: Sequence[str] = ()
    ) -> None:
        self.folder = Path(folder)
        self.fresh = fresh
        self.dependencies = files_fingerprint(dependency_files(dependencies))
        self.errors: list[str] = []
        self.misses: list[str] = []
        """Why trials were not (fully) replayed: ``"<case> [trial N]: <reason>"``."""

    @staticmethod
    def key(
        *,
        case_id: str,
        row: Any,
        trial: int,
        identity: TargetIdentity,
        policy: str = "",
        dependencies: str = "",
    ) -> str:
        """The recording key of one trial. ``policy`` is the trace policy's description:
        recordings hold redacted runs, so a run recorded under ``verbatim()`` must never
        answer a target whose policy is ``safe()``. ``dependencies`` is the fingerprint
        of the declared dependencies."""
        material = compact_json(
            {
                "case": case_id,
                "row": _plain(row),
                "trial": trial,
                "target": identity.key(),
                "policy": policy,
                "dependencies": dependencies,
                "evalport": __version__,
            }
        )
        return hashlib.sha256(material).hexdigest()

    @staticmethod
    def slot(*, case_id: str, row: Any, trial: int, identity: TargetIdentity, policy: str) -> str:
        """Where the latest recording of one trial is noted, whatever the agent's version."""
        material = compact_json(
            {
                "case": case_id,
                "row": _plain(row),
                "trial": trial,
                "target": f"{identity.kind}|{identity.location}",
                "policy": policy,
            }
        )
        return hashlib.sha256(material).hexdigest()

    def _slot_path(self, slot: str) -> Path:
        return self.folder / "slots" / f"{slot}.json"

    def note(self, slot: str, meta: SlotMeta) -> None:
        """Remember what the trial's latest recording was made against."""
        path = self._slot_path(slot)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(msgspec.json.encode(meta))
        except OSError as error:
            self.errors.append(f"run cache: cannot write {path}: {error}")

    def explain(self, slot: str, meta: SlotMeta) -> str:
        """Why the trial's recording under ``meta`` was not found."""
        if self.fresh:
            return "--fresh: recordings are not read"
        try:
            before = msgspec.json.decode(self._slot_path(slot).read_bytes(), type=SlotMeta)
        except (OSError, msgspec.DecodeError):
            return "no recording of this trial yet"
        changes = []
        if (before.agent_name, before.agent_version) != (meta.agent_name, meta.agent_version):
            changes.append(
                f"the agent changed ({before.agent_name} {before.agent_version} -> "
                f"{meta.agent_name} {meta.agent_version})"
            )
        elif before.agent_source != meta.agent_source:
            changes.append("the agent's source files changed")
        if before.dependencies != meta.dependencies:
            changes.append("a file matched by cache-dependencies changed")
        if before.evalport != meta.evalport:
            changes.append(f"evalport changed ({before.evalport} -> {meta.evalport})")
        return "; ".join(changes) or "its recording is gone or unreadable"

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
        identity = target.identity
        described = policy.describe() if isinstance(policy, TracePolicy) else ""
        key = self.key(
            case_id=case_id,
            row=row,
            trial=trial,
            identity=identity,
            policy=described,
            dependencies=self.dependencies,
        )
        slot = self.slot(case_id=case_id, row=row, trial=trial, identity=identity, policy=described)
        meta = SlotMeta(
            key=key,
            agent_name=identity.agent_name,
            agent_version=identity.agent_version,
            agent_source=identity.source,
            dependencies=self.dependencies,
            evalport=__version__,
        )
        return CachingTarget(target, self, key, case_id=case_id, trial=trial, slot=(slot, meta))


class CachingTarget:
    """A :class:`Target` for one trial: replays the recording, records live turns."""

    def __init__(
        self,
        inner: Target,
        cache: RunCache,
        key: str,
        *,
        case_id: str,
        trial: int,
        slot: tuple[str, SlotMeta] | None = None,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.key = key
        self.case_id = case_id
        self.trial = trial
        self.slot = slot
        self.sessions: list[CachingSession] = []
        self._missed = False

    def missed(self, reason: str) -> None:
        """Note why this trial was not replayed (its first reason only)."""
        if not self._missed:
            self._missed = True
            self.cache.misses.append(f"{self.case_id} [trial {self.trial}]: {reason}")

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

    def _why_live(self) -> str:
        owner = self._owner
        if self._recording is None:
            if owner.slot is None or self._key != owner.key:
                return "--fresh: recordings are not read" if owner.cache.fresh else "no recording"
            return owner.cache.explain(*owner.slot)
        turns = len(self._recording.turns)
        if len(self._done) >= turns:
            return f"the recording ends after {turns} turn(s) and the case sent more"
        return f"turn {len(self._done) + 1} sent another input than the recording"

    async def _go_live(self) -> Session:
        if self._live is not None:
            return self._live
        self._owner.missed(self._why_live())
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
                    self._owner.cache.note(*slot)
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
