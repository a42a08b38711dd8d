"""Processes and networks failing under real uvicorn and real Redis: nothing lost or doubled."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from evalport.client import (
    HttpTarget,
    RetryPolicy,
    RunOptions,
    Verdict,
    cases_from,
    eval_case,
    run_cases,
)
from support.redis import RedisServer, running_redis, save_snapshot
from support.replicas import Replica, running_replicas, serve_args
from support.servers import free_port, running_process

pytestmark = pytest.mark.e2e

TOKEN = "faults-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT = str(Path(__file__).parents[1] / "replicas" / "agents.py") + ":agent"
PROBLEM = "urn:evalport:problem:"


def database(redis_server: RedisServer, number: int) -> str:
    return redis_server.url.rsplit("/", 1)[0] + f"/{number}"


def effects_of(path: Path, session: str) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [line.split("\t", 1)[1] for line in lines if line.startswith(session + "\t")]


@pytest.fixture(scope="module")
def effects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("effects") / "effects.log"


@pytest.fixture(scope="module")
def replica(redis_server: RedisServer, effects: Path) -> Iterator[Replica]:
    options = ["--turn-timeout", "0.5"]
    with running_replicas(
        AGENT,
        store=database(redis_server, 3),
        count=1,
        token=TOKEN,
        options=options,
        env={"EFFECTS": str(effects)},
    ) as (started,):
        yield started


def open_session(http: httpx.Client) -> str:
    response = http.post("/evals/sessions", json={})
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


def test_a_client_timeout_then_a_retry_with_the_same_key_runs_the_agent_once(
    replica: Replica, effects: Path
) -> None:
    with httpx.Client(base_url=replica.url, headers=AUTH, timeout=5) as http:
        session = open_session(http)
        key = {"Idempotency-Key": str(uuid.uuid4())}
        path = f"/evals/sessions/{session}/turns"
        with pytest.raises(httpx.ReadTimeout):
            http.post(path, json={"message": "slow:0.3"}, headers=key, timeout=0.1)
        retried = http.post(path, json={"message": "slow:0.3"}, headers=key)  # joins the turn
        assert retried.status_code == 200, retried.text
        again = http.post(path, json={"message": "slow:0.3"}, headers=key)  # the record
        assert again.content == retried.content
        assert retried.json()["run"]["turns"] == 1
    assert effects_of(effects, session) == ["slow:0.3"]


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_a_client_that_disconnects_mid_turn_finds_the_result_by_its_key(
    replica: Replica, effects: Path
) -> None:
    with httpx.Client(base_url=replica.url, headers=AUTH, timeout=5) as http:
        session = open_session(http)
        key = {"Idempotency-Key": str(uuid.uuid4())}
        path = f"/evals/sessions/{session}/turns"
    with (
        httpx.Client(base_url=replica.url, headers=AUTH) as gone,
        pytest.raises(httpx.ReadTimeout),
    ):
        gone.post(path, json={"message": "slow:0.3"}, headers=key, timeout=0.1)
    # The client is gone; the turn runs on and finishes although nobody waits for it.
    wait_until(lambda: effects_of(effects, session) == ["slow:0.3"])
    with httpx.Client(base_url=replica.url, headers=AUTH, timeout=5) as http:

        def completed() -> bool:
            run = http.get(f"/evals/sessions/{session}").json()["run"]
            return bool(run["status"] == "completed")

        wait_until(completed)
        attached = http.get(f"/evals/sessions/{session}").json()["run"]
        assert attached["turns"] == 1
        found = http.post(path, json={"message": "slow:0.3"}, headers=key)
        assert found.status_code == 200
        assert found.json()["run"] == attached
    assert effects_of(effects, session) == ["slow:0.3"]


def test_a_slow_agent_is_a_504_and_the_session_stays_consistent(replica: Replica) -> None:
    with httpx.Client(base_url=replica.url, headers=AUTH, timeout=5) as http:
        session = open_session(http)
        path = f"/evals/sessions/{session}/turns"
        slow = http.post(path, json={"message": "slow:2"})
        assert slow.status_code == 504
        assert slow.json()["type"] == PROBLEM + "turn-timeout"
        run = http.get(f"/evals/sessions/{session}").json()["run"]
        assert run["status"] == "failed" and run["turns"] == 1
        assert run["stopSignal"]["reason"] == "time_limit"
        after = http.post(path, json={"message": "next"})
        assert after.status_code == 200
        assert after.json()["run"]["turns"] == 2
        assert after.json()["run"]["userMessages"] == ["slow:2", "next"]


@pytest.fixture
def self_healing(redis_server: RedisServer) -> Iterator[str]:
    """One replica that a watcher restarts (same port, same Redis) whenever it dies."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # a short lease: the restarted replica answers the crashed turn's retry within it
    args = serve_args(AGENT, port, database(redis_server, 4), "--lease-ttl", "1")
    env = {"EVALPORT_TOKEN": TOKEN, "REPLICA": "A"}
    stop = threading.Event()
    restarts: list[subprocess.Popen[str]] = []

    def watch(process: subprocess.Popen[str]) -> None:
        while not stop.is_set():
            if process.poll() is None:
                time.sleep(0.02)
                continue
            process = subprocess.Popen(args, env={**os.environ, **env}, text=True)
            restarts.append(process)

    with running_process(args, health_url=f"{url}/health", env=env) as first:
        watcher = threading.Thread(target=watch, args=(first,), daemon=True)
        watcher.start()
        try:
            yield url
        finally:
            stop.set()
            watcher.join(5)
            for process in restarts:
                process.terminate()
                process.wait(10)
    assert restarts, "the replica was never killed"


async def test_a_server_killed_mid_turn_is_one_error_and_the_run_goes_on(
    self_healing: str,
) -> None:
    @eval_case(id="before")
    async def before(ctx) -> None:
        await ctx.send("hello")
        ctx.contains("hello #1")

    @eval_case(id="crash")
    async def crash(ctx) -> None:
        await ctx.send("crash")

    @eval_case(id="after")
    async def after(ctx) -> None:
        await ctx.send("first")
        await ctx.send("second")
        ctx.contains("second #2")

    cases = [*cases_from(before), *cases_from(crash), *cases_from(after)]
    # Enough attempts for a restart on a loaded machine (about 50 s of connection refusals):
    # the test is about what the restarted replica answers, not how soon it is up.
    retry = RetryPolicy(attempts=100, backoff=0.1, max_backoff=0.5, jitter=False)
    async with HttpTarget(self_healing, token=TOKEN, retry=retry, timeout=10) as target:
        report = await run_cases(cases, target, RunOptions(concurrency=1, timeout=30))
    verdicts = {result.case_id: result.verdict for result in report.results}
    assert verdicts == {"before": Verdict.PASSED, "crash": Verdict.ERROR, "after": Verdict.PASSED}
    _, crashed = report.case("crash")
    assert crashed is not None and crashed.trials[0].error
    assert "409: Turn lost" in crashed.trials[0].error  # the crashing turn is not run again


def test_redis_restarted_mid_run_gives_503s_then_recovers_uncorrupted() -> None:
    options = ["--turn-timeout", "5"]
    with (
        running_redis() as redis,
        running_replicas(AGENT, store=redis.url, token=TOKEN, options=options) as (a, b),
        httpx.Client(base_url=a.url, headers=AUTH, timeout=10) as on_a,
        httpx.Client(base_url=b.url, headers=AUTH, timeout=10) as on_b,
    ):
        session = open_session(on_a)
        path = f"/evals/sessions/{session}/turns"
        assert on_a.post(path, json={"message": "one"}).status_code == 200
        save_snapshot(redis)
        outcome: list[httpx.Response] = []
        inflight = threading.Thread(
            target=lambda: outcome.append(on_a.post(path, json={"message": "slow:0.5"}))
        )
        inflight.start()
        time.sleep(0.2)
        redis.stop()
        inflight.join(10)
        down = [
            on_a.post(path, json={"message": "two"}),
            on_b.get(f"/evals/sessions/{session}"),
            on_b.post("/evals/sessions", json={}),
        ]
        for response in [*outcome, *down]:
            assert response.status_code == 503, response.text
            assert response.json()["type"] == PROBLEM + "store-unavailable"
            assert int(response.headers["Retry-After"]) >= 1
        redis.start()
        # Back with the snapshot: the session as it was before the lost turn, no lease.
        second = on_b.post(path, json={"message": "two"})
        assert second.status_code == 200, second.text
        run = second.json()["run"]
        assert run["userMessages"] == ["one", "two"] and run["turns"] == 2
        third = on_a.post(path, json={"message": "three"}).json()["run"]
        assert third["reply"] == "three #3 on A restored history=4"
        assert on_a.post("/evals/sessions", json={}).status_code == 201


def test_approvals_relay_works_again_after_a_redis_restart() -> None:
    with (
        running_redis() as redis,
        running_replicas(AGENT, store=redis.url, token=TOKEN) as (a, b),
        httpx.Client(base_url=a.url, headers=AUTH, timeout=10) as on_a,
        httpx.Client(base_url=b.url, headers=AUTH, timeout=10) as on_b,
    ):
        session = open_session(on_a)
        turns = f"/evals/sessions/{session}/turns"
        [pending] = on_a.post(turns, json={"message": "approve"}).json()["run"]["pendingApprovals"]
        save_snapshot(redis)
        redis.stop()
        decisions = {"decisions": {pending["callId"]: {"decision": "approve"}}}
        down = on_b.post(f"/evals/sessions/{session}/approvals", json=decisions)
        assert down.status_code == 503
        redis.start()
        # A's pub/sub connection reconnects and subscribes again; B's relay waits for it
        # (a publish nobody receives is retried briefly before the holder counts as gone).
        # Like a client, honour 503 + Retry-After while the pools reconnect; never a 409.
        statuses = []
        for _ in range(20):
            relayed = on_b.post(f"/evals/sessions/{session}/approvals", json=decisions)
            statuses.append(relayed.status_code)
            if relayed.status_code != 503:
                break
            time.sleep(float(relayed.headers["Retry-After"]) / 4)
        assert statuses[-1] == 200 and set(statuses) <= {503, 200}, (statuses, relayed.text)
        assert relayed.json()["run"]["reply"] == "approved=True #1 on A"
