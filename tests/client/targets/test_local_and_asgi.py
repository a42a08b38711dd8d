"""LocalTarget, and HttpTarget against the real adapter in one process (ASGITransport).

The central check: for the same agent and the same script, both targets hand out the
same runs, field by field, ids and timings aside.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import msgspec
import pytest
from evalport.client import (
    HttpTarget,
    LocalTarget,
    NotSuspended,
    RequestRejected,
    Session,
    SessionNotFound,
    SessionSuspended,
    Target,
    Turn,
    TurnTimedOut,
)
from evalport.protocol import ApprovalDecision, TracePolicy, matches_digest
from evalport.protocol.runtime import FRAMEWORK_STATE, TurnContext
from evalport.server import EvalAdapter, Limits
from target_agents import SECRET, SupportAgent, canonical

TOKEN = "asgi-token-0123456789"

Script = Callable[[Session], Awaitable[list[Turn]]]


@pytest.fixture
async def http_target() -> AsyncIterator[Callable[..., HttpTarget]]:
    made: list[tuple[EvalAdapter, HttpTarget]] = []

    def make(agent: object = SupportAgent, **options: Any) -> HttpTarget:
        policy = options.pop("policy", None)
        server_policy = options.pop("server_policy", None)
        adapter = EvalAdapter(agent, token=TOKEN, policy=server_policy, **options)
        target = HttpTarget(
            "http://adapter.test/agent",
            token=TOKEN,
            policy=policy,
            transport=httpx.ASGITransport(app=adapter.app("/agent")),
        )
        made.append((adapter, target))
        return target

    yield make
    for adapter, target in made:
        await target.aclose()
        await adapter.aclose()


async def conversation(session: Session) -> list[Turn]:
    return [
        await session.send("where is my order?"),
        await session.send("please stop"),
        await session.send("boom"),
        await session.send("and now?"),
    ]


async def approvals(session: Session) -> list[Turn]:
    first = await session.send("refund it")
    [pending] = first.run.pending_approvals
    second = await session.decide({pending.call_id: ApprovalDecision(decision="approve")})
    third = await session.send("refund again")
    [pending] = third.run.pending_approvals
    fourth = await session.decide({pending.call_id: ("reject", "over the limit")})
    return [first, second, third, fourth]


async def play(target: Target, script: Script) -> list[Turn]:
    session = await target.open(case_id="parity")
    try:
        return await script(session)
    finally:
        await session.close()


@pytest.mark.parametrize("script", [conversation, approvals])
@pytest.mark.parametrize("policy", [TracePolicy.safe(), TracePolicy.verbatim()])
async def test_local_and_http_targets_hand_out_identical_runs(
    http_target: Callable[..., HttpTarget], script: Script, policy: TracePolicy
) -> None:
    async with LocalTarget(SupportAgent, policy=policy) as local:
        local_turns = await play(local, script)
    remote_turns = await play(http_target(policy=policy), script)
    assert len(local_turns) == len(remote_turns)
    for mine, theirs in zip(local_turns, remote_turns, strict=True):
        assert (mine.index, mine.message, mine.reply) == (
            theirs.index,
            theirs.message,
            theirs.reply,
        )
        assert canonical(mine.run) == canonical(theirs.run)
        assert [canonical(step) for step in mine.steps] == [
            canonical(step) for step in theirs.steps
        ]
    final = local_turns[-1].run
    assert final.steps and final.tools and final.events
    leaked = SECRET in msgspec.json.encode(final).decode()
    assert leaked is policy.verbatim_payloads


async def test_the_runs_tell_the_story(http_target: Callable[..., HttpTarget]) -> None:
    target = http_target()
    turns = await play(target, conversation)
    assert [turn.run.status for turn in turns] == ["completed", "stopped", "failed", "completed"]
    assert [turn.index for turn in turns] == [1, 2, 3, 4]
    assert turns[0].reply == "order A1049 is shipped (where is my order?)"
    assert [step.turn for step in turns[1].steps] == [2, 2]
    run = turns[-1].run
    assert run.turns == 4 and len(run.user_messages) == 4
    call = run.tools[0].tool_call
    assert call.name == "lookup" and call.arguments.keys() == {"order_id", "card"}
    assert matches_digest("A1049", call.arguments["order_id"])
    assert run.errors and SECRET not in run.errors
    assert run.usage.total > 0
    assert target.identity.agent_name == "support-bot"
    assert target.identity.agent_version == "2.3.1"


async def test_a_server_side_policy_and_the_client_policy_agree(
    http_target: Callable[..., HttpTarget],
) -> None:
    """Digests made by the server pass through the client's policy unchanged."""
    async with LocalTarget(SupportAgent) as local:
        mine = await play(local, conversation)
    redacting = http_target(server_policy=TracePolicy.safe())
    theirs = await play(redacting, conversation)
    assert redacting.health is not None and "redaction" in redacting.health.capabilities
    assert canonical(mine[-1].run) == canonical(theirs[-1].run)
    # Even a verbatim client sees only digests when the server redacts.
    verbatim = http_target(server_policy=TracePolicy.safe(), policy=TracePolicy.verbatim())
    seen = await play(verbatim, conversation)
    assert SECRET not in msgspec.json.encode(seen[-1].run).decode()


async def test_local_errors_match_the_http_ones(
    http_target: Callable[..., HttpTarget],
) -> None:
    for target in (LocalTarget(SupportAgent), http_target()):
        session = await target.open()
        turn = await session.send("refund it")
        with pytest.raises(SessionSuspended):
            await session.send("again")
        with pytest.raises(RequestRejected, match="pending"):
            await session.decide({"not-a-call": "approve"})
        [pending] = turn.run.pending_approvals
        await session.decide({pending.call_id: "approve"})
        with pytest.raises(NotSuspended):
            await session.decide({pending.call_id: "approve"})
        attached = await target.attach(session.id)
        assert canonical(attached.run) == canonical(session.run)
        await session.close()
        await session.close()
        with pytest.raises(SessionNotFound):
            await attached.send("hello?")
        with pytest.raises(SessionNotFound):
            await target.attach(session.id)
        await target.aclose()


async def test_turn_timeouts_are_typed_on_both_targets(
    http_target: Callable[..., HttpTarget],
) -> None:
    import asyncio

    async def slow(message: str, history: list[Any], ctx: TurnContext) -> str:
        if message == "slow":
            await asyncio.sleep(5)
        return "ok"

    targets: list[Target] = [
        LocalTarget(slow, turn_timeout=0.05),
        http_target(slow, limits=Limits(turn_timeout=0.05)),
    ]
    for target in targets:
        session = await target.open()
        with pytest.raises(TurnTimedOut):
            await session.send("slow")
        assert (await session.send("fast")).reply == "ok"
        assert (await session.refresh()).turns == 2
        await session.close()
        await target.aclose()


def test_local_target_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(TypeError, match="not an agent"):
        LocalTarget(42)


class Remembers:
    """Keeps its conversation as framework adapters do: in a ``FRAMEWORK_STATE`` event."""

    def __init__(self, info: object) -> None:
        self.said: list[str] = []

    async def turn(self, message: str, ctx: TurnContext) -> str:
        self.said.append(message)
        ctx.event("heard", {"count": len(self.said)})
        ctx.event(FRAMEWORK_STATE, {"framework": "test", "said": [message, SECRET]})
        return f"heard {len(self.said)}"


@pytest.mark.parametrize("server_policy", [None, TracePolicy.safe()])
async def test_framework_state_reaches_neither_target(
    http_target: Callable[..., HttpTarget], server_policy: TracePolicy | None
) -> None:
    async def script(session: Session) -> list[Turn]:
        turns = [await session.send("one"), await session.send("two")]
        refreshed = await session.refresh()  # HTTP: attach
        assert canonical(refreshed) == canonical(turns[-1].run)
        return turns

    policy = TracePolicy.verbatim()
    async with LocalTarget(Remembers, policy=policy) as local:
        local_turns = await play(local, script)
    remote = http_target(Remembers, policy=policy, server_policy=server_policy)
    remote_turns = await play(remote, script)
    for mine, theirs in zip(local_turns, remote_turns, strict=True):
        assert canonical(mine.run) == canonical(theirs.run)
        assert [(e.name, e.data) for e in mine.run.events] == [
            ("heard", {"count": n}) for n in range(1, mine.index + 1)
        ]
        assert SECRET not in msgspec.json.encode(mine.run).decode()
