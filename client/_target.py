"""What every target offers the evaluation layer: sessions that take turns.

Rules:

- A :class:`Target` opens sessions (``open``) or attaches to existing ones (``attach``);
  :class:`HttpTarget` and :class:`LocalTarget` both implement it, and for the same agent
  they yield the same decoded runs, so everything above this seam runs unchanged on both.
- ``Session.run`` is always the **accumulated**, already **redacted** run: a target applies
  its trace policy to every run before handing it out.
- A :class:`Turn` carries that accumulated run plus the steps of this turn alone, and
  :attr:`Turn.own` is the turn's own slice of the run (Instructor's ``EvalTurn``): an
  :class:`~evalport.protocol.AgentRun` cut from the accumulated one on the client, the
  wire unchanged. It holds this turn's steps, the tool calls, usage and error details
  derived from them, the events and pending approvals numbered with the turn, its
  message as the only user message, and the reply, status and stop signal of the run it
  was cut from; ``turns``
  keeps the turn's number (so ``own.steps_of_turn(own.turns)`` is its steps), and the
  run's error text only when the turn is the run's latest. Every run assertion and
  judge accepts it: ``ctx.check(MaxSteps(3), turn.own)``.
- Async first. ``identity`` names what answers (URL or local agent, agent name and
  version) for reports and the run cache.
- ``open(faults=[ToolFault(...)])`` opens a session whose tool calls get those faults
  injected (:mod:`evalport.protocol.runtime._faults`). A target that cannot honour them raises
  before creating the session; wrappers pass ``faults`` on only when there are some, so
  targets written before it keep working.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import msgspec
from evalport.protocol import AgentRun, ApprovalDecision, ContentPart, Step, ToolFault


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

    def key(self) -> str:
        """A stable string for cache keys."""
        key = f"{self.kind}|{self.location}|{self.agent_name}|{self.agent_version}"
        return f"{key}|{self.source}" if self.source else key


@dataclass(frozen=True, slots=True)
class Turn:
    """The result of one ``send``: this turn's index, message, reply and steps."""

    index: int
    message: str
    run: AgentRun
    steps: list[Step] = field(default_factory=list)

    @property
    def reply(self) -> str:
        return self.run.reply

    @property
    def own(self) -> AgentRun:
        """This turn's own slice of the run (see the module rules)."""
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
