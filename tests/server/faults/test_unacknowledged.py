"""A turn that was not acknowledged is never stored later (issue 16 item 2).

Real ``evalport serve`` over a real ``redis-server``: Redis is killed (SIGKILL) while a
turn runs, so the turn's save fails and it is answered 503; Redis comes back with what it
held before the turn. The replica that ran the turn must not continue from its memory
(which holds the unacknowledged turn): the stored run is checked message by message.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from support.redis import running_redis, save_snapshot
from support.replicas import running_replicas

pytestmark = pytest.mark.e2e

TOKEN = "unacked-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT = str(Path(__file__).parents[1] / "replicas" / "agents.py") + ":agent"
PROBLEM = "urn:evalport:problem:"


def test_a_turn_answered_503_is_never_stored_afterwards() -> None:
    with (
        running_redis() as redis,
        running_replicas(AGENT, store=redis.url, count=1, token=TOKEN) as (a,),
        httpx.Client(base_url=a.url, headers=AUTH, timeout=15) as http,
    ):
        session = http.post("/evals/sessions", json={}).json()["sessionId"]
        turns = f"/evals/sessions/{session}/turns"
        assert http.post(turns, json={"message": "one"}).status_code == 200
        save_snapshot(redis)  # Redis comes back with this: the session after turn one

        outcome: list[httpx.Response] = []
        keyed = {"Idempotency-Key": "turn-2"}
        inflight = threading.Thread(
            target=lambda: outcome.append(
                http.post(turns, json={"message": "slow:1"}, headers=keyed)
            )
        )
        inflight.start()
        time.sleep(0.4)  # the agent is sleeping inside the turn
        assert redis.process is not None
        redis.process.kill()  # kill -9, mid-turn
        redis.stop()
        inflight.join(15)
        [failed] = outcome
        assert failed.status_code == 503, failed.text
        assert failed.json()["type"] == PROBLEM + "store-unavailable"
        redis.start()

        # The client retries the unacknowledged turn under its key, then goes on.
        statuses = []
        for _ in range(20):
            retried = http.post(turns, json={"message": "slow:1"}, headers=keyed)
            statuses.append(retried.status_code)
            if retried.status_code != 503:
                break
            time.sleep(0.25)
        assert retried.status_code == 200, (statuses, retried.text)
        last = http.post(turns, json={"message": "two"})
        assert last.status_code == 200, last.text

        stored = http.get(f"/evals/sessions/{session}").json()["run"]
        assert stored["userMessages"] == ["one", "slow:1", "two"]
        assert stored["turns"] == 3
        # the agent was rebuilt from the store: it counts the stored turns, not its memory
        assert stored["reply"] == "two #3 on A restored history=4"
