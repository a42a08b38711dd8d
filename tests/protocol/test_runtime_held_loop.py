"""The runtime's side of a misbehaving turn (issue 16 items 1 and 3), in process.

An async turn that holds the event loop past its deadline ends as a timeout when it lets
go (its timer could not fire meanwhile), whether it blocks before its first wait or after
one; each of its steps is told to the session's clock. A sync turn that timed out keeps
the session busy until its thread returns.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from evalport.protocol.runtime import AgentSession, SessionBusy, SessionInfo, TurnTimedOut


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


class Clock:
    def __init__(self) -> None:
        self.steps: list[tuple[str, int, float]] = []
        self._started = 0.0
        self._who: tuple[str, int] = ("", 0)

    def step_started(self, session_id: str, turn: int) -> None:
        self._started, self._who = time.monotonic(), (session_id, turn)

    def step_ended(self) -> None:
        self.steps.append((*self._who, time.monotonic() - self._started))


@pytest.mark.parametrize("awaits_first", [False, True], ids=["at-once", "after-a-wait"])
async def test_a_turn_holding_the_loop_past_its_deadline_is_a_timeout(awaits_first: bool) -> None:
    async def agent(message: str, history: object, ctx: object) -> str:
        if awaits_first:
            await asyncio.sleep(0)
        spin(0.3)
        return "done"

    clock = Clock()
    session = await AgentSession.open(agent, SessionInfo(session_id="s"), clock=clock)
    with pytest.raises(TurnTimedOut) as caught:
        await session.send("go", timeout=0.1)
    run = caught.value.run
    assert run.status == "failed" and run.reply == ""
    assert run.stop_signal is not None and run.stop_signal.reason == "time_limit"
    assert [e.type for e in run.error_details] == ["TurnTimeout"]
    assert max(seconds for _, _, seconds in clock.steps) >= 0.3
    assert {(sid, turn) for sid, turn, _ in clock.steps} == {("s", 1)}
    # the session is usable, and a turn within its deadline completes
    assert (await session.send("again", timeout=5)).status == "completed"
    await session.close()


async def test_a_timed_out_sync_turn_keeps_the_session_busy_until_its_thread_returns() -> None:
    release = threading.Event()

    def agent(message: str, history: object, ctx: object) -> str:
        if message == "stuck":
            release.wait(10)
        return message

    session = await AgentSession.open(agent, SessionInfo(session_id="s"))
    with pytest.raises(TurnTimedOut):
        await session.send("stuck", timeout=0.1)
    assert session.busy
    with pytest.raises(SessionBusy, match="thread"):
        await session.send("next", timeout=1)
    release.set()
    for _ in range(100):
        if not session.busy:
            break
        await asyncio.sleep(0.02)
    assert (await session.send("next", timeout=1)).reply == "next"
    await session.close()
