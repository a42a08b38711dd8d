"""Each framework's conversation continues on any replica: two real ``evalport serve``
processes over one real Redis, the session alternating A/B/A/B, with a turn suspended
on A and decided on B (the decision is relayed to A, which holds the turn)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.redis import RedisServer, redis_fixture
from support.replicas import serve_args
from support.servers import free_port, running_process

pytestmark = pytest.mark.e2e

TOKEN = "framework-replicas-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SERVED = str(Path(__file__).with_name("served_frameworks.py"))


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    yield from redis_fixture()


@contextlib.contextmanager
def two_replicas(target: str, store: str) -> Iterator[list[str]]:
    with contextlib.ExitStack() as stack:
        urls = []
        for name in "AB":
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            stack.enter_context(
                running_process(
                    serve_args(target, port, store, "--turn-timeout", "30"),
                    health_url=f"{url}/health",
                    env={"EVALPORT_TOKEN": TOKEN, "REPLICA": name},
                    timeout=90,
                )
            )
            urls.append(url)
        yield urls


def turn(http: httpx.Client, session: str, message: str) -> dict:
    response = http.post(f"/evals/sessions/{session}/turns", json={"message": message})
    assert response.status_code == 200, response.text
    return response.json()["run"]


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("pydantic_ai_agent", ""),
        ("openai_agents_agent", "billing: "),
        ("langgraph_agent", ""),
    ],
    ids=["pydantic-ai", "openai-agents", "langgraph"],
)
def test_a_conversation_alternating_between_replicas_remembers_itself(
    redis_server: RedisServer, name: str, prefix: str
) -> None:
    pytest.importorskip(
        {"pydantic_ai_agent": "pydantic_ai", "openai_agents_agent": "agents"}.get(name, "langgraph")
    )
    store = redis_server.url.rsplit("/", 1)[0] + "/3"
    with two_replicas(f"{SERVED}:{name}", store) as (a, b):
        on_a = httpx.Client(base_url=a, headers=AUTH, timeout=60)
        on_b = httpx.Client(base_url=b, headers=AUTH, timeout=60)
        with on_a, on_b:
            created = on_a.post("/evals/sessions", json={"caseId": name})
            assert created.status_code == 201, created.text
            session = created.json()["sessionId"]
            first = turn(on_a, session, "my name is Ada")
            assert first["reply"] == "you are Ada (1 messages)"
            second = turn(on_b, session, "what is my name?")
            assert second["reply"] == "you are Ada (2 messages)"
            suspended = turn(on_a, session, "please refund order A1")
            assert suspended["status"] == "in_progress", suspended
            (pending,) = suspended["pendingApprovals"]
            assert (pending["tool"], pending["arguments"]) == ("refund", {"order_id": "A1"})
            decided = on_b.post(
                f"/evals/sessions/{session}/approvals",
                json={"decisions": {pending["callId"]: {"decision": "approve"}}},
            )
            assert decided.status_code == 200, decided.text
            third = decided.json()["run"]
            assert third["status"] == "completed"
            assert third["reply"] == f"{prefix}refund -> refunded A1"
            fourth = turn(on_b, session, "what is my name?")
            assert fourth["reply"] == f"{prefix}you are Ada (4 messages)"
            assert fourth["turns"] == 4 and fourth["status"] == "completed"
            refunds = [t for t in fourth["tools"] if t["tool_call"]["name"] == "refund"]
            assert [t["approval"]["state"] for t in refunds] == ["approved"]
            assert refunds[0]["result"] == "refunded A1"
