"""A session's run has a size limit (issue 16 item 11): 40 turns of 900 KB made a 36 MB
run, returned on every turn. Past ``Limits.max_run_bytes`` a turn is a 413
``run-too-large`` problem naming the limit, before the agent runs; the session stays
readable and deletable. Real uvicorn on a loopback port."""

from __future__ import annotations

import httpx
from evalport.protocol import ProblemType
from evalport.server import EvalAdapter, Limits
from serverkit import AUTH, TOKEN
from support.servers import running_server

LIMIT = 8192


def test_a_turn_past_the_run_size_limit_is_a_413_naming_it() -> None:
    ran: list[str] = []

    def agent(message: str, history: object, ctx: object) -> str:
        ran.append(message)
        return "ok"

    adapter = EvalAdapter(agent, token=TOKEN, limits=Limits(max_run_bytes=LIMIT))
    with (
        running_server(adapter.app()) as base,
        httpx.Client(base_url=base, headers=AUTH, timeout=10) as http,
    ):
        session = http.post("/evals/sessions", json={}).json()["sessionId"]
        turns = f"/evals/sessions/{session}/turns"
        statuses = []
        for n in range(20):
            response = http.post(turns, json={"message": f"{n:02d}" + "x" * 998})
            statuses.append(response.status_code)
            if response.status_code != 200:
                break
        assert statuses[-1] == 413 and set(statuses[:-1]) == {200}, statuses
        assert 2 <= len(statuses) - 1 < LIMIT // 1000
        problem = response.json()
        assert response.headers["content-type"] == "application/problem+json"
        assert problem["type"] == ProblemType.RUN_TOO_LARGE
        assert problem["title"] == "Run too large"
        assert "max_run_bytes" in problem["detail"] and "--max-run-bytes" in problem["detail"]
        assert str(LIMIT) in problem["detail"]
        assert len(ran) == len(statuses) - 1  # the refused turn never reached the agent

        stored = http.get(f"/evals/sessions/{session}")
        assert stored.status_code == 200
        assert len(stored.content) <= LIMIT + 1100  # past it by one accepted turn at most
        assert stored.json()["run"]["turns"] == len(ran)
        # a short message still fits until the run is at the limit; then nothing does
        assert http.post(turns, json={"message": "x" * 2000}).status_code == 413
        assert http.delete(f"/evals/sessions/{session}").status_code == 204

        fresh = http.post("/evals/sessions", json={}).json()["sessionId"]
        assert (
            http.post(f"/evals/sessions/{fresh}/turns", json={"message": "hi"}).status_code == 200
        )
