"""One exception tree: each error class is defined once and the same class everywhere."""

from __future__ import annotations

import asyncio

import evalport.client as client
import evalport.protocol as protocol
import evalport.protocol.runtime as runtime
import pytest


def test_each_error_is_one_class_on_every_face() -> None:
    for name in ("SessionBusy", "SessionSuspended", "NotSuspended"):
        assert getattr(client, name) is getattr(protocol, name) is getattr(runtime, name)
    for name in ("ProtocolError", "TargetError", "SessionNotFound", "TurnTimedOut", "TurnLost"):
        assert getattr(client, name) is getattr(protocol, name)
    assert issubclass(client.ProtocolError, client.TargetError)
    assert issubclass(client.ProtocolError, ValueError)  # as the wire's decoder raised it
    assert issubclass(client.SessionBusy, client.SessionConflict)
    assert issubclass(runtime.SessionClosed, client.SessionNotFound)
    # The session's own errors join the tree where they mean the same.
    assert runtime.TurnTimedOut is client.TurnTimedOut  # the runtime raises it itself
    assert issubclass(runtime.TurnTimedOut, TimeoutError)
    with pytest.warns(DeprecationWarning, match="use TurnTimedOut"):
        assert runtime.TurnTimeout is client.TurnTimedOut  # the name until the next release
    assert issubclass(runtime.DecisionError, client.RequestRejected)
    assert issubclass(runtime.DecisionError, ValueError)


async def test_a_busy_session_raises_the_class_the_runtime_raises() -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(message: str, history: object, ctx: runtime.TurnContext) -> str:
        started.set()
        await release.wait()
        return "done"

    async with client.LocalTarget(slow) as target:
        session = await target.open()
        first = asyncio.create_task(session.send("one"))
        await started.wait()
        with pytest.raises(client.SessionBusy) as caught:
            await session.send("two")
        assert type(caught.value) is runtime.SessionBusy
        assert caught.value.problem_type == protocol.ProblemType.SESSION_BUSY
        release.set()
        await first


def test_the_session_conflicts_are_still_runtime_errors() -> None:
    """``except RuntimeError`` around AgentSession calls caught them before the tree was one."""
    for kind in (
        runtime.SessionBusy,
        runtime.SessionSuspended,
        runtime.NotSuspended,
        runtime.SessionClosed,
    ):
        assert issubclass(kind, RuntimeError), kind
        assert issubclass(kind, client.TargetError), kind
