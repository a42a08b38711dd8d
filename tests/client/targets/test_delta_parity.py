"""Delta responses end to end: HttpTarget reassembles runs equal to full responses.

A property over random sessions (tool calls, approvals approved and rejected, interrupts
answered, turns with image and file parts, failures, stop signals, turn timeouts,
injected tool faults, client and server trace policies) against the real adapter in one
process, over the memory store or over a real Redis with two adapters (replicas) that
the requests alternate between at random: after every call, the run of a session that
reads deltas, and the run of a second client polling the session with deltas, equal
field by field the run a client without deltas reads in full.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from evalport.client import HttpTarget, Turn, TurnTimedOut
from evalport.protocol import (
    DELTA_CAPABILITY,
    AgentRun,
    FilePart,
    ImagePart,
    ToolFault,
    TracePolicy,
    encode,
)
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter, Limits
from evalport.server.stores import RedisStore
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.redis import REDIS_SERVER, RedisServer, running_redis
from target_agents import SECRET, SupportAgent

TOKEN = "delta-token-0123456789"
BASE = "http://adapter.test/agent"


PARTS = [
    ImagePart(data=b"\x89PNG\r\n\x1a\n" + SECRET.encode(), media_type="image/png"),
    FilePart(data=b"%PDF-1.4 invoice", media_type="application/pdf", name="invoice.pdf"),
]


class SlowSupportAgent(SupportAgent):
    """SupportAgent, and a message with "slow" outlives the turn timeout; one with "ask"
    asks which size first (an interrupt), one with "look" says how many parts it got."""

    async def turn(self, message: str, ctx: TurnContext) -> str:
        if "slow" in message:
            ctx.model_step(content="thinking")
            await asyncio.sleep(5)
        if "ask" in message:
            size = await ctx.interrupt("choice", {"question": "Which size?", "card": SECRET})
            ctx.event("sized", {"size": size})
        if "look" in message:
            ctx.event("looked", {"parts": len(ctx.parts)})
        return await super().turn(message, ctx)


class Recording(httpx.AsyncBaseTransport):
    """The adapters in process (one, or replicas that each request goes to in turn, as
    ``route`` says); counts the answers that were deltas."""

    def __init__(self, apps: list[Any], route: Iterator[int]) -> None:
        self.inner = [httpx.ASGITransport(app=app) for app in apps]
        self.route = route
        self.deltas = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        inner = self.inner[next(self.route) % len(self.inner)]
        response = await inner.handle_async_request(request)
        body = await response.aread()
        self.deltas += body.startswith(b'{"delta"')
        return httpx.Response(response.status_code, headers=response.headers, content=body)


MESSAGES = st.sampled_from(
    ["where is it?", "refund it", "boom", "please stop", "slow", "ask me", "look at these"]
)
FAULTS = st.one_of(
    st.none(),
    st.builds(
        lambda rate, seed: ToolFault(tool="lookup", error="warehouse down", rate=rate, seed=seed),
        st.sampled_from([0.5, 1.0]),
        st.integers(0, 9),
    ),
    st.just(ToolFault(tool="lookup", result={"status": "lost"})),
)
POLICIES = st.sampled_from(
    [
        (TracePolicy.safe(), None),
        (TracePolicy.verbatim(), None),
        (TracePolicy.safe(), TracePolicy.safe()),
        (TracePolicy.safe().allowing(tools=["lookup"]), None),
    ]
)


async def session_story(
    messages: list[str],
    decisions: list[bool],
    fault: ToolFault | None,
    policies: tuple[TracePolicy, TracePolicy | None],
    redis: RedisServer | None = None,
    route: Sequence[int] = (),
) -> None:
    client_policy, server_policy = policies
    prefix = f"parity-{uuid.uuid4().hex[:8]}:"
    adapters = [
        EvalAdapter(
            SlowSupportAgent,
            token=TOKEN,
            faults=True,
            policy=server_policy,
            limits=Limits(turn_timeout=0.05),
            store=None if redis is None else RedisStore(redis.url, prefix=prefix),
        )
        for _ in range(1 if redis is None else 2)
    ]
    transport = Recording(
        [adapter.app("/agent") for adapter in adapters], itertools.cycle([*route, 0])
    )

    def target(**options: Any) -> HttpTarget:
        return HttpTarget(BASE, token=TOKEN, policy=client_policy, transport=transport, **options)

    reader, poller, whole = target(), target(), target(health_check=False)
    try:
        session = await reader.open(faults=[fault] if fault else None)
        assert reader.delta_responses and not whole.delta_responses
        watching = await poller.attach(session.id)
        full = await whole.attach(session.id)
        choices = iter(decisions)
        seen: list[tuple[Turn, AgentRun]] = []  # every turn, with the run as of it
        for message in messages:
            turn = None
            try:
                if session.run.pending_approvals:
                    approve = next(choices, True)
                    turn = await session.decide(
                        {
                            p.call_id: approve or ("reject", "no")
                            for p in session.run.pending_approvals
                        }
                    )
                elif session.run.pending_interrupts:
                    await session.decide(
                        {
                            asked.id: {"decision": "answer", "answer": message}
                            for asked in session.run.pending_interrupts
                        }
                    )
                else:
                    parts = PARTS if "look" in message else ()
                    turn = await session.send(message, parts=parts)
                    assert turn.steps == [s for s in turn.run.steps if s.turn == turn.index]
            except TurnTimedOut:
                await session.refresh()
            expected = await full.refresh()
            assert session.run == expected
            assert await watching.refresh() == expected
            if turn is not None:
                seen.append((turn, expected))
        assert transport.deltas >= len(messages)
        # Later turns grew the session's run; no earlier turn's run changed.
        assert [turn.run for turn, _ in seen] == [expected for _, expected in seen]
        if client_policy == TracePolicy.safe():
            assert SECRET not in repr(session.run)
    finally:
        for client in (reader, poller, whole):
            await client.aclose()
        for adapter in adapters:
            await adapter.aclose()


STORIES = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
STORY = {
    "messages": st.lists(MESSAGES, min_size=1, max_size=8),
    "decisions": st.lists(st.booleans(), max_size=4),
    "fault": FAULTS,
    "policies": POLICIES,
}


EVERY_KIND = {
    "messages": ["ask me", "M", "look at these", "refund it", "no", "slow", "ask again", "L"],
    "decisions": [False],
    "fault": None,
    "policies": (TracePolicy.safe(), TracePolicy.safe()),
}


@STORIES
@given(**STORY)
@example(**EVERY_KIND)
def test_reassembled_runs_equal_full_responses(
    messages: list[str],
    decisions: list[bool],
    fault: ToolFault | None,
    policies: tuple[TracePolicy, TracePolicy | None],
) -> None:
    asyncio.run(session_story(messages, decisions, fault, policies))


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    with running_redis() as server:
        yield server


@STORIES
@given(**STORY, route=st.lists(st.integers(0, 1), min_size=1, max_size=12))
@example(**EVERY_KIND, route=[0, 1, 1, 0, 1])
def test_reassembled_runs_equal_full_responses_over_redis_replicas(
    redis_server: RedisServer,
    messages: list[str],
    decisions: list[bool],
    fault: ToolFault | None,
    policies: tuple[TracePolicy, TracePolicy | None],
    route: list[int],
) -> None:
    """The same stories with two adapters over one Redis, each request going to either:
    sessions move between replicas, approvals and answers are relayed to the holder."""
    asyncio.run(session_story(messages, decisions, fault, policies, redis_server, route))


async def test_each_turn_keeps_the_run_as_of_that_turn() -> None:
    """With deltas the session's run grows in place; a turn's run, read only after later
    turns (approvals, a rejected refund, a failure, a stop), is still the run as of it,
    and a run read earlier is unchanged."""
    adapter = EvalAdapter(SupportAgent, token=TOKEN)
    transport = httpx.ASGITransport(app=adapter.app("/agent"))
    target = HttpTarget(BASE, token=TOKEN, transport=transport)
    whole = HttpTarget(BASE, token=TOKEN, transport=transport, health_check=False)
    try:
        session = await target.open()
        full = await whole.attach(session.id)
        assert target.delta_responses
        turns: list[Turn] = []
        expected: list[bytes] = []
        early = None
        script = ["one", "refund it", True, "two", "refund it", False, "boom", "three"]
        for step in script:
            if isinstance(step, bool):
                pending = (await full.refresh()).pending_approvals
                decision = "approve" if step else ("reject", "no")
                turns.append(await session.decide({p.call_id: decision for p in pending}))
            else:
                turns.append(await session.send(step))
            expected.append(encode(await full.refresh()))
            if step == "two":
                early = session.run  # read now, compared after the later turns
                early_bytes = encode(early)
        await session.send("please stop")
        assert [encode(turn.run) for turn in turns] == expected
        assert early is not None and encode(early) == early_bytes
        assert [turn.run.turns for turn in turns] == [1, 2, 2, 3, 4, 4, 5, 6]
        assert len(turns[0].run.steps) < len(turns[-1].run.steps) < len(session.run.steps)
    finally:
        await target.aclose()
        await whole.aclose()
        await adapter.aclose()


async def test_another_client_s_turns_arrive_in_the_next_delta() -> None:
    """Two clients drive one session: each one's next delta brings the other's turns."""
    adapter = EvalAdapter(SupportAgent, token=TOKEN)
    transport = httpx.ASGITransport(app=adapter.app("/agent"))
    one, other, whole = (
        HttpTarget(BASE, token=TOKEN, transport=transport, health_check=check)
        for check in (True, True, False)
    )
    try:
        mine = await one.open()
        await mine.send("where is it?")
        theirs = await other.attach(mine.id)
        await theirs.send("and now?")
        await theirs.send("and then?")
        turn = await mine.send("still there?")  # mine holds turn 1, the server 3
        assert turn.run == await (await whole.attach(mine.id)).refresh()
        assert turn.run.turns == 4
        # What the run gained during the call, as with full responses.
        assert {step.turn for step in turn.steps} == {2, 3, 4}
    finally:
        for client in (one, other, whole):
            await client.aclose()
        await adapter.aclose()


async def test_a_delta_that_does_not_fit_falls_back_to_the_whole_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A delta whose base is not the client's copy (here a server that names another
    last step) is refused, logged, and the whole run read instead."""
    adapter = EvalAdapter(SupportAgent, token=TOKEN)
    inner = adapter.app("/agent")

    async def confused(scope: Any, receive: Any, send: Any) -> None:
        async def sending(message: Any) -> None:
            if message["type"] == "http.response.body":
                body = message["body"].replace(b'"lastStepId":"', b'"lastStepId":"not-')
                message = {**message, "body": body}
            await send(message)

        await inner(scope, receive, sending)

    target = HttpTarget(BASE, token=TOKEN, transport=httpx.ASGITransport(app=confused))
    whole = HttpTarget(
        BASE, token=TOKEN, transport=httpx.ASGITransport(app=inner), health_check=False
    )
    try:
        session = await target.open()
        await session.send("one")  # since=0: nothing kept, nothing to check
        assert "does not apply" not in caplog.text
        turn = await session.send("two")
        assert "does not apply to this client's copy of the run" in caplog.text
        assert turn.run == await (await whole.attach(session.id)).refresh()
        assert turn.run.turns == 2 and {step.turn for step in turn.steps} == {2}
    finally:
        await target.aclose()
        await whole.aclose()
        await adapter.aclose()


async def test_a_server_without_deltas_gets_full_requests() -> None:
    """No ``delta`` capability (a 1.0 server): the client never asks, nothing changes."""
    adapter = EvalAdapter(SupportAgent, token=TOKEN)
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope["query_string"].decode())
            if scope["path"].endswith("/health"):
                await send({"type": "http.response.start", "status": 200, "headers": []})
                body = b'{"status":"ok","protocol":"1","capabilities":["attach"]}'
                await send({"type": "http.response.body", "body": body})
                return
        await adapter.app("/agent")(scope, receive, send)

    target = HttpTarget(BASE, token=TOKEN, transport=httpx.ASGITransport(app=app))
    try:
        session = await target.open()
        await session.send("one")
        await session.refresh()
        assert not target.delta_responses and DELTA_CAPABILITY not in (seen and [])
        assert seen == ["", "", "", ""]
        assert isinstance(session.run, AgentRun) and session.run.turns == 1
    finally:
        await target.aclose()
        await adapter.aclose()
