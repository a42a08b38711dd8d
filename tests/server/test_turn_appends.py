"""A long session costs the server what each turn adds (issue 18 item 2, the server side):
the live agent keeps its run as objects, the store is not asked for the run it already
holds, a turn is appended to the stored run's log (written whole only when the log would
outgrow the run), the key's record keeps the turn's delta, and only the sessions that
took a turn last stay hot. Checked on what the store receives, never on timings."""

from __future__ import annotations

import httpx
from evalport.protocol import AgentRun, apply_delta, decode_answer, decode_run
from evalport.server import Limits
from evalport.server.stores import BeginTurn, Finish, FinishTurn, MemoryStore, TurnStart
from serverkit import Build, echo_agent, open_session


class Watched(MemoryStore):
    """The memory store, noting what each turn reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.read_runs: list[int] = []  # bytes of run and log each begin_turn returned
        self.wholes: list[int] = []  # bytes of each whole write of a finish
        self.appends: list[int] = []  # bytes of each appended turn
        self.records: list[int] = []  # bytes of each idempotency record

    async def begin_turn(self, begin: BeginTurn) -> TurnStart:
        start = await super().begin_turn(begin)
        if start.session is not None:
            held = start.session
            self.read_runs.append(len(held.run) + sum(map(len, held.appended)))
        return start

    async def finish_turn(self, finish: FinishTurn) -> Finish:
        if finish.append:
            self.appends.append(len(finish.append))
        else:
            self.wholes.append(len(finish.run))
        if finish.record:
            self.records.append(len(finish.record))
        return await super().finish_turn(finish)


async def test_a_turn_stores_what_it_added_and_reads_nothing_it_holds(build: Build) -> None:
    store = Watched()
    _, client = build(echo_agent, store=store, limits=Limits(idempotency_keys=4))
    session = await open_session(client)
    copy = AgentRun(session_id=session)
    turns = 64
    for number in range(1, turns + 1):
        response = await client.post(
            f"/evals/sessions/{session}/turns?since={copy.turns}",
            json={"message": f"A{number}"},
            headers={"Idempotency-Key": f"k{number}"},
        )
        assert response.status_code == 200, response.text
        delta = decode_answer(response.content)
        assert not isinstance(delta, AgentRun)
        copy = apply_delta(copy, delta)
    whole = decode_run((await client.get(f"/evals/sessions/{session}")).content)
    assert copy == whole and whole.turns == turns
    # the live agent held the stored run: after the first turn, no run was read back
    assert store.read_runs[1:] == [0] * (turns - 1)
    # written whole each time the log would outgrow the run: about log2(turns) times
    assert 1 <= len(store.wholes) <= 8 and len(store.wholes) + len(store.appends) == turns
    assert max(store.appends) < 1.2 * min(store.appends)  # what a turn adds: flat
    assert max(store.records[-8:]) < 1.2 * min(store.records[:8])  # a delta, not the run


async def test_a_repeat_rebuilds_the_run_from_the_log(build: Build) -> None:
    """A record kept as a delta answers a whole-run repeat after later turns were
    appended: the run then, byte for byte what attach said then."""
    _, client = build(echo_agent)
    session = await open_session(client)
    for number in range(1, 6):
        await client.post(f"/evals/sessions/{session}/turns", json={"message": f"A{number}"})

    async def keyed(query: str) -> httpx.Response:
        return await client.post(
            f"/evals/sessions/{session}/turns{query}",
            json={"message": "A6"},
            headers={"Idempotency-Key": "k6"},
        )

    first = await keyed("?since=5")
    then = await client.get(f"/evals/sessions/{session}")
    for _ in range(5):
        await client.post(f"/evals/sessions/{session}/turns?since=6", json={"message": "x"})
    assert (await keyed("")).content == then.content
    assert (await keyed("?since=5")).content == first.content


async def test_only_the_latest_sessions_stay_hot(build: Build) -> None:
    """A session that falls out of the hot ones parks its run (kept encoded: its bytes
    are served as they are) and takes its next turn as before."""
    from evalport.server._live import HOT_SESSIONS  # the bound itself, not a public name

    adapter, client = build(echo_agent)
    sessions = [await open_session(client) for _ in range(HOT_SESSIONS + 1)]
    for message in ("A1", "A2"):  # (a session is hot from its second turn)
        for session in sessions:
            response = await client.post(
                f"/evals/sessions/{session}/turns", json={"message": message}
            )
            assert response.status_code == 200
    coldest = adapter.sessions.live.get(sessions[0])
    hottest = adapter.sessions.live.get(sessions[-1])
    assert coldest is not None and hottest is not None
    assert coldest.run_envelope is coldest.run_envelope  # parked: the same bytes
    assert hottest.run_envelope is not hottest.run_envelope  # hot: encoded on demand
    response = await client.post(f"/evals/sessions/{sessions[0]}/turns", json={"message": "A3"})
    assert decode_run(response.content).reply == "A3 #3"
    assert coldest.run_envelope is not coldest.run_envelope  # hot again
