"""The example support agent's rules, turn by turn, through the same runtime the server uses."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from evalport.protocol.runtime import AgentSession, SessionInfo

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("support_agent", None)
    import support_agent

    yield support_agent
    sys.modules.pop("support_agent", None)


@pytest.fixture
async def chat(example: ModuleType) -> AsyncIterator[AgentSession]:
    session = await AgentSession.open(
        example.agent, SessionInfo(session_id="s-1", metadata={"email": "ada@example.com"})
    )
    yield session
    await session.close()


async def say(session: AgentSession, message: str) -> str:
    return (await session.send(message)).reply


async def test_greets_and_asks_for_an_order_number(chat: AgentSession) -> None:
    assert (await say(chat, "hello")).startswith("Hi!")
    assert "order number" in await say(chat, "I have a question")


async def test_status_remembers_the_order_across_turns(chat: AgentSession) -> None:
    assert (
        await say(chat, "Where is my order?")
        == "Which order do you mean? Please give me its number."
    )
    assert await say(chat, "Order A1049 please, where is it?") == "Order A1049 is shipped with DHL."
    assert await say(chat, "has it shipped?") == "Order A1049 is shipped with DHL."
    run = chat.run
    assert [t.tool_call.name for t in run.tools] == ["order_status", "order_status"]
    assert run.tools[0].tool_call.arguments == {"order_id": "A1049"}


async def test_lists_orders_by_email_or_session_metadata(chat: AgentSession) -> None:
    assert "2 order(s): A1049" in await say(chat, "orders for ada@example.com?")
    assert "2 order(s)" in await say(chat, "show my orders")  # the e-mail from the metadata
    assert (
        await say(chat, "orders of nobody@example.com")
        == "I found no orders for nobody@example.com."
    )


async def test_a_small_refund_needs_no_approval_and_happens_once(chat: AgentSession) -> None:
    assert "came to 24.50" in await say(chat, "I want my money back for A1050")
    assert (await say(chat, "yes")).startswith("Done: I refunded 24.50 on order A1050")
    assert await say(chat, "refund A1050 again") == "Order A1050 has already been refunded in full."


async def test_declining_a_proposed_refund(chat: AgentSession) -> None:
    await say(chat, "refund order 123")
    assert await say(chat, "no thanks") == "Alright, I won't refund it. Anything else?"
    assert not [t for t in chat.run.tools if t.tool_call.name == "refund_order"]


async def test_a_large_refund_waits_for_a_human(chat: AgentSession, example: ModuleType) -> None:
    await say(chat, "refund A1049")
    run = await chat.send("go ahead")
    (pending,) = run.pending_approvals
    assert pending.arguments["amount"] == 349.0 > example.REFUND_LIMIT
    run = await chat.decide({pending.call_id: "approve"})
    assert run.reply.startswith("Done: I refunded 349.00 on order A1049")
    assert run.tools[-1].approval is not None and run.tools[-1].approval.state == "approved"
    assert example.ORDERS["A1049"].refunded == 0.0  # the seed data never changes
