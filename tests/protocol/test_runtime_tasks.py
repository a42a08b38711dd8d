"""Every turn runs in a task of its own: task-bound scopes inside agents behave as in any task.

An agent may enter an anyio task group or an ``asyncio.timeout`` before it first waits;
both bind to the current task, so the turn must already be in its own task then, and a
timeout that fires inside the agent must cancel the agent, never the caller of ``send``.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys

import anyio
import pytest
from evalport.protocol import RunStatus
from evalport.protocol.runtime import (
    AgentSession,
    SessionBusy,
    SessionClosed,
    SessionInfo,
    TurnContext,
    TurnTimedOut,
)

marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="caller")


async def task_group_agent(message: str, history: list[object], ctx: TurnContext) -> str:
    parts: list[str] = []

    async def part(text: str) -> None:
        await anyio.sleep(0)
        parts.append(text)

    async with anyio.create_task_group() as group:
        group.start_soon(part, "a")
        group.start_soon(part, "b")
    return "+".join(sorted(parts))


async def own_timeout_agent(message: str, history: list[object], ctx: TurnContext) -> str:
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(5)
    except TimeoutError:
        return "gave up on my own"
    return "slept"


def task_reporting_agent(seen: list[asyncio.Task[object] | None]) -> object:
    async def agent(message: str, history: list[object], ctx: TurnContext) -> str:
        seen.append(asyncio.current_task())
        marker.set("agent")  # must not leak into the caller's context
        return f"{marker.get()} saw {message}"

    return agent


async def open_session(agent: object) -> AgentSession:
    return await AgentSession.open(agent, SessionInfo(session_id="tasks-1"))


async def test_an_anyio_task_group_in_a_plain_async_agent_completes_the_turn() -> None:
    session = await open_session(task_group_agent)
    for _ in range(2):
        run = await session.send("go", timeout=5)
        assert run.status == RunStatus.COMPLETED, run.errors
        assert run.reply == "a+b"
    await session.close()


async def test_a_timeout_inside_the_agent_cancels_the_agent_not_the_caller() -> None:
    session = await open_session(own_timeout_agent)
    run = await session.send("go", timeout=5)
    assert (run.status, run.reply) == (RunStatus.COMPLETED, "gave up on my own")
    # the caller was not cancelled: it keeps running and awaiting
    await asyncio.sleep(0.02)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    await session.close()


async def test_the_agent_runs_in_its_own_task_with_a_copy_of_the_context() -> None:
    seen: list[asyncio.Task[object] | None] = []
    session = await open_session(task_reporting_agent(seen))
    marker.set("caller")
    first = await session.send("one")
    second = await session.send("two")
    assert (first.reply, second.reply) == ("agent saw one", "agent saw two")
    caller = asyncio.current_task()
    assert len(seen) == 2 and None not in seen
    assert caller not in seen
    assert seen[0] is not seen[1]  # one task per turn
    assert marker.get() == "caller"
    await session.close()


async def test_wait_follows_a_turn_whose_caller_was_cancelled() -> None:
    go = asyncio.Event()

    async def agent(message: str, history: list[object], ctx: TurnContext) -> str:
        await go.wait()
        return "finished"

    session = await open_session(agent)
    caller = asyncio.create_task(session.send("go", timeout=5))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert session.busy  # the turn goes on
    go.set()
    run = await session.wait(timeout=1)
    assert (run.status, run.reply, session.busy) == (RunStatus.COMPLETED, "finished", False)
    assert (await session.wait()).reply == "finished"  # idle: the run at once
    await session.close()


async def test_wait_times_the_followed_turn_out() -> None:
    async def agent(message: str, history: list[object], ctx: TurnContext) -> str:
        await asyncio.sleep(5)
        return "never"

    session = await open_session(agent)
    caller = asyncio.create_task(session.send("go"))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    with pytest.raises(TurnTimedOut) as raised:
        await session.wait(timeout=0.05)
    assert raised.value.run.status == RunStatus.FAILED
    assert not session.busy
    await session.close()


def test_ids_are_uuid4_and_a_forked_child_draws_other_ones() -> None:
    import os
    import uuid

    from evalport.protocol.runtime._stamps import new_id

    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = pipe.read()
    assert uuid.UUID(theirs).version == 4
    assert theirs != new_id()  # (the child shares no generator state with its parent)


async def test_a_turn_runs_in_a_task_of_its_own() -> None:
    ran: list[asyncio.Task[object] | None] = []

    async def agent(message: str, history: list[object], ctx: TurnContext) -> str:
        ran.append(asyncio.current_task())
        return "ran"

    session = await open_session(agent)
    caller = asyncio.create_task(session.send("go", timeout=5))
    assert (await caller).reply == "ran"
    assert ran[0] is not caller and ran[0] is not None
    await session.close()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager task start needs Python 3.12")
async def test_a_turn_that_never_waits_is_over_before_send_would_wait() -> None:  # pragma: no cover
    ran: list[asyncio.Task[object] | None] = []

    async def agent(message: str, history: list[object], ctx: TurnContext) -> str:
        ran.append(asyncio.current_task())
        return "ran"

    session = await open_session(agent)
    caller = asyncio.create_task(session.send("go", timeout=5))
    await asyncio.sleep(0)  # one pass: the caller's first step ran the whole turn
    assert caller.done() and caller.result().reply == "ran"
    assert ran[0] is not caller and ran[0] is not None
    await session.close()


async def test_anyio_move_on_after_inside_the_agent_cancels_only_its_scope() -> None:
    async def agent(message: str, history: list[object], ctx: TurnContext) -> str:
        with anyio.move_on_after(0.01) as scope:
            await anyio.sleep(5)
        return f"moved on {scope.cancelled_caught}"

    session = await open_session(agent)
    run = await session.send("go", timeout=5)
    assert (run.status, run.reply) == (RunStatus.COMPLETED, "moved on True")
    await session.close()


async def test_start_creates_the_turns_task_at_once_and_its_coroutine_waits_for_it() -> None:
    async def agent(message: str, history: list[object], ctx: TurnContext) -> str:
        await asyncio.sleep(0)  # still running after start() on 3.12+, where it starts eagerly
        return f"ran {message}"

    session = await open_session(agent)
    waiting = session.start("go", timeout=5)
    assert session.busy  # the turn's task exists before anything awaits it
    with pytest.raises(SessionBusy):
        await session.start("again")  # one turn at a time, raised by the coroutine
    assert (await waiting).reply == "ran go"
    assert not session.busy
    await session.close()
    with pytest.raises(SessionClosed):
        await session.start("late")
