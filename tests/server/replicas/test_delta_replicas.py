"""Delta responses over real HTTP: two ``evalport serve`` processes (uvicorn) on one Redis.

A session moves between the replicas while HttpTargets read it as deltas (``?since=``
travels in the query string through uvicorn); the reassembled runs equal the whole run,
and a repeated Idempotency-Key answers the same delta on the other replica.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from evalport.client import HttpTarget
from evalport.protocol import RunDelta, apply_delta, decode_answer, decode_run
from support.redis import RedisServer
from support.replicas import Replica, running_replicas

pytestmark = pytest.mark.e2e

TOKEN = "delta-replica-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT = str(Path(__file__).with_name("agents.py")) + ":agent"


@pytest.fixture(scope="module")
def replicas(redis_server: RedisServer) -> Iterator[list[Replica]]:
    store = redis_server.url.rsplit("/", 1)[0] + "/4"  # a database of its own
    options = ["--turn-timeout", "5", "--session-ttl", "30"]
    with running_replicas(AGENT, store=store, token=TOKEN, options=options) as started:
        yield started


async def test_a_session_read_as_deltas_on_both_replicas(replicas: list[Replica]) -> None:
    a, b = replicas
    on_a, on_b = HttpTarget(a.url, token=TOKEN), HttpTarget(b.url, token=TOKEN)
    whole = HttpTarget(a.url, token=TOKEN, health_check=False)
    try:
        session = await on_a.open()
        await session.send("one")
        moved = await on_b.attach(session.id)
        assert on_a.delta_responses and on_b.delta_responses
        await moved.send("two")  # B continues the session from the stored run
        turn = await session.send("three")  # A's copy holds turn 1: the delta brings 2 and 3
        assert turn.reply == "three #3 on A restored history=4"
        full = await (await whole.attach(session.id)).refresh()
        assert turn.run == full and full.turns == 3
        assert await moved.refresh() == full  # B polls: what turn 3 added
        # A suspended turn on A, decided there, polled from B.
        await session.send("approve")
        [pending] = session.run.pending_approvals
        await session.decide({pending.call_id: "approve"})
        assert await moved.refresh() == await (await whole.attach(session.id)).refresh()
        await session.close()
    finally:
        for target in (on_a, on_b, whole):
            await target.aclose()


def test_a_repeated_key_answers_the_same_delta_on_the_other_replica(
    replicas: list[Replica],
) -> None:
    a, b = replicas
    with (
        httpx.Client(base_url=a.url, headers=AUTH, timeout=10) as on_a,
        httpx.Client(base_url=b.url, headers=AUTH, timeout=10) as on_b,
    ):
        session = on_a.post("/evals/sessions", json={}).json()["sessionId"]
        on_a.post(f"/evals/sessions/{session}/turns", json={"message": "one"})
        base = decode_run(on_b.get(f"/evals/sessions/{session}").content)

        def keyed(http: httpx.Client, query: str = "") -> httpx.Response:
            return http.post(
                f"/evals/sessions/{session}/turns{query}",
                json={"message": "two"},
                headers={"Idempotency-Key": "delta-k"},
            )

        first, again, plain = keyed(on_a, "?since=1"), keyed(on_b, "?since=1"), keyed(on_b)
        assert first.status_code == again.status_code == plain.status_code == 200
        assert again.content == first.content
        delta = decode_answer(first.content)
        assert isinstance(delta, RunDelta) and delta.kept["steps"] == len(base.steps)
        assert apply_delta(base, delta) == decode_run(plain.content)
        polled = on_b.get(f"/evals/sessions/{session}?since=1")
        assert polled.json()["delta"]["run"]["userMessages"] == ["two"]
        bad = on_b.get(f"/evals/sessions/{session}?since=two")
        assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "query:since"
