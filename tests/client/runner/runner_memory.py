"""A small in-memory target for runner, cache and report tests.

It implements the Target/Session protocols the way a real target does (a fresh session per
open, accumulated runs, close), counts what it is asked, and can be slowed or made to fail.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any

import msgspec
from evalport.client import AssertionResult, TargetIdentity, TrialResult, Turn
from evalport.client._core._results import trial_verdict
from evalport.protocol import AgentRun, Message, Step, ToolExecution, Usage


class MemorySession:
    def __init__(self, owner: MemoryTarget, session_id: str) -> None:
        self.owner = owner
        self._id = session_id
        self._run = AgentRun(status="completed", session_id=session_id)
        self.closed = False

    @property
    def id(self) -> str:
        return self._id

    @property
    def run(self) -> AgentRun:
        return self._run

    async def send(self, message: str) -> Turn:
        owner = self.owner
        owner.sends.append(message)
        owner.active += 1
        owner.peak = max(owner.peak, owner.active)
        try:
            if owner.delay:
                await asyncio.sleep(owner.delay)
            if "boom" in message:
                raise ConnectionError(f"target failed on {message!r}")
            turn_no = self._run.turns + 1
            step = Step(
                id="",
                turn=turn_no,
                index=len(self._run.steps),
                type="final_response",
                output_messages=[Message(role="assistant", content=f"echo: {message}")],
                tool_executions=[
                    ToolExecution(
                        name="lookup",
                        arguments={"q": {"hash": "sha256:0", "bytes": 1, "preview": "x"}},
                    )
                ],
                usage=Usage(input=10, output=5),
            )
            run = msgspec.structs.replace(
                self._run,
                reply=f"echo: {message}",
                turns=turn_no,
                steps=[*self._run.steps, step],
                user_messages=[*self._run.user_messages, message],
            )
            run.sync_tools()
            run.sync_usage()
            self._run = run
            return Turn(index=turn_no, message=message, run=run, steps=[step])
        finally:
            owner.active -= 1

    async def decide(self, decisions: Mapping[str, Any]) -> Turn:
        return await self.send(f"decided {sorted(decisions)}")

    async def refresh(self) -> AgentRun:
        return self._run

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.owner.closed += 1


class MemoryTarget:
    def __init__(self, *, delay: float = 0.0, version: str = "1") -> None:
        self.delay = delay
        self.sends: list[str] = []
        self.opened: list[MemorySession] = []
        self.closed = 0
        self.active = 0
        self.peak = 0
        self._ids = itertools.count(1)
        self._identity = TargetIdentity("local", "tests:memory", "memory-agent", version)

    @property
    def identity(self) -> TargetIdentity:
        return self._identity

    async def open(self, *, case_id=None, description=None, metadata=None) -> MemorySession:
        session = MemorySession(self, f"s{next(self._ids)}")
        self.opened.append(session)
        return session

    async def attach(self, session_id: str) -> MemorySession:
        for session in self.opened:
            if session.id == session_id:
                return session
        raise LookupError(session_id)

    async def aclose(self) -> None:
        pass


class SimpleCase(msgspec.Struct):
    id: str
    messages: list[str]
    tags: list[str] = []
    description: str = ""
    row: Any = None
    timeout: float | None = None
    expect: str = "echo"


async def simple_trial(
    case: SimpleCase, target, *, trial=0, judge=None, strict=False, timeout=None
):
    """A minimal trial function: send each message, assert on the last reply."""
    session = await target.open(case_id=case.id)
    try:
        for message in case.messages:
            await session.send(message)
        passed = case.expect in session.run.reply
        assertions = [AssertionResult(name="contains", score=float(passed), passed=passed)]
        return TrialResult(
            case_id=case.id,
            trial=trial,
            verdict=trial_verdict(assertions),
            assertions=assertions,
            session_id=session.id,
            run=msgspec.to_builtins(session.run),
        )
    finally:
        await session.close()
