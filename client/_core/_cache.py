"""The run cache: record each trial's turns, replay them while the case sends the same.

It stores what the agent did, never a verdict; a failing store never fails a trial.
Rules: see ARCHITECTURE.md, "The run cache".
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from evalport.protocol import TracePolicy, __version__, compact_json

from ._cache_stores import CacheStore, FolderCacheStore
from ._caching import CachingTarget, Recording, SlotMeta
from ._target import Target, TargetIdentity


def _plain(value: Any) -> Any:
    """JSON data of a dataset row (a mapping, a Struct, plain data; else its repr)."""
    if isinstance(value, Mapping):
        value = {str(key): item for key, item in value.items()}
    try:
        return msgspec.to_builtins(value)
    except TypeError:
        return repr(value)


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
    """Recordings in a store: a folder (a path) or any :class:`CacheStore`.
    ``fresh=True`` records without reading; ``dependencies`` are globs of files the
    recordings depend on (``cache-dependencies``)."""

    def __init__(
        self,
        store: str | Path | CacheStore,
        *,
        fresh: bool = False,
        dependencies: Sequence[str] = (),
    ) -> None:
        self.store: CacheStore = FolderCacheStore(store) if isinstance(store, str | Path) else store
        self.fresh = fresh
        self.dependencies = files_fingerprint(dependency_files(dependencies))
        self.declared = bool(dependencies)
        """Whether ``cache-dependencies`` were declared (even if no file matches them)."""
        self.errors: list[str] = []
        """Warnings: the store's first failure, after which the store is not used."""
        self.misses: list[str] = []
        """Why trials were not (fully) replayed: ``"<case> [trial N]: <reason>"``."""
        self._failed = False

    def unnoticed(self, identity: TargetIdentity) -> str | None:
        """A warning when a changed agent would replay old recordings unnoticed: an HTTP
        agent whose ``/health`` gives no version (``0``; its code is out of reach) and no
        ``cache-dependencies`` declared."""
        if identity.kind != "http" or identity.agent_version != "0" or self.declared:
            return None
        return (
            f"the agent at {identity.location} has no version in /health, so --cache will not "
            "notice when its code changes and replays old recordings; give the agent a "
            "version (serve --agent-version, or version=...), or declare the files it depends on "
            "(cache-dependencies), or run without --cache"
        )

    @property
    def usable(self) -> bool:
        """Whether the store is still used (it has not failed during this run)."""
        return not self._failed

    async def _get(self, key: str) -> bytes | None:
        if self._failed:
            return None
        try:
            return await self.store.get(key)
        except Exception as error:
            self._fail("read", key, error)
            return None

    async def _put(self, key: str, value: bytes) -> None:
        if self._failed:
            return
        try:
            await self.store.put(key, value)
        except Exception as error:
            self._fail("write", key, error)

    def _fail(self, verb: str, key: str, error: Exception) -> None:
        if self._failed:  # trials in flight together fail together: one warning
            return
        self._failed = True
        self.errors.append(
            f"run cache: cannot {verb} {key} in {self.store!r}: {error or type(error).__name__}; "
            "the rest of the run goes without the cache (trials run live, nothing more is "
            "recorded; verdicts are unaffected)"
        )

    async def aclose(self) -> None:
        """Close the store (a failure to close is a warning too)."""
        try:
            await self.store.aclose()
        except Exception as error:
            self._fail("close", "the store", error)

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

    async def note(self, slot: str, meta: SlotMeta) -> None:
        """Remember what the trial's latest recording was made against."""
        await self._put(f"slots/{slot}", msgspec.json.encode(meta))

    async def explain(self, slot: str, meta: SlotMeta) -> str:
        """Why the trial's recording under ``meta`` was not found."""
        if self.fresh:
            return "--fresh: recordings are not read"
        if self._failed:
            return "the cache store failed earlier in this run"
        data = await self._get(f"slots/{slot}")
        try:
            before = msgspec.json.decode(data or b"", type=SlotMeta)
        except msgspec.DecodeError:
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

    async def load(self, key: str) -> Recording | None:
        """The recording under ``key``, or ``None`` (a miss, or ``fresh``)."""
        if self.fresh:
            return None
        data = await self._get(f"recordings/{key}")
        if data is None:
            return None
        try:
            return msgspec.json.decode(data, type=Recording)
        except msgspec.DecodeError:
            return None

    async def save(self, recording: Recording) -> None:
        """Store a recording; a failure is kept in :attr:`errors`."""
        await self._put(f"recordings/{recording.key}", msgspec.json.encode(recording))

    def wrap(
        self,
        target: Target,
        *,
        case_id: str,
        row: Any,
        trial: int,
        policy: TracePolicy | None = None,
        live: str | None = None,
    ) -> CachingTarget:
        """A target for one trial that replays or records through this cache; ``policy``
        is the target's trace policy (read from ``target.policy`` when not given); ``live``
        says why the trial never replays (it still records)."""
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
        return CachingTarget(
            target, self, key, case_id=case_id, trial=trial, slot=(slot, meta), live=live
        )
