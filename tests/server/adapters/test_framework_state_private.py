"""Framework state stays in the service: two adapters under the safe trace policy over
one real Redis (in process, httpx.ASGITransport), serving a pydantic-ai agent whose tools
return secrets. The stored run keeps the framework's state in clear, so the replica that
continues the conversation knows what the tools said; no response of either replica
(turns, a relayed approval, an idempotent replay, attach) carries the state or a secret.
An ordinary agent's responses are the very bytes the store holds, as before."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import msgspec
import pytest

pytest.importorskip("pydantic_ai")

from adapterfakes import streaming_function_model
from evalport.protocol import Message, TracePolicy
from evalport.protocol.runtime import FRAMEWORK_STATE, TurnContext
from evalport.server import EvalAdapter
from evalport.server.adapters import PydanticAIAgent
from evalport.server.stores import RedisStore
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from support.redis import RedisServer, redis_fixture

pytestmark = pytest.mark.e2e

TOKEN = "framework-state-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PIN = "pin-7f3a9c-never-sent"  # what the vault tool returns
VOUCHER = "voucher-Q8Z2-never-sent"  # what the gated refund tool returns
SECRETS = (PIN.encode(), VOUCHER.encode())
MARK = f'"{FRAMEWORK_STATE}"'.encode()


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: answers from the whole history it was sent, never repeating a secret."""
    users = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    returns = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        names = [p.tool_name for p in last.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart("done: " + ", ".join(names))])
    text = users[-1]
    if text.startswith("open"):
        return ModelResponse(parts=[ToolCallPart("vault", {})])
    if text.startswith("refund"):
        return ModelResponse(parts=[ToolCallPart("refund", {"order_id": "A1"})])
    known = any(PIN in part.model_response_str() for part in returns)
    return ModelResponse(parts=[TextPart(f"pin known: {known} ({len(users)} messages)")])


def vault_agent() -> PydanticAIAgent:
    agent = Agent(streaming_function_model(respond), name="vault")

    @agent.tool_plain
    def vault() -> str:
        """Read the customer's vault."""
        return f"the pin is {PIN}"

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order (a person approves)."""
        return f"refunded {order_id} with {VOUCHER}"

    return PydanticAIAgent(agent)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    yield from redis_fixture()


@pytest.fixture
async def replicas(
    redis_server: RedisServer,
) -> AsyncIterator[tuple[list[EvalAdapter], list[httpx.AsyncClient]]]:
    prefix = f"fw{uuid.uuid4().hex[:8]}:"
    adapters = [
        EvalAdapter(
            vault_agent(),
            token=TOKEN,
            policy=TracePolicy.safe(),
            store=RedisStore(redis_server.url, prefix=prefix),
        )
        for _ in "AB"
    ]
    clients = [
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=adapter.app()),
            base_url="http://replica",
            headers=AUTH,
            timeout=30,
        )
        for adapter in adapters
    ]
    yield adapters, clients
    for client in clients:
        await client.aclose()
    for adapter in adapters:
        await adapter.aclose()


def private(response: httpx.Response) -> dict[str, Any]:
    """The response's run, after checking that it carries no framework state nor secret."""
    assert response.status_code == 200, response.text
    assert MARK not in response.content, response.text
    for secret in SECRETS:
        assert secret not in response.content, response.text
    run: dict[str, Any] = response.json()["run"]
    return run


async def test_state_stays_in_the_store_and_the_conversation_continues_elsewhere(
    replicas: tuple[list[EvalAdapter], list[httpx.AsyncClient]],
) -> None:
    (adapter, _), (a, b) = replicas
    created = await a.post("/evals/sessions", json={})
    assert created.status_code == 201, created.text
    session = created.json()["sessionId"]
    turns = f"/evals/sessions/{session}/turns"

    first = private(await a.post(turns, json={"message": "open my vault"}))
    assert first["reply"] == "done: vault"
    (execution,) = first["steps"][0]["toolExecutions"]
    assert execution["result"]["hash"].startswith("sha256:")  # the policy digested it
    # B rebuilds the session from the store: the state it restores holds the pin
    second = private(await b.post(turns, json={"message": "what is my pin?"}))
    assert second["reply"] == "pin known: True (2 messages)"

    # a turn suspended on A, decided on B (relayed to A, which answers)
    suspended = private(await a.post(turns, json={"message": "refund order A1"}))
    (pending,) = suspended["pendingApprovals"]
    decided = private(
        await b.post(
            f"/evals/sessions/{session}/approvals",
            json={"decisions": {pending["callId"]: {"decision": "approve"}}},
        )
    )
    assert decided["status"] == "completed" and decided["reply"] == "done: refund"

    # an idempotent turn on A, replayed from the store's record on B
    keyed = {"Idempotency-Key": "k-1"}
    answered = await a.post(turns, json={"message": "and my pin?"}, headers=keyed)
    assert private(answered)["reply"] == "pin known: True (4 messages)"
    replayed = await b.post(turns, json={"message": "and my pin?"}, headers=keyed)
    private(replayed)
    assert replayed.content == answered.content

    # attach, on either replica, answers the run as the last response sent it
    for client in (a, b):
        attached = await client.get(f"/evals/sessions/{session}")
        private(attached)
        assert attached.content == answered.content

    # the store keeps the state in clear: the run as sent, plus the state events
    stored = await adapter.sessions.store.read(session)
    assert stored is not None
    assert MARK in stored.run and all(secret in stored.run for secret in SECRETS)
    kept = msgspec.json.decode(stored.run)["run"]
    states = [event for event in kept["events"] if event["name"] == FRAMEWORK_STATE]
    assert len(states) == 4 and {event["data"]["framework"] for event in states} == {"pydantic-ai"}
    kept["events"] = [event for event in kept["events"] if event["name"] != FRAMEWORK_STATE]
    assert kept == answered.json()["run"]


async def test_an_ordinary_agents_responses_are_the_stored_bytes() -> None:
    """Without framework state, the run is encoded once: what the store holds is sent."""

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        ctx.event("noted", {"message": message})
        return f"echo {message}"

    for policy in (None, TracePolicy.safe()):
        adapter = EvalAdapter(agent, token=TOKEN, policy=policy)
        transport = httpx.ASGITransport(app=adapter.app())
        async with httpx.AsyncClient(
            transport=transport, base_url="http://one", headers=AUTH
        ) as http:
            session = (await http.post("/evals/sessions", json={})).json()["sessionId"]
            for message in ("one", "two"):
                sent = await http.post(
                    f"/evals/sessions/{session}/turns", json={"message": message}
                )
                assert sent.status_code == 200, sent.text
                stored = await adapter.sessions.store.read(session)
                assert stored is not None and stored.run == sent.content
            attached = await http.get(f"/evals/sessions/{session}")
            assert attached.content == sent.content
            assert [e["name"] for e in attached.json()["run"]["events"]] == ["noted", "noted"]
        await adapter.aclose()
