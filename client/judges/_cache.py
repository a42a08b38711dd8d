"""A judge cache on disk: the same question to the same model is paid for once.

Rule: only verdicts are cached, under a key of everything that changes the answer. See
ARCHITECTURE.md, "The judge cache".
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from evalport.protocol import compact_json

from ._base import JudgeError, JudgeUsage, JudgeVerdict


def cache_key(model: str, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]) -> str:
    """The cache key of one judge call (hex SHA-256)."""
    payload = {"v": 1, "model": model, "messages": list(messages), "params": dict(params)}
    return hashlib.sha256(compact_json(payload)).hexdigest()


class JudgeCache:
    """Verdicts on disk under ``directory`` (created on first write)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.hits = 0
        self.misses = 0

    @classmethod
    def of(cls, cache: JudgeCache | str | os.PathLike[str] | None) -> JudgeCache | None:
        """``cache`` as a cache: a folder opens one, ``None`` is none."""
        return cache if isinstance(cache, JudgeCache) or cache is None else cls(cache)

    async def verdict(self, key: str, ask: Callable[[], Awaitable[JudgeVerdict]]) -> JudgeVerdict:
        """The verdict kept under ``key``, else ``ask()``'s, kept (an error is not)."""
        verdict = self.get(key)
        if verdict is None:
            verdict = await ask()
            self.put(key, verdict)
        return verdict

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> JudgeVerdict | None:
        try:
            verdict = msgspec.json.decode(self._path(key).read_bytes(), type=JudgeVerdict)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError, ValueError, JudgeError):
            self.misses += 1
            return None
        self.hits += 1
        verdict.cached = True
        verdict.usage = JudgeUsage()
        return verdict

    def put(self, key: str, verdict: JudgeVerdict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(msgspec.json.encode(verdict))
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
