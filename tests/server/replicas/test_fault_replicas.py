"""Tool faults across replicas sharing Redis: a replica that rebuilds the session from the
store injects exactly what the first one would have (turns and times included)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from evalport.server import EvalAdapter
from support.redis import RedisServer
from support.tool_faults import AUTH, TOKEN
from support_agent import agent

pytestmark = pytest.mark.e2e

FAULTS = [
    {
        "tool": "order_status",
        "result": {"order_id": "A1049", "status": "lost", "carrier": None},
        "times": 1,
    },
    {"tool": "order_status", "error": "order service timed out", "turns": [2]},
]


@pytest.fixture
async def clients(redis_server: RedisServer) -> AsyncIterator[list[httpx.AsyncClient]]:
    url = redis_server.url.rsplit("/", 1)[0] + "/11"  # a database of its own
    adapters = [EvalAdapter(agent, token=TOKEN, store=url, faults=True) for _ in range(2)]
    made = [
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=adapter.app()), base_url="http://r", headers=AUTH
        )
        for adapter in adapters
    ]
    yield made
    for client in made:
        await client.aclose()
    for adapter in adapters:
        await adapter.aclose()


async def test_a_replica_rebuilding_the_session_keeps_its_faults(clients) -> None:
    a, b = clients
    created = await a.post("/evals/sessions", json={"faults": FAULTS})
    assert created.status_code == 201, created.text
    turns = f"/evals/sessions/{created.json()['sessionId']}/turns"
    replies = []
    for client in (a, b, b, a):
        answer = await client.post(turns, json={"message": "Where is my order A1049?"})
        assert answer.status_code == 200, answer.text
        replies.append(answer.json()["run"])
    run = replies[-1]
    assert [r["reply"] for r in replies] == [
        "Order A1049 is lost.",  # the canned result, once (times=1), on A
        # turn 2 on B, rebuilt from the store: the error fault of turn 2
        "I'm sorry, I can't reach the order service to check A1049 right now. "
        "Please try again in a moment.",
        "Order A1049 is shipped with DHL.",  # B again: times used up, turns don't match
        "Order A1049 is shipped with DHL.",
    ]
    executions = [e for step in run["steps"] for e in step["toolExecutions"]]
    assert [e["injected"] for e in executions] == [True, True, False, False]
    assert executions[1]["error"] == "order service timed out"
