"""Hot sessions (runs kept as objects, :mod:`evalport.server._live`): an attach never
sends a turn the store does not hold yet, a session pushed out of the hot ones while
its turn ran parks its run once the turn is stored, and a session is hot from its second
turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from evalport.protocol import RunDelta, decode_answer, decode_run
from evalport.server.stores import Finish, FinishTurn, MemoryStore, StoreUnavailable
from serverkit import Build, open_session


class FailingFinish(MemoryStore):
    """The memory store, whose finish can be held (``entered`` set, waiting for ``go``)
    and then fail as a store that went away."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def finish_turn(self, finish: FinishTurn) -> Finish:
        if not self.failing:
            return await super().finish_turn(finish)
        self.entered.set()
        await self.go.wait()
        raise StoreUnavailable("the store went away")


async def test_an_attach_never_sends_a_turn_not_yet_stored(build: Build) -> None:
    store = FailingFinish()
    _, client = build(store=store)
    session = await open_session(client)
    assert (
        await client.post(f"/evals/sessions/{session}/turns", json={"message": "A1"})
    ).is_success
    store.failing = True
    turn = asyncio.create_task(
        client.post(f"/evals/sessions/{session}/turns", json={"message": "A2"})
    )
    await asyncio.wait_for(store.entered.wait(), 5)  # the turn ended; its finish in flight
    during = await client.get(f"/evals/sessions/{session}?since=0")  # (cut from the hot run)
    delta = decode_answer(during.content)
    assert isinstance(delta, RunDelta) and delta.run.turns == 1
    store.go.set()
    assert (await asyncio.wait_for(turn, 5)).status_code == 503
    after = await client.get(f"/evals/sessions/{session}")
    assert decode_run(after.content).turns == 1


async def test_a_session_pushed_out_while_its_turn_ran_parks_once_stored(build: Build) -> None:
    from evalport.server._live import HOT_SESSIONS  # the bound itself, not a public name

    started, gate = asyncio.Event(), asyncio.Event()

    async def agent(message: str, history: Any, ctx: Any) -> str:
        if message == "slow":
            started.set()
            await gate.wait()
        return message

    adapter, client = build(agent)
    slow_session = await open_session(client)
    slow = asyncio.create_task(
        client.post(f"/evals/sessions/{slow_session}/turns", json={"message": "slow"})
    )
    await asyncio.wait_for(started.wait(), 5)
    others = [await open_session(client) for _ in range(HOT_SESSIONS)]
    for session in others:
        response = await client.post(f"/evals/sessions/{session}/turns", json={"message": "hi"})
        assert response.status_code == 200
    gate.set()
    assert (await asyncio.wait_for(slow, 5)).status_code == 200
    live = adapter.sessions.live.get(slow_session)
    assert live is not None
    assert live.run_envelope is live.run_envelope  # parked: the same bytes
    response = await client.post(f"/evals/sessions/{slow_session}/turns", json={"message": "again"})
    assert decode_run(response.content).reply == "again"


async def test_an_attach_of_a_hot_session_checks_its_query(build: Build) -> None:
    """The attach cut from a hot run decodes its query as every attach does: an unknown
    parameter (even a blank one) is the 422 that names it."""
    _, client = build()
    session = await open_session(client)
    assert (
        await client.post(f"/evals/sessions/{session}/turns", json={"message": "A1"})
    ).is_success
    for query in ("since=0&j=", "since=0&x=1", "j="):
        response = await client.get(f"/evals/sessions/{session}?{query}")
        assert response.status_code == 422, (query, response.text)
        assert "Unknown query parameter" in response.json()["detail"]


async def test_the_hot_sessions_are_bounded_by_their_runs_bytes_too(
    build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the byte budget of hot runs the coldest park, however few the sessions; the
    latest stays hot even alone past it."""
    from evalport.server import _live  # the bound itself, not a public name

    adapter, client = build()
    sessions = [await open_session(client) for _ in range(3)]
    for session in sessions:  # (a session is hot from its second turn)
        turn = await client.post(f"/evals/sessions/{session}/turns", json={"message": "hi"})
        assert turn.status_code == 200
    sizes = []
    for session in sessions:
        turn = await client.post(f"/evals/sessions/{session}/turns", json={"message": "x" * 9000})
        assert turn.status_code == 200
        sizes.append(len(turn.content))
        if len(sizes) == 1:  # room for two such runs, not three
            monkeypatch.setattr(_live, "HOT_BYTES", sizes[0] * 5 // 2)
    runs = [adapter.sessions.live.get(session) for session in sessions]
    assert all(run is not None for run in runs)
    coldest, middle, latest = runs
    assert coldest is not None and coldest.run_envelope is coldest.run_envelope  # parked
    assert middle is not None and middle.run_envelope is not middle.run_envelope  # hot
    assert latest is not None and latest.run_envelope is not latest.run_envelope  # hot
    big = await client.post(
        f"/evals/sessions/{sessions[2]}/turns", json={"message": "y" * 3 * sizes[0]}
    )
    assert big.status_code == 200
    assert middle.run_envelope is middle.run_envelope  # parked: the latest alone is past it
    assert latest.run_envelope is not latest.run_envelope
    again = await client.post(f"/evals/sessions/{sessions[0]}/turns", json={"message": "z"})
    assert decode_run(again.content).turns == 3


async def test_a_first_turn_parks_its_run_and_a_second_keeps_it(build: Build) -> None:
    """Most sessions are short: a new session's first turn parks its run once stored (it
    decodes it again if a second turn comes); from its second turn on the run stays
    objects, and creating sessions pushes no hot session out."""
    from evalport.server._live import HOT_SESSIONS  # the bound itself, not a public name

    adapter, client = build()
    session = await open_session(client)
    live = adapter.sessions.live.get(session)
    assert live is not None
    turn = await client.post(f"/evals/sessions/{session}/turns", json={"message": "one"})
    assert turn.status_code == 200
    assert live.run_envelope is live.run_envelope  # parked: the same bytes
    turn = await client.post(f"/evals/sessions/{session}/turns", json={"message": "two"})
    assert decode_run(turn.content).turns == 2
    assert live.run_envelope is not live.run_envelope  # hot: encoded when asked
    for _ in range(HOT_SESSIONS + 1):
        await open_session(client)
    assert live.run_envelope is not live.run_envelope  # still hot
