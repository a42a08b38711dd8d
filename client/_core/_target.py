"""What every target offers the evaluation layer: sessions that take turns.

``Session.run`` is always the accumulated, already redacted run. Rules: see
ARCHITECTURE.md, "The target contract".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import FrozenInstanceError, dataclass
from types import TracebackType
from typing import Any, Final, Protocol, Self, runtime_checkable

import msgspec
from evalport.protocol import AgentRun, ApprovalDecision, ContentPart, Step, ToolFault

from ._results import TurnTiming


def faults_option(faults: Sequence[ToolFault] | None) -> dict[str, Any]:
    """``{"faults": faults}`` when there are faults, else ``{}``: what a wrapper passes on
    to the target it wraps, so that a target written before faults existed still opens
    sessions without them."""
    return {"faults": faults} if faults else {}


@dataclass(frozen=True, slots=True)
class TargetIdentity:
    """Who answers a target's sessions; part of the run-cache key and of provenance."""

    kind: str  # "http" or "local"
    location: str  # base URL, or "module:attr" / the agent's qualified name
    agent_name: str = "agent"
    agent_version: str = "0"
    source: str = ""  # a local agent's source fingerprint (its module files' hash)
    tools: tuple[str, ...] | None = None
    """The tools the agent declares (``/health``'s ``tools``), or ``None``: it says nothing.
    Not part of the key: a case naming another tool is flagged, never keyed by it."""

    def key(self) -> str:
        """A stable string for cache keys."""
        key = f"{self.kind}|{self.location}|{self.agent_name}|{self.agent_version}"
        return f"{key}|{self.source}" if self.source else key


_FIELDS: Final = AgentRun.__struct_fields__


class RunAt:
    """A run as of one moment, built when first read.

    ``head`` is the run of that moment: its whole-sent fields are that moment's, but its
    lists may have grown since (a long session's turns share its lists, see
    :func:`~evalport.protocol.apply_delta` with ``grow=True``), so ``counts`` records
    how many items each held then. Without ``counts`` the head is the run itself."""

    __slots__ = ("_run", "counts", "head")

    def __init__(self, head: AgentRun, counts: dict[str, int] | None = None) -> None:
        self.head = head
        self.counts = counts
        self._run = head if counts is None else None

    @classmethod
    def growing(cls, head: AgentRun) -> RunAt:
        """The moment of ``head`` whose lists will grow after it."""
        counts = {}
        for name in _FIELDS:
            items = getattr(head, name)
            if isinstance(items, list):
                counts[name] = len(items)
        return cls(head, counts)

    @property
    def run(self) -> AgentRun:
        if self._run is None:
            head, counts = self.head, self.counts or {}
            self._run = msgspec.structs.replace(
                head, **{name: getattr(head, name)[:count] for name, count in counts.items()}
            )
        return self._run


class Turn:
    """The result of one ``send``: this turn's index, message, reply and steps, and
    ``run``, the accumulated run as of this turn (read-only, compared field by field).

    ``run`` is built on first read: a later turn never changes it, and a turn of a long
    session costs what it gained (:class:`RunAt`)."""

    __slots__ = ("_at", "index", "message", "steps", "timing")
    __match_args__ = ("index", "message", "run", "steps")
    __hash__ = None  # type: ignore[assignment]

    index: int
    message: str
    steps: list[Step]
    timing: TurnTiming | None
    _at: RunAt

    def __init__(
        self,
        index: int,
        message: str,
        run: AgentRun,
        steps: list[Step] | None = None,
        timing: TurnTiming | None = None,
    ) -> None:
        _fill(self, index, message, RunAt(run), [] if steps is None else steps, timing)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(
        self,
    ) -> tuple[type[Turn], tuple[int, str, AgentRun, list[Step], TurnTiming | None]]:
        return (Turn, (self.index, self.message, self.run, self.steps, self.timing))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Turn):
            return NotImplemented
        return (self.index, self.message, self.steps, self.run) == (
            other.index,
            other.message,
            other.steps,
            other.run,
        )

    def __repr__(self) -> str:
        return (
            f"Turn(index={self.index!r}, message={self.message!r}, run={self.run!r}, "
            f"steps={self.steps!r})"
        )

    @property
    def run(self) -> AgentRun:
        """The accumulated run as of this turn."""
        return self._at.run

    @property
    def reply(self) -> str:
        return self._at.head.reply

    @property
    def own(self) -> AgentRun:
        """This turn's own slice of the run (see ARCHITECTURE.md, "The target contract")."""
        run = self.run
        own = msgspec.structs.replace(
            run,
            steps=list(self.steps),
            user_messages=[self.message],
            turns=self.index,
            events=[event for event in run.events if event.turn == self.index],
            pending_approvals=[item for item in run.pending_approvals if item.turn == self.index],
            pending_interrupts=[item for item in run.pending_interrupts if item.turn == self.index],
            interrupts=[item for item in run.interrupts if item.turn == self.index],
            errors=run.errors if self.index == run.turns else "",
            error_details=[error for step in self.steps for error in step.errors],
        )
        own.sync_tools()
        own.sync_usage()
        return own


def turn_at(
    index: int, message: str, at: RunAt, steps: list[Step], timing: TurnTiming | None = None
) -> Turn:
    """The turn whose run is that of moment ``at`` (built when first read)."""
    turn = object.__new__(Turn)
    _fill(turn, index, message, at, steps, timing)
    return turn


def moment_of(turn: Turn) -> RunAt:
    """The moment a turn's run is of: its ``head`` gives the run's whole fields (reply,
    status, pending approvals...) without building the run."""
    return turn._at


def _fill(
    turn: Turn,
    index: int,
    message: str,
    at: RunAt,
    steps: list[Step],
    timing: TurnTiming | None,
) -> None:
    object.__setattr__(turn, "index", index)
    object.__setattr__(turn, "message", message)
    object.__setattr__(turn, "_at", at)
    object.__setattr__(turn, "steps", steps)
    object.__setattr__(turn, "timing", timing)


@runtime_checkable
class Session(Protocol):
    """One conversation with the agent."""

    @property
    def id(self) -> str: ...

    @property
    def run(self) -> AgentRun: ...

    async def send(self, message: str, *, parts: Sequence[ContentPart] = ()) -> Turn:
        """Send one user message (and its content ``parts``: images, files; a server
        without the ``content-parts`` capability raises :class:`ContentPartsUnsupported`
        before anything is sent); returns once the agent finished (or suspended)."""
        ...

    async def decide(self, decisions: Mapping[str, ApprovalDecision]) -> Turn:
        """Answer pending approvals (call id -> decision); resumes the suspended turn."""
        ...

    async def refresh(self) -> AgentRun:
        """Read the session's accumulated run again (attach)."""
        ...

    async def close(self) -> None:
        """Delete the session; closing twice is harmless."""
        ...


@runtime_checkable
class Target(Protocol):
    """The agent under test."""

    @property
    def identity(self) -> TargetIdentity: ...

    async def open(
        self,
        *,
        case_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        faults: Sequence[ToolFault] | None = None,
    ) -> Session: ...

    async def attach(self, session_id: str) -> Session: ...

    async def aclose(self) -> None: ...


class ClosingTarget:
    """``async with target:`` closes it with ``aclose()`` (as httpx's transports do); the
    base of every target here."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()
