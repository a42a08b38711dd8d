"""The clients of one origin: every pool stays small at any concurrency (a session holds
one client for its life), over httpx's own transport, on real sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from evalport.client import HttpTarget
from evalport.client._core._clients import PER_CLIENT, ClientSet
from evalport.server import EvalAdapter
from support.servers import running_server


def made() -> tuple[ClientSet, list[httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def make() -> httpx.AsyncClient:
        clients.append(httpx.AsyncClient())
        return clients[-1]

    return ClientSet(make), clients


def test_callers_spread_over_as_many_clients_as_they_need() -> None:
    bank, clients = made()
    held = [bank.hold() for _ in range(2 * PER_CLIENT + 1)]
    assert len(clients) == 3
    assert [held.count(client) for client in clients] == [PER_CLIENT, PER_CLIENT, 1]


def test_a_released_place_is_taken_before_a_new_client_is_made() -> None:
    bank, clients = made()
    held = [bank.hold() for _ in range(2 * PER_CLIENT)]
    bank.release(held[0])
    bank.release(held[0])
    assert bank.hold() is held[0] and len(clients) == 2
    for client in held:
        bank.release(client)
    assert bank.hold() in clients and len(clients) == 2


def test_a_callers_transport_is_the_one_pool() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    bank = ClientSet(lambda: httpx.AsyncClient(transport=transport), per_client=None)
    assert len({bank.hold() for _ in range(100)}) == 1


async def test_a_closed_set_makes_no_client() -> None:
    bank, _ = made()
    await bank.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        bank.hold()


def gated(sessions: int) -> Any:
    """An agent whose turns answer once ``sessions`` of them are in flight together."""
    state: dict[str, Any] = {"in": 0}

    async def agent(message: str, history: list[Any], ctx: Any) -> str:
        gate = state.setdefault("gate", asyncio.Event())
        state["in"] += 1
        if state["in"] == sessions:
            gate.set()
        await gate.wait()
        return f"echo {message}"

    return agent


@pytest.mark.e2e
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_sessions_in_flight_together_each_hold_a_client_that_few_others_share(
    stream: bool,
) -> None:
    sessions = 40
    peers: set[tuple[str, int]] = set()
    app = EvalAdapter(gated(sessions), token="t" * 24).app()

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            peers.add(tuple(scope["client"]))

        async def late_end(message: Any) -> None:
            # The end of each body comes apart from its last bytes, as under load: a
            # client that stops at a stream's final event leaves its connection half read.
            if message["type"] == "http.response.body" and not message.get("more_body"):
                await send({**message, "body": message.get("body", b""), "more_body": True})
                await asyncio.sleep(0.05)
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await app(scope, receive, late_end)

    with running_server(recorded) as url:
        async with HttpTarget(url, token="t" * 24, stream=stream) as target:
            opened = await asyncio.gather(*(target.open() for _ in range(sessions)))
            clients = target._channel.clients.clients
            assert len(clients) == -(-sessions // PER_CLIENT)
            turns = await asyncio.gather(*(s.send(f"m{i}") for i, s in enumerate(opened)))
            assert [turn.reply for turn in turns] == [f"echo m{i}" for i in range(sessions)]
            for session in opened:
                await session.close()
            assert target._channel.clients.clients == clients  # none made since
    # 121 calls (health, then create, turn, delete per session) over connections kept
    # alive between calls (a streamed turn's read to its end, not dropped half read): a
    # client opens one for each session it holds at once, and never another
    assert len(peers) <= sessions
