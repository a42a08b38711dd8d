"""AgUiTarget against a pydantic-ai agent served through pydantic-ai's own ``AGUIAdapter``
(real uvicorn on a loopback port), beside the same agent behind evalport's adapter
(``PydanticAIAgent`` in a ``LocalTarget``): the same verdicts wherever AG-UI carries the
data, and "not evaluable" naming AG-UI where it does not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("ag_ui.core")
pytest.importorskip("pydantic_ai.ui.ag_ui")

from agui_agents import PATH, agui_app, support_agent, verdicts
from evalport.client import AgUiTarget, LocalTarget, target_for
from evalport.client.assertions import CalledTool, TotalTokensAtMost
from evalport.protocol import RunStatus, TracePolicy, matches_digest
from evalport.server.adapters import PydanticAIAgent
from support.servers import running_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server(agui_app(support_agent())) as base:
        yield base + PATH


@pytest.fixture(scope="module")
def served_without_usage() -> Iterator[str]:
    with running_server(agui_app(support_agent(), include_usage=False)) as base:
        yield base + PATH


async def both(url: str, *messages: str) -> tuple[list, list]:
    """The turns of ``messages`` through AG-UI and through evalport's adapter."""
    agui = AgUiTarget(url)
    local = LocalTarget(PydanticAIAgent(support_agent()))
    turns: tuple[list, list] = ([], [])
    try:
        for index, target in enumerate((agui, local)):
            session = await target.open()
            for message in messages:
                turns[index].append(await session.send(message))
            await session.close()
    finally:
        await agui.aclose()
        await local.aclose()
    return turns


async def test_a_tool_call_gives_the_verdicts_of_evalports_adapter(served: str) -> None:
    (agui,), (local,) = await both(served, "where is my order?")
    assert verdicts(agui.run) == verdicts(local.run)
    run = agui.run
    assert run.status == RunStatus.COMPLETED and run.reply.strip() == "Order A1 is shipped."
    assert [step.type for step in run.steps] == ["tool_execution", "final_response"]
    (call,) = run.steps[0].requested_tool_calls
    (execution,) = run.steps[0].tool_executions
    assert call.name == "lookup" and execution.tool_call_id == call.id
    assert run.usage.input + run.usage.output == local.run.usage.input + local.run.usage.output
    assert agui.timing is not None and agui.timing.first_token is not None


async def test_the_default_trace_policy_redacts_what_the_agent_sent(served: str) -> None:
    async with AgUiTarget(served) as target:
        session = await target.open()
        run = (await session.send("where is my order?")).run
    execution = run.steps[0].tool_executions[0]
    assert execution.arguments["order_id"]["hash"].startswith("sha256:")
    assert CalledTool("lookup", {"order_id": "A1"}).evaluate(run).passed
    async with AgUiTarget(served, policy=TracePolicy.verbatim()) as target:
        session = await target.open()
        run = (await session.send("where is my order?")).run
    assert run.steps[0].tool_executions[0].arguments == {"order_id": "A1"}


async def test_the_second_turn_sends_the_conversation_so_far(served: str) -> None:
    agui, local = await both(served, "where is my order?", "what did I ask")
    for mine, theirs in zip(agui, local, strict=True):
        assert verdicts(mine.run) == verdicts(theirs.run)
        assert verdicts(mine.own) == verdicts(theirs.own)
    second = agui[1]
    assert second.index == 2 and second.reply.strip() == "You asked: where is my order?"
    assert [step.turn for step in second.run.steps] == [1, 1, 2]
    assert second.steps == second.run.steps[2:]


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_an_approval_is_an_ag_ui_interrupt_answered_by_resume(
    served: str, decision: str
) -> None:
    results = []
    for target in (AgUiTarget(served), LocalTarget(PydanticAIAgent(support_agent()))):
        async with target:
            session = await target.open()
            asked = await session.send("refund please")
            assert asked.run.status == RunStatus.IN_PROGRESS
            (pending,) = asked.run.pending_approvals
            assert pending.tool == "refund"
            done = await session.decide({pending.call_id: decision})
            results.append(done)
    agui, local = results
    assert verdicts(agui.run) == verdicts(local.run)
    assert agui.index == 1 and agui.run.status == RunStatus.COMPLETED
    assert agui.run.pending_approvals == []
    (execution,) = agui.run.tools
    assert execution.approval is not None
    assert execution.approval.state == ("approved" if decision == "approve" else "rejected")


async def test_a_send_while_an_approval_is_pending_is_refused(served: str) -> None:
    from evalport.protocol import NotSuspended, RequestRejected, SessionSuspended

    async with AgUiTarget(served) as target:
        session = await target.open()
        with pytest.raises(NotSuspended):
            await session.decide({"x": "approve"})
        asked = await session.send("refund please")
        with pytest.raises(SessionSuspended, match="decide"):
            await session.send("hello")
        with pytest.raises(RequestRejected, match="do not match"):
            await session.decide({"not-the-call": "approve"})
        (pending,) = asked.run.pending_approvals
        done = await session.decide({pending.call_id: "approve"})
        assert done.run.status == RunStatus.COMPLETED


async def test_a_model_error_is_the_agents_failure_not_a_transport_one(served: str) -> None:
    (agui,), (local,) = await both(served, "boom")
    assert verdicts(agui.run, usage=False) == verdicts(local.run, usage=False)
    run = agui.run
    assert run.status == RunStatus.FAILED and run.error_details
    assert matches_digest(run.error_details[0].message, "the model provider failed")
    assert run.steps[-1].type == "error"
    # pydantic-ai's RUN_ERROR carries no usage: token budgets say so, never pass on zeros
    budget = TotalTokensAtMost(10_000).evaluate(run)
    assert not budget.evaluated and "AG-UI" in budget.message


async def test_usage_an_agent_does_not_report_is_not_evaluable(served_without_usage: str) -> None:
    async with target_for("agui+" + served_without_usage) as target:
        assert isinstance(target, AgUiTarget)
        session = await target.open()
        run = (await session.send("where is my order?")).run
    result = TotalTokensAtMost(10_000).evaluate(run)
    assert not result.evaluated and not result.passed
    assert "AG-UI" in result.message and "usage" in result.message
    assert CalledTool("lookup").evaluate(run).passed  # what AG-UI carries still counts


async def test_attach_names_the_protocol(served: str) -> None:
    async with AgUiTarget(served) as target:
        with pytest.raises(NotImplementedError, match="AG-UI"):
            await target.attach("thread-1")
