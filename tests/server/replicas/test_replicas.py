"""Two real ``evalport serve`` processes over one real Redis: sessions move between them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.redis import RedisServer
from support.replicas import Replica, running_replicas

pytestmark = pytest.mark.e2e

TOKEN = "replica-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT = str(Path(__file__).with_name("agents.py")) + ":agent"
STORE = "urn:evalport:problem:"


def store_url(redis_server: RedisServer) -> str:
    # A database of its own per module, so that other tests' sessions never count here.
    return redis_server.url.rsplit("/", 1)[0] + "/1"


@pytest.fixture(scope="module")
def replicas(redis_server: RedisServer) -> Iterator[list[Replica]]:
    options = ["--turn-timeout", "5", "--session-ttl", "30"]
    with running_replicas(
        AGENT, store=store_url(redis_server), token=TOKEN, options=options
    ) as started:
        yield started


def client(replica: Replica) -> httpx.Client:
    return httpx.Client(base_url=replica.url, headers=AUTH, timeout=10)


def open_session(http: httpx.Client) -> str:
    response = http.post("/evals/sessions", json={"caseId": "replicas"})
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


def turn(http: httpx.Client, session: str, message: str, **headers: str) -> httpx.Response:
    return http.post(f"/evals/sessions/{session}/turns", json={"message": message}, headers=headers)


def test_a_session_opened_on_a_continues_on_b_and_back(replicas: list[Replica]) -> None:
    a, b = replicas
    with client(a) as on_a, client(b) as on_b:
        session = open_session(on_a)
        first = turn(on_a, session, "one").json()["run"]
        assert first["reply"] == "one #1 on A history=0"
        second = turn(on_b, session, "two").json()["run"]
        assert second["reply"] == "two #2 on B restored history=2"
        # A's own agent is stale now: it notices and rebuilds from the stored run.
        third = turn(on_a, session, "three").json()["run"]
        assert third["reply"] == "three #3 on A restored history=4"
        attached = on_b.get(f"/evals/sessions/{session}").json()["run"]
        assert attached["turns"] == 3
        assert attached["userMessages"] == ["one", "two", "three"]
        assert [step["turn"] for step in attached["steps"]] == [1, 2, 3]
        assert on_b.delete(f"/evals/sessions/{session}").status_code == 204
        gone = turn(on_a, session, "four")
        assert gone.status_code == 404
        assert gone.json()["type"] == STORE + "session-not-found"


async def test_concurrent_turns_on_a_and_b_give_exactly_one_409(
    replicas: list[Replica],
) -> None:
    a, b = replicas
    with client(a) as on_a:
        sessions = [open_session(on_a) for _ in range(2)]
    async with (
        httpx.AsyncClient(base_url=a.url, headers=AUTH, timeout=10) as on_a,
        httpx.AsyncClient(base_url=b.url, headers=AUTH, timeout=10) as on_b,
    ):
        for session in sessions:
            responses = await asyncio.gather(
                *(
                    http.post(f"/evals/sessions/{session}/turns", json={"message": "slow:0.8"})
                    for http in (on_a, on_b)
                )
            )
            statuses = sorted(response.status_code for response in responses)
            assert statuses == [200, 409], [response.text for response in responses]
            busy = next(response for response in responses if response.status_code == 409)
            assert busy.json()["type"] == STORE + "session-busy"
            run = (await on_b.get(f"/evals/sessions/{session}")).json()["run"]
            assert run["turns"] == 1 and run["status"] == "completed"


def test_approvals_posted_to_any_replica_reach_the_one_holding_the_turn(
    replicas: list[Replica],
) -> None:
    a, b = replicas
    with client(a) as on_a, client(b) as on_b:
        session = open_session(on_a)
        suspended = turn(on_a, session, "approve").json()["run"]
        [pending] = suspended["pendingApprovals"]
        refused = turn(on_b, session, "hello")
        assert refused.status_code == 409
        assert refused.json()["type"] == STORE + "session-suspended"
        wrong = on_b.post(
            f"/evals/sessions/{session}/approvals",
            json={"decisions": {"nope": {"decision": "approve"}}},
        )
        assert wrong.status_code == 422  # A checked the ids and answered through B
        assert '$.decisions["nope"]' in {error["path"] for error in wrong.json()["errors"]}
        decisions = {"decisions": {pending["callId"]: {"decision": "approve"}}}
        relayed = on_b.post(f"/evals/sessions/{session}/approvals", json=decisions)
        assert relayed.status_code == 200, relayed.text
        assert relayed.json()["run"]["reply"] == "approved=True #1 on A"
        again = on_b.post(f"/evals/sessions/{session}/approvals", json=decisions)
        assert again.status_code == 409
        assert again.json()["type"] == STORE + "not-suspended"
        after = turn(on_b, session, "next").json()["run"]
        assert after["reply"] == "next #2 on B restored history=2"


def test_answers_posted_to_any_replica_reach_the_one_holding_the_turn(
    replicas: list[Replica],
) -> None:
    a, b = replicas
    with client(a) as on_a, client(b) as on_b:
        session = open_session(on_a)
        suspended = turn(on_a, session, "ask").json()["run"]
        [asked] = suspended["pendingInterrupts"]
        assert asked["kind"] == "choice"
        url = f"/evals/sessions/{session}/approvals"
        wrong = on_b.post(url, json={"decisions": {asked["id"]: {"decision": "approve"}}})
        assert wrong.status_code == 422  # A checked the shape and answered through B
        answer = {"decisions": {asked["id"]: {"decision": "answer", "answer": "M"}}}
        relayed = on_b.post(url, json=answer)
        assert relayed.status_code == 200, relayed.text
        run = relayed.json()["run"]
        assert run["reply"] == "size=M #1 on A" and run["interrupts"][0]["answer"] == "M"
        again = on_a.post(url, json=answer)
        assert again.status_code == 409
        assert again.json()["type"] == STORE + "not-suspended"


def test_approvals_for_a_turn_whose_replica_died_are_a_clear_409(
    redis_server: RedisServer,
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/6"
    with (
        running_replicas(AGENT, store=url, token=TOKEN) as (a, b),
        client(a) as on_a,
        client(b) as on_b,
    ):
        session = open_session(on_a)
        [pending] = turn(on_a, session, "approve").json()["run"]["pendingApprovals"]
        a.process.kill()
        a.process.wait(10)
        decisions = {"decisions": {pending["callId"]: {"decision": "approve"}}}
        orphan = on_b.post(f"/evals/sessions/{session}/approvals", json=decisions)
        assert orphan.status_code == 409
        assert orphan.json()["type"] == STORE + "session-busy"
        assert "is gone" in orphan.json()["detail"]
        assert on_b.delete(f"/evals/sessions/{session}").status_code == 204


def test_idempotent_retry_on_the_other_replica_replays(replicas: list[Replica]) -> None:
    a, b = replicas
    with client(a) as on_a, client(b) as on_b:
        session = open_session(on_a)
        key = {"Idempotency-Key": str(uuid.uuid4())}
        first = turn(on_a, session, "pay", **key)
        again = turn(on_b, session, "pay", **key)
        assert again.status_code == 200
        assert again.content == first.content
        reused = turn(on_b, session, "other", **key)
        assert reused.status_code == 422


def test_sessions_expire_on_every_replica(redis_server: RedisServer) -> None:
    options = ["--session-ttl", "1.0"]
    url = redis_server.url.rsplit("/", 1)[0] + "/2"
    with (
        running_replicas(AGENT, store=url, token=TOKEN, options=options) as (a, b),
        client(a) as on_a,
        client(b) as on_b,
    ):
        session = open_session(on_a)
        assert turn(on_b, session, "one").status_code == 200
        time.sleep(1.5)
        for http in (on_a, on_b):
            response = http.get(f"/evals/sessions/{session}")
            assert response.status_code == 404
            assert response.json()["type"] == STORE + "session-not-found"
        assert turn(on_a, session, "two").status_code == 404
