"""The example agent continues a session on any replica (issue 16 items 1 and 10).

Two real ``evalport serve`` replicas of ``examples/support_agent.py:agent`` over a real
``redis-server``: a refund done on one replica is refused the second time on the other,
and a refund proposed on one is carried out on the other. Its patterns are linear: a
message of 900 KB is answered at once, not after minutes of backtracking.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from evalport.protocol.runtime import AgentSession, SessionInfo
from support.redis import RedisServer
from support.replicas import running_replicas

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[3]
AGENT = str(ROOT / "examples" / "support_agent.py") + ":agent"
TOKEN = "example-restore-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def database(redis_server: RedisServer, number: int) -> str:
    return redis_server.url.rsplit("/", 1)[0] + f"/{number}"


def say(http: httpx.Client, session: str, message: str) -> str:
    response = http.post(f"/evals/sessions/{session}/turns", json={"message": message})
    assert response.status_code == 200, response.text
    return str(response.json()["run"]["reply"])


def test_a_refund_is_refused_the_second_time_on_any_replica(redis_server: RedisServer) -> None:
    with (
        running_replicas(AGENT, store=database(redis_server, 7), token=TOKEN) as (a, b),
        httpx.Client(base_url=a.url, headers=AUTH, timeout=15) as on_a,
        httpx.Client(base_url=b.url, headers=AUTH, timeout=15) as on_b,
    ):
        session = on_a.post("/evals/sessions", json={}).json()["sessionId"]
        assert "Shall I refund it" in say(on_a, session, "refund A1050")
        assert say(on_a, session, "yes").startswith("Done: I refunded 24.50 on order A1050")
        # The session goes on on B, which never saw it: B rebuilds the agent's state.
        assert (
            say(on_b, session, "refund A1050") == "Order A1050 has already been refunded in full."
        )
        assert "yes" not in say(on_b, session, "yes")  # nothing proposed: no refund
        # And back on A, whose live agent is behind the store now.
        assert (
            say(on_a, session, "refund A1050") == "Order A1050 has already been refunded in full."
        )

        # A proposal made on A is carried out on B, once.
        other = on_a.post("/evals/sessions", json={}).json()["sessionId"]
        assert "Shall I refund it" in say(on_a, other, "I want my money back for A1051")
        assert say(on_b, other, "yes").startswith("Done: I refunded 59.00 on order A1051")
        assert say(on_a, other, "refund A1051") == "Order A1051 has already been refunded in full."
        run = on_b.get(f"/evals/sessions/{other}").json()["run"]
        refunds = [
            execution
            for step in run["steps"]
            for execution in step["toolExecutions"]
            if execution["name"] == "refund_order"
        ]
        assert len(refunds) == 1


async def test_a_900_kb_message_is_answered_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    from support_agent import agent

    session = await AgentSession.open(agent, SessionInfo(session_id="big"))
    try:
        for text in ("A" * 900_000, "x@" + "b" * 900_000, "a.b-c+" * 150_000):
            started = time.perf_counter()
            run = await session.send(text, timeout=30)
            took = time.perf_counter() - started
            assert run.status == "completed"
            assert took < 3.0, f"{took:.1f} s for {len(text)} characters"
    finally:
        await session.close()
