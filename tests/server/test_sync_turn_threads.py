"""Sync turns in worker threads (issue 16 item 3), on real uvicorn.

A timed-out sync turn's thread cannot be stopped: it ran on, changing the agent's state,
and the next turn of the session ran beside it; six sessions stuck in slow sync turns
took the whole default pool and a trivial turn elsewhere got 504. Now the session stays
busy (409 ``session-busy``) until the thread really returns, so it holds one thread at
most, and the pool's size is ``Limits.turn_threads``.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from evalport.protocol import ProblemType
from evalport.protocol.runtime import TurnContext, as_factory
from evalport.server import EvalAdapter, Limits
from serverkit import AUTH, TOKEN
from support.servers import running_server

pytestmark = pytest.mark.e2e


class Slow:
    """A sync agent: ``sleep:S`` sleeps S seconds in its thread, then counts the turn."""

    threads: set[str] = set()
    active = 0
    peak = 0  # the most turns that ran at once
    lock = threading.Lock()

    def __init__(self, info: object) -> None:
        self.done: list[str] = []

    def turn(self, message: str, ctx: TurnContext) -> str:
        with self.lock:
            Slow.threads.add(threading.current_thread().name)
            Slow.active += 1
            Slow.peak = max(Slow.peak, Slow.active)
        try:
            if message.startswith("sleep:"):
                time.sleep(float(message[6:]))
        finally:
            with self.lock:
                Slow.active -= 1
        self.done.append(message)
        return f"{message} after {len(self.done) - 1}"


def test_a_timed_out_sync_turn_keeps_its_session_busy_until_its_thread_returns() -> None:
    adapter = EvalAdapter(
        as_factory(Slow), token=TOKEN, limits=Limits(turn_timeout=0.5, turn_threads=2)
    )
    with (
        running_server(adapter.app()) as base,
        httpx.Client(base_url=base, headers=AUTH, timeout=15) as http,
    ):
        stuck = http.post("/evals/sessions", json={}).json()["sessionId"]
        turns = f"/evals/sessions/{stuck}/turns"
        timed_out = http.post(turns, json={"message": "sleep:4"})
        assert timed_out.status_code == 504, timed_out.text
        started = time.monotonic()
        # While its thread runs, the session takes no turn: none runs beside it, and the
        # retries take no thread of the pool.
        for _ in range(5):
            busy = http.post(turns, json={"message": "next"})
            assert busy.status_code == 409, busy.text
            assert busy.json()["type"] == ProblemType.SESSION_BUSY
            assert "thread" in busy.json()["detail"]
        # Another session's trivial turn finds a free thread at once.
        other = http.post("/evals/sessions", json={}).json()["sessionId"]
        quick = http.post(f"/evals/sessions/{other}/turns", json={"message": "hi"})
        assert quick.status_code == 200, quick.text
        assert time.monotonic() - started < 3.0  # (the stuck thread still runs)
        # Once the thread has returned, the session goes on.
        deadline = time.monotonic() + 10
        while (answer := http.post(turns, json={"message": "next"})).status_code == 409:
            assert time.monotonic() < deadline, answer.text
            time.sleep(0.1)
        assert answer.status_code == 200, answer.text
        assert time.monotonic() - started >= 3.0
        run = answer.json()["run"]
        assert run["userMessages"] == ["sleep:4", "next"]
        # the timed-out turn's code did finish (its effect on the agent is its own) but
        # the next turn started after it, never beside it
        assert run["reply"] == "next after 1"
    assert {name for name in Slow.threads if name.startswith("evalport-turn")} == Slow.threads


def test_the_pool_has_turn_threads_threads() -> None:
    adapter = EvalAdapter(
        as_factory(Slow), token=TOKEN, limits=Limits(turn_timeout=10, turn_threads=3)
    )
    with (
        running_server(adapter.app()) as base,
        httpx.Client(base_url=base, headers=AUTH, timeout=20) as http,
    ):
        sessions = [http.post("/evals/sessions", json={}).json()["sessionId"] for _ in range(6)]
        statuses: list[int] = []
        Slow.peak = 0

        def turn(session: str) -> None:
            with httpx.Client(base_url=base, headers=AUTH, timeout=20) as own:
                response = own.post(
                    f"/evals/sessions/{session}/turns", json={"message": "sleep:1.5"}
                )
                statuses.append(response.status_code)

        workers = [threading.Thread(target=turn, args=(s,)) for s in sessions]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        # six sessions' sync turns, three threads: never more than three at once
        assert statuses == [200] * 6
        assert Slow.peak == 3
