"""End to end: HttpTarget and the sync facade against the adapter served by real uvicorn."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from evalport.client import (
    AuthFailed,
    HttpTarget,
    LocalTarget,
    SessionNotFound,
    SyncTarget,
    connect,
)
from evalport.protocol import matches_digest
from evalport.server import EvalAdapter
from support.servers import running_server
from target_agents import SECRET, SupportAgent, canonical

pytestmark = pytest.mark.e2e

TOKEN = "e2e-token-0123456789"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    adapter = EvalAdapter(SupportAgent, token=TOKEN)
    with running_server(adapter.app("/agent")) as url:
        yield f"{url}/agent"


async def test_http_target_over_real_uvicorn(base_url: str) -> None:
    async with HttpTarget(base_url, token=TOKEN) as target:
        session = await target.open(case_id="e2e", metadata={"suite": "targets"})
        first = await session.send("where is my order?")
        suspended = await session.send("refund it")
        [pending] = suspended.run.pending_approvals
        resumed = await session.decide({pending.call_id: "approve"})
        assert (first.index, suspended.index, resumed.index) == (1, 2, 2)
        assert resumed.run.status == "completed" and resumed.reply.startswith("order A1049")
        execution = resumed.run.steps[0].tool_executions[0]
        assert matches_digest(SECRET, execution.arguments["card"])
        assert SECRET not in msgspec.json.encode(resumed.run).decode()
        # Another client (a CI job, a debugger) attaches to the same session.
        async with HttpTarget(base_url, token=TOKEN) as other:
            attached = await other.attach(session.id)
            assert canonical(attached.run) == canonical(session.run)
            more = await attached.send("and now?")
            assert more.index == 3
        await session.close()
        with pytest.raises(SessionNotFound):
            await session.refresh()
    # The same script in-process gives the same run.
    async with LocalTarget(SupportAgent) as local:
        mine = await local.open()
        await mine.send("where is my order?")
        turn = await mine.send("refund it")
        [pending] = turn.run.pending_approvals
        await mine.decide({pending.call_id: "approve"})
        await mine.send("and now?")
    assert canonical(mine.run) == canonical(more.run)


async def test_wrong_token_is_auth_failed(base_url: str) -> None:
    async with HttpTarget(base_url, token="wrong-token-000") as target:
        with pytest.raises(AuthFailed) as raised:
            await target.open()
    assert raised.value.status == 401 and "wrong-token-000" not in str(raised.value)


def test_sync_facade_over_real_uvicorn(base_url: str) -> None:
    with connect(base_url, token=TOKEN) as target:
        assert isinstance(target, SyncTarget)
        with target.open(case_id="sync") as session:
            turn = session.send("where is my order?")
            assert turn.index == 1 and turn.reply.startswith("order A1049")
            turn = session.send("refund it")
            [pending] = turn.run.pending_approvals
            resumed = session.decide({pending.call_id: ("reject", "too much")})
            assert resumed.reply == "refund rejected"
            assert session.refresh().turns == 2
        assert target.identity.agent_name == "support-bot"


def test_sync_facade_refuses_to_block_a_running_loop(base_url: str) -> None:
    import asyncio

    target = connect(base_url, token=TOKEN)

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="running event loop"):
            target.open()

    asyncio.run(inside())
    target.close()
    target.close()
    with pytest.raises(RuntimeError, match="closed"):
        target.open()
