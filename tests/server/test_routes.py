"""Every protocol route of the adapter and every error status it answers."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from typing import Any

import httpx
import pytest
from evalport.protocol import (
    PROBLEM_CONTENT_TYPE,
    CreateSessionResponse,
    Health,
    Message,
    decode_response,
    decode_run,
)
from evalport.protocol.runtime import TurnContext
from evalport.server import Limits
from serverkit import AUTH, TOKEN, Build, echo_agent, open_session

PROBLEM = "urn:evalport:problem:"


def assert_problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_CONTENT_TYPE
    body: dict[str, Any] = response.json()
    assert body["type"] == PROBLEM + kind
    assert body["status"] == status
    assert "Traceback" not in response.text
    return body


# -- health ----------------------------------------------------------------------------------


async def test_health_names_the_agent_and_its_capabilities(build: Build) -> None:
    _, client = build(name="support", version="2.0")
    response = await client.get("/health")
    assert response.status_code == 200
    health = decode_response(response.content, Health)
    assert (health.status, health.protocol) == ("ok", "1")
    assert (health.agent.name, health.agent.version) == ("support", "2.0")
    assert {"idempotency", "attach", "delete", "approvals"} <= set(health.capabilities)


async def test_health_is_protected_unless_made_public(build: Build) -> None:
    _, closed = build(headers={})
    assert_problem(await closed.get("/health"), 401, "unauthorized")
    _, open_ = build(headers={}, public_health=True)
    assert (await open_.get("/health")).status_code == 200
    assert_problem(await open_.post("/evals/sessions", json={}), 401, "unauthorized")


async def test_public_health_shows_a_loop_hold_without_its_session_id(build: Build) -> None:
    async def holding_agent(message: Message, history: list[Message], ctx: TurnContext) -> str:
        time.sleep(1.1)  # holds the event loop past the watchdog's threshold (1 s)
        return "done"

    _, anyone = build(holding_agent, headers={}, public_health=True)  # sends no token
    created = await anyone.post("/evals/sessions", json={}, headers=AUTH)
    session = created.json()["sessionId"]
    turn = f"/evals/sessions/{session}/turns"
    assert (await anyone.post(turn, json={"message": "hi"}, headers=AUTH)).status_code == 200
    health = await anyone.get("/health")
    held = health.json()["loopHeld"]
    assert "sessionId" not in held and held["turn"] == 1 and held["seconds"] >= 1.0
    assert session not in health.text


# -- sessions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"caseId": "refunds/1", "description": "refund", "metadata": {"suite": "smoke"}},
        {"caseId": None, "description": None},  # what Instructor sends
        {},
    ],
)
async def test_create_session(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    response = await client.post("/evals/sessions", json=body)
    assert response.status_code == 201
    created = decode_response(response.content, CreateSessionResponse)
    assert response.headers["location"] == f"/evals/sessions/{created.session_id}"
    assert created.expires_at is not None and created.expires_at.endswith("Z")


async def test_create_session_without_a_body(client: httpx.AsyncClient) -> None:
    assert (await client.post("/evals/sessions")).status_code == 201


async def test_session_ids_carry_at_least_128_random_bits(client: httpx.AsyncClient) -> None:
    ids = {await open_session(client) for _ in range(20)}
    assert len(ids) == 20
    for session_id in ids:
        raw = base64.urlsafe_b64decode(session_id + "=" * (-len(session_id) % 4))
        assert len(raw) * 8 >= 128


def test_session_ids_never_start_with_a_dash() -> None:
    # One id in 64 would, and then `evalport run --attach ID` reads it as an option.
    from evalport.server._records import new_session_id

    assert not any(new_session_id().startswith("-") for _ in range(3000))


async def test_factory_receives_case_id_description_and_metadata(build: Build) -> None:
    seen: list[Any] = []

    class Agent:
        def __init__(self, session: Any) -> None:
            seen.append(session)

        async def turn(self, message: str, ctx: TurnContext) -> str:
            return "ok"

    _, client = build(Agent)
    session_id = await open_session(client, caseId="c-1", description="d", metadata={"k": [1]})
    assert (seen[0].session_id, seen[0].case_id, seen[0].description) == (session_id, "c-1", "d")
    assert seen[0].metadata == {"k": [1]}


async def test_attach_returns_the_accumulated_run(client: httpx.AsyncClient) -> None:
    session_id = await open_session(client)
    empty = await client.get(f"/evals/sessions/{session_id}")
    assert empty.status_code == 200
    assert decode_run(empty.content).turns == 0
    turn = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "A1"})
    attached = await client.get(f"/evals/sessions/{session_id}")
    assert attached.content == turn.content


async def test_delete_then_the_session_is_gone(client: httpx.AsyncClient) -> None:
    session_id = await open_session(client)
    deleted = await client.delete(f"/evals/sessions/{session_id}")
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert_problem(await client.get(f"/evals/sessions/{session_id}"), 404, "session-not-found")
    assert_problem(await client.delete(f"/evals/sessions/{session_id}"), 404, "session-not-found")
    turn = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "x"})
    assert_problem(turn, 404, "session-not-found")


async def test_unknown_session_is_404_on_every_route(client: httpx.AsyncClient) -> None:
    base = "/evals/sessions/no-such-session"
    for response in (
        await client.get(base),
        await client.delete(base),
        await client.post(base + "/turns", json={"message": "x"}),
        await client.post(base + "/approvals", json={"decisions": {}}),
    ):
        body = assert_problem(response, 404, "session-not-found")
        assert body["instance"].startswith(base)


# -- turns -----------------------------------------------------------------------------------


async def test_turns_accumulate_the_run(client: httpx.AsyncClient) -> None:
    session_id = await open_session(client)
    await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "A1"})
    response = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "A2"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    run = decode_run(response.content)
    assert (run.reply, run.turns, run.status) == ("A2 #2", 2, "completed")
    assert run.session_id == session_id
    assert [t.tool_call.arguments for t in run.tools] == [{"order_id": "A1"}, {"order_id": "A2"}]
    assert [s.turn for s in run.steps] == [1, 1, 2, 2]
    assert all(str(uuid.UUID(s.id)) == s.id for s in run.steps)


async def test_agent_exception_is_a_200_failed_turn(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    session_id = await open_session(client)
    with caplog.at_level(logging.ERROR, logger="evalport.agent"):
        response = await client.post(
            f"/evals/sessions/{session_id}/turns", json={"message": "boom"}
        )
    assert response.status_code == 200
    run = decode_run(response.content)
    assert run.status == "failed"
    (error,) = run.error_details
    assert (error.type, error.message, error.error_class) == (
        "ValueError",
        "the warehouse API is down",
        "AgentError",
    )
    assert error.error_id is not None and error.error_id in caplog.text
    assert "Traceback" not in response.text and "site-packages" not in response.text
    again = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "A1"})
    assert decode_run(again.content).status == "completed"


@pytest.mark.parametrize(
    ("body", "status", "kind", "path"),
    [
        (b"{", 400, "malformed-json", None),
        (b"", 400, "malformed-json", None),
        (b'{"message": 7}', 422, "invalid-body", "$.message"),
        (b"{}", 422, "invalid-body", "$"),  # a message, or parts
        (b'{"message": "x", "extra": 1}', 422, "invalid-body", "$.extra"),
        (b"[]", 422, "invalid-body", None),
    ],
)
async def test_turn_bodies_are_decoded_strictly(
    client: httpx.AsyncClient, body: bytes, status: int, kind: str, path: str | None
) -> None:
    session_id = await open_session(client)
    response = await client.post(
        f"/evals/sessions/{session_id}/turns",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    problem = assert_problem(response, status, kind)
    if path is not None:
        assert problem["errors"][0]["path"] == path
        assert path in problem["detail"]


async def test_create_body_is_decoded_strictly(client: httpx.AsyncClient) -> None:
    response = await client.post("/evals/sessions", json={"caseId": 3})
    assert assert_problem(response, 422, "invalid-body")["errors"][0]["path"] == "$.caseId"
    response = await client.post("/evals/sessions", json={"case_id": "snake"})
    assert assert_problem(response, 422, "invalid-body")["errors"][0]["path"] == "$.case_id"


async def test_non_json_content_type_is_415(client: httpx.AsyncClient) -> None:
    session_id = await open_session(client)
    response = await client.post(
        f"/evals/sessions/{session_id}/turns",
        content=b"message=hi",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_problem(response, 415, "unsupported-media-type")


async def test_body_above_the_limit_is_413(build: Build) -> None:
    _, client = build(limits=Limits(max_body_bytes=256))
    session_id = await open_session(client)
    big = {"message": "x" * 300}
    assert_problem(
        await client.post(f"/evals/sessions/{session_id}/turns", json=big), 413, "payload-too-large"
    )

    async def chunks() -> Any:  # no Content-Length: the limit holds while streaming
        for _ in range(5):
            yield b" " * 100

    streamed = await client.post(
        f"/evals/sessions/{session_id}/turns",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert_problem(streamed, 413, "payload-too-large")


async def test_wrong_method_and_unknown_route_are_problems(client: httpx.AsyncClient) -> None:
    response = await client.put("/evals/sessions", json={})
    assert assert_problem(response, 405, "method-not-allowed")
    assert response.headers["allow"] == "POST"
    assert_problem(await client.get("/evals/nothing-here"), 404, "not-found")


async def test_turn_timeout_is_504_and_leaves_the_session_usable(build: Build) -> None:
    async def slow(message: str, history: list[Message], ctx: TurnContext) -> str:
        if message == "slow":
            await asyncio.sleep(5)
        return "fast"

    _, client = build(slow, limits=Limits(turn_timeout=0.05))
    session_id = await open_session(client)
    response = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "slow"})
    assert_problem(response, 504, "turn-timeout")
    run = decode_run((await client.get(f"/evals/sessions/{session_id}")).content)
    assert (run.status, run.turns) == ("failed", 1)
    assert run.stop_signal is not None and run.stop_signal.reason == "time_limit"
    after = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "x"})
    assert decode_run(after.content).reply == "fast"


# -- one turn at a time ------------------------------------------------------------------------


async def test_two_concurrent_turns_exactly_one_is_409(build: Build) -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def waits(message: str, history: list[Message], ctx: TurnContext) -> str:
        entered.set()
        await release.wait()
        return message

    _, client = build(waits)
    session_id = await open_session(client)
    url = f"/evals/sessions/{session_id}/turns"
    first = asyncio.create_task(client.post(url, json={"message": "one"}))
    second = asyncio.create_task(client.post(url, json={"message": "two"}))
    await entered.wait()
    for _ in range(50):
        if second.done() or first.done():
            break
        await asyncio.sleep(0.005)
    release.set()
    statuses = sorted([(await first).status_code, (await second).status_code])
    assert statuses == [200, 409]
    loser = first.result() if first.result().status_code == 409 else second.result()
    assert_problem(loser, 409, "session-busy")
    # A delete while a turn runs is refused too.
    release.clear()
    entered.clear()
    running = asyncio.create_task(client.post(url, json={"message": "three"}))
    await entered.wait()
    assert_problem(await client.delete(f"/evals/sessions/{session_id}"), 409, "session-busy")
    release.set()
    assert (await running).status_code == 200


# -- idempotency -------------------------------------------------------------------------------


async def test_repeated_idempotency_key_replays_without_running_the_agent(build: Build) -> None:
    calls: list[str] = []

    async def counting(message: str, history: list[Message], ctx: TurnContext) -> str:
        calls.append(message)
        return f"reply {len(calls)}"

    _, client = build(counting)
    session_id = await open_session(client)
    url = f"/evals/sessions/{session_id}/turns"
    first = await client.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k1"})
    again = await client.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k1"})
    assert again.status_code == 200 and again.content == first.content
    assert calls == ["hi"]
    other = await client.post(url, json={"message": "bye"}, headers={"Idempotency-Key": "k1"})
    assert assert_problem(other, 422, "idempotency-key-reused")["errors"][0]["path"] == "$.message"
    fresh = await client.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k2"})
    assert decode_run(fresh.content).turns == 2
    assert calls == ["hi", "hi"]
    # Keys are per session.
    other_session = await open_session(client)
    elsewhere = await client.post(
        f"/evals/sessions/{other_session}/turns",
        json={"message": "bye"},
        headers={"Idempotency-Key": "k1"},
    )
    assert elsewhere.status_code == 200


async def test_retry_during_the_turn_waits_for_the_same_result(build: Build) -> None:
    release = asyncio.Event()
    calls: list[str] = []

    async def waits(message: str, history: list[Message], ctx: TurnContext) -> str:
        calls.append(message)
        await release.wait()
        return "done"

    _, client = build(waits)
    session_id = await open_session(client)
    url = f"/evals/sessions/{session_id}/turns"
    headers = {"Idempotency-Key": "retry-me"}
    first = asyncio.create_task(client.post(url, json={"message": "m"}, headers=headers))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(client.post(url, json={"message": "m"}, headers=headers))
    await asyncio.sleep(0.02)
    release.set()
    assert (await first).content == (await second).content
    assert calls == ["m"]


async def test_idempotency_key_must_be_1_to_255_characters(client: httpx.AsyncClient) -> None:
    session_id = await open_session(client)
    url = f"/evals/sessions/{session_id}/turns"
    response = await client.post(url, json={"message": "x"}, headers={"Idempotency-Key": "k" * 256})
    assert_problem(response, 422, "invalid-body")


# -- TTL and cap -------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_idle_sessions_expire_and_use_renews_them(build: Build) -> None:
    from evalport.server.stores import MemoryStore

    clock = FakeClock()
    adapter, client = build(store=MemoryStore(clock=clock), limits=Limits(session_ttl=60))
    idle = await open_session(client)
    used = await open_session(client)
    clock.now += 45
    assert (
        await client.post(f"/evals/sessions/{used}/turns", json={"message": "x"})
    ).status_code == 200
    clock.now += 30  # idle: 75 s without use; used: 30 s since its turn
    assert_problem(await client.get(f"/evals/sessions/{idle}"), 404, "session-not-found")
    assert (await client.get(f"/evals/sessions/{used}")).status_code == 200
    clock.now += 61
    response = await client.post(f"/evals/sessions/{used}/turns", json={"message": "x"})
    assert_problem(response, 404, "session-not-found")
    assert adapter.sessions.live_count == 0  # their agents are closed


async def test_session_cap_is_503_with_retry_after(build: Build) -> None:
    from evalport.server.stores import MemoryStore

    clock = FakeClock()
    _, client = build(
        store=MemoryStore(clock=clock),
        limits=Limits(max_sessions=2, retry_after=7, session_ttl=10),
    )
    first = await open_session(client)
    await open_session(client)
    refused = await client.post("/evals/sessions", json={})
    body = assert_problem(refused, 503, "session-limit")
    assert refused.headers["retry-after"] == "7" and body["retryAfter"] == 7
    await client.delete(f"/evals/sessions/{first}")
    assert (await client.post("/evals/sessions", json={})).status_code == 201
    assert (await client.post("/evals/sessions", json={})).status_code == 503
    clock.now += 11  # expired sessions free their places
    assert (await client.post("/evals/sessions", json={})).status_code == 201


async def test_at_the_cap_no_agent_is_built_for_a_refused_session(build: Build) -> None:
    from evalport.protocol.runtime import as_factory

    built: list[str] = []

    class Handler:
        async def turn(self, message: str, ctx: TurnContext) -> str:
            return message

    def factory(session: Any) -> Any:
        built.append(session.session_id)
        return Handler()

    _, client = build(as_factory(factory), limits=Limits(max_sessions=1))
    await open_session(client)
    assert_problem(await client.post("/evals/sessions", json={}), 503, "session-limit")
    assert len(built) == 1


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_sessions"):
        Limits(max_sessions=0)
    with pytest.raises(ValueError, match="turn_timeout"):
        Limits(turn_timeout=0)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="lease_ttl"):
            Limits(lease_ttl=bad)


def test_an_adapter_needs_an_explicit_auth_decision() -> None:
    from evalport.server import EvalAdapter

    with pytest.raises(TypeError, match="token"):
        EvalAdapter(echo_agent)  # type: ignore[call-arg]
    assert AUTH  # the suite's token is what the fixtures send


async def test_an_unexpected_failure_is_a_500_problem_with_an_error_id(
    build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    from evalport.server.stores import MemoryStore

    class BrokenStore(MemoryStore):
        async def finish_turn(self, *args: object) -> bool:  # a turn's last call
            raise RuntimeError("disk on fire")

    _, client = build(store=BrokenStore())
    session_id = await open_session(client)
    with caplog.at_level(logging.ERROR, logger="evalport.server"):
        response = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "x"})
    body = assert_problem(response, 500, "internal")
    error_id = body["detail"].rsplit("error id ", 1)[1].rstrip(").")
    assert error_id in caplog.text and "disk on fire" in caplog.text
    assert "disk on fire" not in response.text
    # The lease was released: the session takes the next turn (and fails the same way).
    again = await client.post(f"/evals/sessions/{session_id}/turns", json={"message": "y"})
    assert again.status_code == 500


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "bearer"],
)
async def test_anything_but_the_bearer_token_is_401(
    build: Build, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    _, client = build(headers=headers)
    response = await client.post("/evals/sessions", json={})
    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith('Bearer realm="evalport"')


async def test_the_scheme_is_case_insensitive(build: Build) -> None:
    _, client = build(headers={"Authorization": f"bEaReR {TOKEN}"})
    assert (await client.post("/evals/sessions", json={})).status_code == 201


def test_a_blank_token_is_refused_at_construction() -> None:
    from evalport.server import EvalAdapter

    with pytest.raises(ValueError, match="non-empty"):
        EvalAdapter(echo_agent, token=" ")


async def test_a_failing_session_factory_is_a_500_and_holds_no_place(build: Build) -> None:
    def factory(session: Any) -> Any:
        raise RuntimeError("cannot connect to the model")

    from evalport.protocol.runtime import as_factory

    adapter, client = build(as_factory(factory), limits=Limits(max_sessions=1))
    for _ in range(2):
        assert_problem(await client.post("/evals/sessions", json={}), 500, "internal")
    assert adapter.sessions.live_count == 0


async def test_a_timed_out_turn_is_replayed_by_its_key_not_run_again(build: Build) -> None:
    calls: list[str] = []

    async def slow(message: str, history: list[Message], ctx: TurnContext) -> str:
        calls.append(message)
        await asyncio.sleep(5)
        return "late"

    _, client = build(slow, limits=Limits(turn_timeout=0.05))
    session_id = await open_session(client)
    url = f"/evals/sessions/{session_id}/turns"
    headers = {"Idempotency-Key": "slow-1"}
    first = await client.post(url, json={"message": "m"}, headers=headers)
    again = await client.post(url, json={"message": "m"}, headers=headers)
    assert_problem(again, 504, "turn-timeout")
    assert again.content == first.content and calls == ["m"]


async def test_head_health(build: Build) -> None:
    _, client = build()
    response = await client.head("/health")
    assert response.status_code == 200 and response.content == b""
