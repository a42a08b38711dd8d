"""Edges of the turn lifecycle through the adapter (regressions found in review)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
from evalport.server import EvalAdapter, TurnContext

HEADERS = {"Authorization": "Bearer t"}


async def open_session(client: httpx.AsyncClient) -> str:
    response = await client.post("/evals/sessions", headers=HEADERS, json={})
    return str(response.json()["sessionId"])


async def test_an_agent_that_lets_a_cancelled_error_escape_fails_its_turn() -> None:
    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        future = asyncio.get_running_loop().create_future()
        future.cancel()  # someone else cancelled what the agent waits for
        await future
        return "unreachable"

    adapter = EvalAdapter(agent, token="t")
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as client:
        session_id = await open_session(client)
        for message in ("one", "two"):
            response = await client.post(
                f"/evals/sessions/{session_id}/turns", headers=HEADERS, json={"message": message}
            )
            assert response.status_code == 200
            run = response.json()["run"]
            assert run["status"] == "failed"
            assert run["stopSignal"]["reason"] == "error"
            assert run["errorDetails"][-1]["type"].endswith("CancelledError")
    await adapter.aclose()


async def test_deleting_a_suspended_sync_agent_frees_its_worker_thread() -> None:
    released = threading.Event()

    def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        try:
            ctx.request_approval_sync("refund", {"order_id": "A1"})
        except BaseException:
            released.set()  # woke up: the thread goes back to the pool
            raise
        return "done"

    adapter = EvalAdapter(agent, token="t")
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as client:
        session_id = await open_session(client)
        response = await client.post(
            f"/evals/sessions/{session_id}/turns", headers=HEADERS, json={"message": "refund"}
        )
        assert response.json()["run"]["pendingApprovals"]
        assert (
            await client.delete(f"/evals/sessions/{session_id}", headers=HEADERS)
        ).status_code == 204
        assert await asyncio.to_thread(released.wait, 5.0), "the worker thread never woke up"
    await adapter.aclose()


def test_a_non_ascii_token_is_refused_at_start_up() -> None:
    import pytest

    with pytest.raises(ValueError, match="printable ASCII"):
        EvalAdapter(lambda message, history, ctx: "ok", token="pässwörd")


async def test_a_content_length_of_non_ascii_digits_is_not_a_500() -> None:
    adapter = EvalAdapter(lambda message, history, ctx: "ok", token="t")
    app = adapter.app()
    sent: list[dict[str, Any]] = []
    body = b'{"message": "hi"}'
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/evals/sessions",
        "raw_path": b"/evals/sessions",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"authorization", b"Bearer t"),
            (b"content-type", b"application/json"),
            (b"content-length", "²".encode("latin-1")),
        ],
        "server": ("agent.test", 80),
        "client": ("127.0.0.1", 1234),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    assert status < 500
    await adapter.aclose()


async def test_sessions_the_memory_store_drops_on_its_own_are_reported_by_purge() -> None:
    from evalport.server.stores import MemoryStore
    from storekit import new

    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    for session_id in ("a", "b"):
        assert await store.create(new(session_id, b"{}", b"{}", ttl=10, limit=2))
    now[0] = 100.0  # both expired; a full cap purges them while creating "c"
    assert await store.create(new("c", b"{}", b"{}", ttl=10, limit=2))
    assert await store.read("c") is not None
    # The adapter closes agents of exactly what purge_expired reports: the two dropped
    # while creating "c" must be among them, or their agents would stay in memory.
    assert sorted(await store.purge_expired()) == ["a", "b"]
    assert await store.purge_expired() == []


async def test_closing_the_adapter_lets_a_decision_in_flight_finish() -> None:
    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        await ctx.request_approval("refund", {"order_id": "A1"}, call_id="c1")
        await asyncio.sleep(0.2)
        return "refunded"

    adapter = EvalAdapter(agent, token="t")
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as client:
        session_id = await open_session(client)
        await client.post(
            f"/evals/sessions/{session_id}/turns", headers=HEADERS, json={"message": "refund"}
        )
        decision = asyncio.create_task(
            client.post(
                f"/evals/sessions/{session_id}/approvals",
                headers=HEADERS,
                json={"decisions": {"c1": {"decision": "approve"}}},
            )
        )
        await asyncio.sleep(0.05)
        await adapter.aclose()  # shutting down while the resumed turn still runs
        response = await decision
    assert response.status_code == 200
    run = response.json()["run"]
    assert (run["status"], run["reply"]) == ("completed", "refunded")
