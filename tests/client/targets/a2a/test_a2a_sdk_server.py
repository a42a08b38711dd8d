"""A2ATarget against an A2A server built with ``a2a-sdk`` (real uvicorn on loopback): the
same verdicts as the same agent behind evalport's adapter wherever A2A carries the data,
and *not evaluable* where it does not (tool calls)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from a2a_agents import NAME, QUESTION, VERSION, HostAgent, a2a_sdk_app
from evalport.client import LocalTarget, Session
from evalport.client import assertions as a
from evalport.client.targets import A2ATarget
from evalport.protocol import AgentRun, FaultsUnsupported, ToolFault, TracePolicy
from support.servers import running_server

pytestmark = pytest.mark.e2e

WHY = "A2A agents do not report their tool calls"

# What a case checks of each turn; the tool assertions read what A2A does not carry.
CHECKS = [
    a.Succeeded(),
    a.Failed(),
    a.Interrupted("input-required"),
    a.Contains("sunny in Paris"),
    a.Contains("before: hi"),
    a.Contains("Booked a table for 4"),
    a.CalledTool("weather"),
    a.NotCalledTool("weather"),
]


@pytest.fixture(scope="module", params=[True, False], ids=["streaming", "not-streaming"])
def a2a_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with running_server(a2a_sdk_app(streaming=request.param)) as url:
        yield url


async def script(session: Session) -> list[AgentRun]:
    """The conversation both targets have: two turns of context, a tool, a question
    answered, a failure."""
    runs = [(await session.send(text)).run for text in ("hi", "again", "weather in Paris?")]
    asked = await session.send("book a table")
    runs.append(asked.run)
    [pending] = asked.run.pending_interrupts
    runs.append((await session.decide({pending.id: {"decision": "answer", "answer": "4"}})).run)
    runs.append((await session.send("boom")).run)
    return runs


def verdicts(run: AgentRun) -> list[tuple[bool, bool]]:
    return [(result.evaluated, result.passed) for result in map(lambda c: c.evaluate(run), CHECKS)]


async def test_same_verdicts_as_the_agent_behind_evalports_adapter(a2a_url: str) -> None:
    policy = TracePolicy.verbatim()
    async with LocalTarget(HostAgent, policy=policy) as local:
        theirs = await script(await local.open())
    async with A2ATarget(a2a_url, policy=policy) as target:
        session = await target.open()
        ours = await script(session)
    assert len(ours) == len(theirs)
    tools = {index for index, check in enumerate(CHECKS) if check.needs == "tools"}
    for mine, local_run in zip(ours, theirs, strict=True):
        expected = verdicts(local_run)
        got = verdicts(mine)
        for index, (evaluated, passed) in enumerate(got):
            if index in tools:
                assert (evaluated, passed) == (False, False)
                assert WHY in CHECKS[index].evaluate(mine).message
            else:
                assert (evaluated, passed) == expected[index], (CHECKS[index], mine)
    assert ours[-1].reply == theirs[-1].reply == ""
    assert [run.turns for run in ours] == [run.turns for run in theirs]
    assert ours[-1].user_messages == theirs[-1].user_messages
    [answered] = ours[-1].interrupts
    assert (answered.kind, answered.payload, answered.answer) == ("input-required", QUESTION, "4")
    assert ours[-1].error_details[-1].type == "A2ATaskFailed"
    assert "the model is down" in ours[-1].errors


async def test_the_card_names_the_agent_and_a_streamed_turn_is_timed(a2a_url: str) -> None:
    async with A2ATarget(a2a_url) as target:
        assert target.identity.agent_name == "agent"  # nothing read yet
        card = await target.check()
        assert (target.identity.kind, target.identity.agent_name) == ("a2a", NAME)
        assert target.identity.agent_version == VERSION
        session = await target.open()
        turn = await session.send("hi")
    assert turn.timing is not None
    if card.capabilities.streaming:
        assert turn.timing.first_event is not None and turn.timing.first_token is not None
    else:
        assert turn.timing.first_event is None and turn.timing.first_token is None


async def test_a_new_message_answers_the_question_as_a_new_turn(a2a_url: str) -> None:
    async with A2ATarget(a2a_url) as target:
        session = await target.open()
        asked = await session.send("book a table")
        assert asked.run.status == "in_progress"
        answered = await session.send("4")
    assert (asked.index, answered.index) == (1, 2)
    assert answered.reply == "Booked a table for 4." and not answered.run.pending_interrupts
    assert len(answered.run.interrupts) == 1


async def test_rejected_is_the_agents_failure_and_what_a2a_lacks_is_said(a2a_url: str) -> None:
    async with A2ATarget(a2a_url) as target:
        with pytest.raises(FaultsUnsupported, match="A2A agent"):
            await target.open(faults=[ToolFault(tool="weather", error="down")])
        with pytest.raises(NotImplementedError, match="A2A"):
            await target.attach("any")
        turn = await (await target.open()).send("please refuse")
    assert turn.run.status == "failed" and turn.run.error_details[0].type == "A2ATaskRejected"
    assert set(turn.run.unreported) == {"tools", "steps", "usage", "events"}
