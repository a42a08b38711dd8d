"""Logged conversations as cases: evaluate conversation files, with no agent to call.
Rules: see ARCHITECTURE.md, "Logged conversations".
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import msgspec
from evalport.protocol import AgentRun, ApprovalDecision, ContentPart, ToolFault, TracePolicy

from ._chat_history import ChatHistoryError, run_from_chat
from ._target import Session, TargetIdentity, Turn

_LISTS = ("messages", "items", "input")


class LoggedConversationError(RuntimeError):
    """A logged conversation was asked to do what only a live agent can (``ctx.send``)."""


def conversation_files(pattern: str, base: Path | None) -> list[tuple[str, Path]]:
    """The files ``pattern`` matches, each with its name below the glob's fixed part."""
    full = pattern if base is None or Path(pattern).is_absolute() else str(base / pattern)
    parts = Path(full).parts
    fixed = next((i for i, part in enumerate(parts) if any(char in part for char in "*?[")), None)
    root = Path(*parts[:fixed]) if fixed else Path(full).parent
    found = sorted(Path(name) for name in glob.glob(full, recursive=True) if os.path.isfile(name))
    if not found:
        raise ValueError(f"conversations={pattern!r} matches no file (looked for {full})")
    return [(path.relative_to(root).as_posix(), path) for path in found]


def shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return path.resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def read_conversation(path: Path, policy: TracePolicy | None) -> AgentRun:
    """The run a conversation file records; ``ValueError`` naming the file if it is not one."""
    name = shown(path)
    try:
        data = path.read_bytes()
        if path.suffix in (".jsonl", ".ndjson"):
            lines = [line for line in data.splitlines() if line.strip()]
            document: Any = [msgspec.json.decode(line) for line in lines]
        else:
            document = msgspec.json.decode(data)
    except OSError as error:
        raise ValueError(f"{name}: cannot read it: {error.strerror or error}") from None
    except msgspec.DecodeError as error:
        raise ValueError(f"{name}: not JSON: {error}") from None
    fmt = "auto"
    if isinstance(document, Mapping):
        fmt = document.get("format") or "auto"
        key = next((name for name in _LISTS if name in document), None)
        if key is None:
            raise ValueError(
                f"{name}: an object needs the conversation under one of {', '.join(_LISTS)}"
            )
        document = document[key]
    try:
        return run_from_chat(document, format=fmt, policy=policy)
    except ChatHistoryError as error:
        raise ValueError(f"{name}: {error}") from None


class LoggedSession:
    """The session of one logged conversation: its run is the file's; nothing is sent."""

    def __init__(self, path: Path, run: AgentRun) -> None:
        self.path = path
        self.id = f"logged:{path.name}"
        self.run = run

    def _refuse(self, what: str) -> NoReturn:
        raise LoggedConversationError(
            f"{what}: this case evaluates the logged conversation {shown(self.path)}, and no agent "
            "answers a logged conversation; assert on what it recorded (ctx.run, the "
            "trajectory assertions, judges) or drop conversations= to talk to a target"
        )

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        self._refuse(f"ctx.send({message!r})")

    async def decide(self, decisions: Mapping[str, ApprovalDecision]) -> Turn:
        self._refuse("ctx.decide(...)")

    async def refresh(self) -> AgentRun:
        return self.run

    async def close(self) -> None:
        """Nothing to close."""


class LoggedConversations:
    """The target of a run whose cases all read logged conversations (no agent)."""

    def __init__(self, *, policy: TracePolicy | None = None) -> None:
        self.policy = policy if policy is not None else TracePolicy.safe()
        self._identity = TargetIdentity("logged", "conversation files", "logged", "runs")

    @property
    def identity(self) -> TargetIdentity:
        return self._identity

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session:
        raise LoggedConversationError(
            f"case {case_id!r} talks to an agent, but this run has none: only cases with "
            "conversations= run without --target; give --target URL or --local module:attr"
        )

    async def attach(self, session_id: str) -> Session:
        return await self.open(case_id=session_id)

    async def aclose(self) -> None:
        """Nothing to close."""
