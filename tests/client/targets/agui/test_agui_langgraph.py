"""AgUiTarget against a LangGraph graph served through ``ag-ui-langgraph`` (real uvicorn on
a loopback port), beside the same graph behind evalport's adapter (``LangGraphAgent`` in
a ``LocalTarget``): the same verdicts, turn by turn."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("ag_ui.core")
pytest.importorskip("ag_ui_langgraph")

from agui_agents import verdicts
from agui_graphs import PATH, agui_app, confirming_app, confirming_graph, support_graph
from evalport.client import AgUiTarget, LocalTarget
from evalport.client.assertions import EventSeen, EventsInOrder, Interrupted
from evalport.protocol import RunStatus, matches_digest
from evalport.server.adapters import LangGraphAgent
from support.servers import running_server

pytestmark = [
    pytest.mark.e2e,
    # ag-ui-langgraph 0.0.47 reads the graph's config schema through an API LangGraph 1.x
    # deprecates; the server runs in this process, so its warning would fail the test.
    pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10"),
]


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server(agui_app()) as base:
        yield base + PATH


async def test_a_graph_gives_the_verdicts_of_evalports_adapter_turn_by_turn(served: str) -> None:
    turns: list[list] = []
    for target in (AgUiTarget(served), LocalTarget(LangGraphAgent(support_graph()))):
        async with target:
            session = await target.open()
            turns.append([await session.send(m) for m in ("where is my order?", "what did I ask")])
    for mine, theirs in zip(*turns, strict=True):
        assert verdicts(mine.run) == verdicts(theirs.run)
        assert verdicts(mine.own) == verdicts(theirs.own)
    first, second = turns[0]
    assert first.run.status == RunStatus.COMPLETED and first.reply == "Order A1 is shipped."
    assert second.reply == "You asked: where is my order?"
    assert first.run.usage == turns[1][0].run.usage
    # the graph's nodes are AG-UI steps, kept as events in the order they ran
    assert (
        EventsInOrder(["step_started", "step_finished", "step_started"]).evaluate(first.run).passed
    )
    assert EventSeen("step_started", data={"name": "tools"}).evaluate(first.run).passed


async def test_a_langgraph_interrupt_is_answered_through_resume() -> None:
    results = []
    with running_server(confirming_app()) as base:
        targets = (
            AgUiTarget(base + PATH),
            LocalTarget(LangGraphAgent(confirming_graph(), reviews="interrupts")),
        )
        for target in targets:
            async with target:
                session = await target.open()
                asked = await session.send("ship my order")
                (pending,) = asked.run.pending_interrupts
                assert asked.run.status == RunStatus.IN_PROGRESS
                answer = {"decision": "answer", "answer": "yes"}
                results.append(await session.decide({pending.id: answer}))
    mine, theirs = results
    # the graph calls no model: ag-ui-langgraph reports no usage, so budgets say so
    assert verdicts(mine.run, usage=False) == verdicts(theirs.run, usage=False)
    assert "AG-UI" in mine.run.not_reported("usage")
    # the AG-UI interrupt's reason is the kind (evalport's adapter names them all "interrupt")
    assert Interrupted("input_required").evaluate(mine.run).passed
    assert mine.index == 1 and mine.reply == theirs.reply == "Shipping: yes."
    assert matches_digest(mine.run.interrupts[0].answer, "yes")  # the safe policy digests it
