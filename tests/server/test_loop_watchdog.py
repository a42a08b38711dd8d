"""An agent that holds the event loop (issue 16 item 1), under the real ``evalport serve``.

An async agent busy-looping 3 s under ``--turn-timeout 1`` got 200 ``completed``, and
``/health`` said nothing. Now: the turn ends as a 504 ``turn-timeout`` recorded as failed,
the watchdog logs the session, the turn and how long (during the hold and after it), and
``/health`` (which cannot answer while the loop is held) answers right after the hold and
shows it in ``loopHeld``.
"""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from serverkit import AUTH, TOKEN
from support.servers import free_port, running_process

pytestmark = pytest.mark.e2e

AGENT = """
import time


async def agent(message, history, ctx):
    if message.startswith("block:"):
        end = time.monotonic() + float(message[6:])
        while time.monotonic() < end:  # holds the event loop: never awaits
            pass
    return "ok " + message
"""

HOLD = 3.0


def test_a_turn_holding_the_loop_is_a_timeout_logged_and_shown_in_health(
    tmp_path: Path,
) -> None:
    (tmp_path / "blocking_agent.py").write_text(textwrap.dedent(AGENT))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "evalport.protocol._cli", "serve"]
    args += [str(tmp_path / "blocking_agent.py") + ":agent", "--port", str(port)]
    args += ["--turn-timeout", "1", "--log-level", "warning"]
    with (
        running_process(
            args, health_url=f"{base}/health", env={"EVALPORT_TOKEN": TOKEN}
        ) as process,
        httpx.Client(base_url=base, headers=AUTH, timeout=30) as http,
    ):
        assert "loopHeld" not in http.get("/health").json()
        session = http.post("/evals/sessions", json={}).json()["sessionId"]
        turns = f"/evals/sessions/{session}/turns"

        answers: dict[str, tuple[float, httpx.Response]] = {}

        def call(name: str, method: str, path: str, **kwargs: object) -> None:
            with httpx.Client(base_url=base, headers=AUTH, timeout=30) as own:
                started = time.monotonic()
                response = own.request(method, path, **kwargs)  # type: ignore[arg-type]
                answers[name] = (time.monotonic() - started, response)

        turn = threading.Thread(
            target=call, args=("turn", "POST", turns), kwargs={"json": {"message": f"block:{HOLD}"}}
        )
        turn.start()
        time.sleep(0.8)  # the loop is held now
        health = threading.Thread(target=call, args=("health", "GET", "/health"))
        health.start()
        turn.join(30)
        health.join(30)

        _, blocked = answers["turn"]
        assert blocked.status_code == 504, blocked.text
        assert blocked.json()["type"] == "urn:evalport:problem:turn-timeout"
        # /health waited for the hold (the loop answers nothing meanwhile), not longer
        waited, during = answers["health"]
        assert during.status_code == 200
        assert waited < HOLD + 2.0, waited
        held = during.json()["loopHeld"]
        assert held["sessionId"] == session and held["turn"] == 1
        assert HOLD - 0.5 <= held["seconds"] < HOLD + 2.0

        run = http.get(f"/evals/sessions/{session}").json()["run"]
        assert run["status"] == "failed"
        assert run["stopSignal"]["reason"] == "time_limit"
        assert run["errorDetails"][-1]["type"] == "TurnTimeout"
        assert run["reply"] == ""
        # the session is usable, and a turn that holds nothing is not reported
        assert http.post(turns, json={"message": "hi"}).json()["run"]["reply"] == "ok hi"
        assert http.get("/health").json()["loopHeld"] == held

        process.terminate()
        _, err = process.communicate(timeout=30)
    so_far = [line for line in err.splitlines() if "has held the event loop" in line]
    after = [
        line
        for line in err.splitlines()
        if "held the event loop for" in line and "so far" not in line
    ]
    assert len(so_far) == 1 and f"session {session} turn 1" in so_far[0], err
    assert len(after) == 1 and f"session {session} turn 1" in after[0], err
