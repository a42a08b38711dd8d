"""HttpTarget against respx: calls, headers, decoding, redaction, errors, retries."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import msgspec
import pytest
import respx
from evalport.client import (
    AuthFailed,
    FaultsUnsupported,
    HttpTarget,
    NotSuspended,
    ProtocolError,
    RequestRejected,
    RetryPolicy,
    SessionBusy,
    SessionNotFound,
    SessionSuspended,
    TargetError,
    TargetUnavailable,
    TurnLost,
    TurnTimedOut,
)
from evalport.protocol import ApprovalDecision, TracePolicy, is_digest, matches_digest
from evalport.protocol import ProtocolError as WireProtocolError
from target_fixtures import BASE, SECRET, TOKEN, Sleeps, health, wire_run

SESSION = "s/1 x"  # needs URL-encoding
SESSION_PATH = "evals/sessions/s%2F1%20x"


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def problem(
    status: int, kind: str, title: str = "", detail: str = "", **extra: object
) -> httpx.Response:
    body = {
        "type": f"urn:evalport:problem:{kind}",
        "title": title,
        "status": status,
        "detail": detail,
    }
    body.update(extra)
    return httpx.Response(status, json=body, headers={"Content-Type": "application/problem+json"})


def serve_session(mock: respx.MockRouter, *capabilities: str) -> None:
    mock.get("health").respond(json=health(*capabilities))
    mock.post("evals/sessions").respond(
        201, json={"sessionId": SESSION, "expiresAt": "2026-11-30T00:00:00Z"}
    )


# -- the happy path --------------------------------------------------------------------


async def test_open_checks_health_then_creates_a_session(
    target: HttpTarget, mock: respx.MockRouter
) -> None:
    serve_session(mock)
    session = await target.open(case_id="refund", description="d", metadata={"k": 1})
    assert session.id == SESSION and session.expires_at == "2026-11-30T00:00:00Z"
    assert session.run.turns == 0 and session.run.session_id == SESSION
    identity = target.identity
    assert (identity.kind, identity.location) == ("http", BASE)
    assert (identity.agent_name, identity.agent_version) == ("support-bot", "2.3.1")
    created = mock.calls[-1].request
    assert msgspec.json.decode(created.content) == {
        "caseId": "refund",
        "description": "d",
        "metadata": {"k": 1},
    }
    assert created.headers["Authorization"] == f"Bearer {TOKEN}"
    assert created.headers["Content-Type"] == "application/json"
    assert created.headers["Accept"] == "application/json"
    await target.open()
    assert [call.request.url.path for call in mock.calls].count("/eval/health") == 1


async def test_health_check_can_be_skipped(mock: respx.MockRouter) -> None:
    mock.post("evals/sessions").respond(201, json={"sessionId": "a"})
    async with HttpTarget(BASE, health_check=False) as target:
        await target.open()
    assert [call.request.url.path for call in mock.calls] == ["/eval/evals/sessions"]
    assert "Authorization" not in mock.calls[0].request.headers


async def test_send_returns_the_turn_and_the_redacted_accumulated_run(
    target: HttpTarget, mock: respx.MockRouter
) -> None:
    serve_session(mock)
    turns = mock.post(f"{SESSION_PATH}/turns")
    turns.side_effect = [
        httpx.Response(200, json={"run": wire_run(1)}),
        httpx.Response(200, json={"run": wire_run(2)}),
    ]
    session = await target.open()
    first = await session.send("message 1")
    second = await session.send("message 2")
    assert (first.index, first.message, first.reply) == (1, "message 1", "reply 1")
    assert (second.index, second.message, second.reply) == (2, "message 2", "reply 2")
    assert [step.turn for step in second.steps] == [2, 2]
    assert len(first.steps) == 2 and session.run is second.run and len(session.run.steps) == 4
    assert msgspec.json.decode(turns.calls[0].request.content) == {"message": "message 1"}
    keys = {call.request.headers["Idempotency-Key"] for call in turns.calls}
    assert len(keys) == 2
    # Tools were derived from the steps and every payload is digested, keys kept.
    assert len(session.run.tools) == 2
    execution = session.run.steps[0].tool_executions[0]
    assert list(execution.arguments) == ["card", "n"]
    assert matches_digest(SECRET, execution.arguments["card"])
    assert is_digest(session.run.tools[0].result)
    assert SECRET not in msgspec.json.encode(session.run).decode()


async def test_verbatim_policy_keeps_payloads(mock: respx.MockRouter) -> None:
    serve_session(mock)
    mock.post(f"{SESSION_PATH}/turns").respond(json={"run": wire_run(1)})
    async with HttpTarget(BASE, policy=TracePolicy.verbatim()) as target:
        session = await target.open()
        turn = await session.send("hi")
    assert turn.run.tools[0].result == {"holder": SECRET}


async def test_attach_refresh_and_close(target: HttpTarget, mock: respx.MockRouter) -> None:
    mock.get("health").respond(json=health())
    mock.get(SESSION_PATH).respond(json=wire_run(2))
    delete = mock.delete(SESSION_PATH)
    delete.side_effect = [httpx.Response(204), problem(404, "session-not-found")]
    session = await target.attach(SESSION)
    assert session.run.turns == 2 and session.run.reply == "reply 2"
    assert (await session.refresh()).turns == 2
    await session.close()
    await session.close()
    assert delete.call_count == 1
    # A session that expired in between still closes without an error.
    other = await target.attach(SESSION)
    await other.close()
    assert other.closed


async def test_decide_posts_the_decisions_and_returns_the_resumed_turn(
    target: HttpTarget, mock: respx.MockRouter
) -> None:
    serve_session(mock)
    suspended = wire_run(1)
    suspended["status"] = "in_progress"
    suspended["steps"] = suspended["steps"][:1]
    suspended["pendingApprovals"] = [
        {"callId": "c1", "tool": "refund", "arguments": {"card": SECRET}, "turn": 1}
    ]
    mock.post(f"{SESSION_PATH}/turns").respond(json={"run": suspended})
    approvals = mock.post(f"{SESSION_PATH}/approvals").respond(json={"run": wire_run(1)})
    session = await target.open()
    turn = await session.send("message 1")
    pending = turn.run.pending_approvals
    assert [(p.call_id, p.tool) for p in pending] == [("c1", "refund")]
    assert matches_digest(SECRET, pending[0].arguments["card"])
    resumed = await session.decide(
        {"c1": ApprovalDecision(decision="reject", reason="too much"), "c2": "approve"}
    )
    assert msgspec.json.decode(approvals.calls[0].request.content) == {
        "decisions": {
            "c1": {"decision": "reject", "reason": "too much"},
            "c2": {"decision": "approve", "reason": None},
        }
    }
    assert (resumed.index, resumed.message, resumed.run.status) == (1, "message 1", "completed")
    # The resumed turn is the whole turn: the step that asked for approval included.
    assert [step.id for step in resumed.steps] == [step["id"] for step in wire_run(1)["steps"]]
    assert "Idempotency-Key" not in approvals.calls[0].request.headers
    with pytest.raises(ValueError, match="use 'approve', 'reject'"):
        await session.decide({"c1": "maybe"})
    with pytest.raises(ValueError, match="none given"):
        await session.decide({})


# -- typed errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "error", "words"),
    [
        (problem(401, "unauthorized", "Unauthorized"), AuthFailed, "check the token"),
        (httpx.Response(403, text="forbidden"), AuthFailed, "refused the credentials"),
        (problem(404, "session-not-found", "Session not found"), SessionNotFound, "expired"),
        (problem(409, "session-busy", "Session busy"), SessionBusy, "Session busy"),
        (problem(409, "session-suspended", "Suspended"), SessionSuspended, "Suspended"),
        (problem(409, "not-suspended", "Nothing pending"), NotSuspended, "Nothing pending"),
        (problem(409, "turn-lost", "First attempt lost"), TurnLost, "First attempt lost"),
        (httpx.Response(409), SessionBusy, "409"),
        (problem(504, "turn-timeout", "Turn timeout"), TurnTimedOut, "did not finish"),
        (problem(500, "internal", "Internal error"), TargetUnavailable, "500"),
        (
            problem(
                422,
                "invalid-body",
                "Invalid body",
                errors=[{"path": "$.message", "message": "Expected `str`"}],
            ),
            RequestRejected,
            "at $.message: Expected `str`",
        ),
        (problem(413, "payload-too-large", "Too large"), RequestRejected, "Too large"),
        (problem(422, "faults-disabled", "Faults disabled"), FaultsUnsupported, "disabled"),
    ],
)
async def test_error_statuses_become_typed_errors(
    target: HttpTarget,
    mock: respx.MockRouter,
    response: httpx.Response,
    error: type[TargetError],
    words: str,
) -> None:
    serve_session(mock)
    turns = mock.post(f"{SESSION_PATH}/turns").mock(return_value=response)
    session = await target.open()
    with pytest.raises(error) as raised:
        await session.send("hi")
    assert words in str(raised.value)
    assert raised.value.status == response.status_code
    assert TOKEN not in str(raised.value)
    assert turns.call_count == 1


async def test_unknown_route_is_not_a_missing_session(
    target: HttpTarget, mock: respx.MockRouter
) -> None:
    mock.get("health").respond(404, text="no such page")
    with pytest.raises(RequestRejected, match="answered 404") as raised:
        await target.open()
    assert "the evalport protocol is not at this path" in str(raised.value)
    assert "includes its prefix (for example http://HOST:PORT/agent)" in str(raised.value)


async def test_protocol_error_names_the_field_and_redacts_the_excerpt(
    target: HttpTarget, mock: respx.MockRouter
) -> None:
    serve_session(mock)
    run = wire_run(1)
    run["turns"] = "three"
    mock.post(f"{SESSION_PATH}/turns").respond(json={"run": run})
    session = await target.open()
    with pytest.raises(ProtocolError) as raised:
        await session.send("hi")
    error = raised.value
    assert isinstance(error, WireProtocolError) and isinstance(error, TargetError)
    assert error.path == "$.run.turns"
    assert "$.run.turns" in str(error) and "body starts:" in str(error)
    assert '"reply":"<string:7>"' in error.excerpt
    assert SECRET not in str(error)


@pytest.mark.parametrize(
    ("body", "path", "words"),
    [
        (b'{"run": {"reply": "' + SECRET.encode() + b'", "turns": ', None, "not JSON"),
        (b'{"run": null}', "$.run", "run"),
        (b"[1, 2]", "$", "Expected `object`"),
    ],
)
async def test_unusable_run_bodies(
    target: HttpTarget, mock: respx.MockRouter, body: bytes, path: str | None, words: str
) -> None:
    serve_session(mock)
    mock.post(f"{SESSION_PATH}/turns").respond(content=body)
    session = await target.open()
    with pytest.raises(ProtocolError, match=words) as raised:
        await session.send("hi")
    assert raised.value.path == path
    assert SECRET not in str(raised.value)


async def test_missing_or_empty_session_id_is_a_protocol_error(
    target: HttpTarget, mock: respx.MockRouter
) -> None:
    mock.get("health").respond(json=health())
    create = mock.post("evals/sessions")
    create.side_effect = [
        httpx.Response(201, json={"id": "x"}),
        httpx.Response(201, json={"sessionId": ""}),
    ]
    with pytest.raises(ProtocolError) as raised:
        await target.open()
    assert raised.value.path == "$.sessionId"
    with pytest.raises(ProtocolError, match="empty sessionId"):
        await target.open()


async def test_protocol_version_mismatch(target: HttpTarget, mock: respx.MockRouter) -> None:
    mock.get("health").respond(json=health(protocol="2"))
    with pytest.raises(ProtocolError, match="speaks protocol '2'") as raised:
        await target.open()
    assert raised.value.path == "$.protocol"


async def test_lenient_health_bodies(mock: respx.MockRouter) -> None:
    route = mock.get("health")
    route.side_effect = [
        httpx.Response(200, json=[]),
        httpx.Response(200, content=b""),
        httpx.Response(200, json={"status": "ok", "extra": {"x": 1}}),
        httpx.Response(200, text="<html>hello</html>"),
    ]
    async with HttpTarget(BASE) as target:
        for _ in range(3):
            assert (await target.check()).protocol == "1"
        with pytest.raises(ProtocolError, match="did not answer JSON"):
            await target.check()


# -- credentials -----------------------------------------------------------------------


async def test_redirects_are_never_followed_and_the_token_stays_home(
    target: HttpTarget,
) -> None:
    with respx.mock(assert_all_called=False) as router:
        router.get(f"{BASE}health").respond(
            302, headers={"Location": f"https://evil.test/steal?token={TOKEN}"}
        )
        elsewhere = router.get(url__startswith="https://evil.test/").respond(json=health())
        with pytest.raises(ProtocolError, match="never follows redirects") as raised:
            await target.open()
    assert "https://evil.test/steal" in str(raised.value)
    assert TOKEN not in str(raised.value)
    assert not elsewhere.called


async def test_credentials_only_go_to_the_base_origin() -> None:
    with respx.mock(assert_all_called=False) as router:
        other = router.get("https://other.test/health").respond(json=health())
        home = router.get(f"{BASE}health").respond(json=health())
        async with HttpTarget(BASE, token=TOKEN, headers={"X-Api-Key": "key-1234567"}) as target:
            await target._channel.clients.hold().get("https://other.test/health")
            await target.check()
    sent = other.calls[0].request.headers
    assert "Authorization" not in sent and "X-Api-Key" not in sent
    received = home.calls[0].request.headers
    assert received["Authorization"] == f"Bearer {TOKEN}"
    assert received["X-Api-Key"] == "key-1234567"


async def test_secrets_never_appear_in_errors_repr_or_logs(
    mock: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = {"type": "about:blank", "title": f"bad token {TOKEN}", "detail": "key-1234567"}
    mock.get("health").respond(500, json=echo)
    target = HttpTarget(
        BASE,
        token=f"Bearer {TOKEN}",
        headers={"Authorization-Extra": "key-1234567"},
        retry=RetryPolicy.never(),
    )
    async with target:
        with pytest.raises(TargetUnavailable) as raised:
            await target.open()
    text = str(raised.value) + repr(target) + (raised.value.detail or "") + caplog.text
    assert "[redacted]" in str(raised.value)
    assert TOKEN not in text and "key-1234567" not in text
    assert mock.calls[0].request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_base_url_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="absolute http"):
        HttpTarget("agent.test/eval")


# -- retries ---------------------------------------------------------------------------


async def test_idempotent_calls_retry_connection_errors_with_capped_backoff(
    mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get("health")
    route.side_effect = [httpx.ConnectError("refused")] * 4 + [httpx.Response(200, json=health())]
    policy = RetryPolicy(attempts=5, backoff=0.5, max_backoff=1.5, jitter=False, sleep=sleeps)
    async with HttpTarget(BASE, retry=policy) as target:
        await target.check()
    assert route.call_count == 5
    assert sleeps.waits == [0.5, 1.0, 1.5, 1.5]


async def test_retries_give_up_with_target_unavailable(
    target: HttpTarget, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get("health").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(TargetUnavailable, match="after 3 attempt"):
        await target.open()
    assert route.call_count == 3 and len(sleeps.waits) == 2


async def test_429_and_503_honour_retry_after(
    target: HttpTarget, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get("health")
    route.side_effect = [
        httpx.Response(429, headers={"Retry-After": "7"}),
        httpx.Response(
            503, headers={"Retry-After": "2"}, json={"type": "urn:evalport:problem:draining"}
        ),
        httpx.Response(200, json=health()),
    ]
    await target.check()
    assert sleeps.waits == [7.0, 2.0]


async def test_a_retry_after_beyond_the_cap_fails_at_once(
    mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get("health").respond(503, headers={"Retry-After": "3600"})
    policy = RetryPolicy(max_retry_after=60, jitter=False, sleep=sleeps)
    async with HttpTarget(BASE, retry=policy) as target:
        with pytest.raises(TargetUnavailable, match="Retry-After: 3600"):
            await target.check()
    assert route.call_count == 1 and sleeps.waits == []


async def test_a_turn_is_never_retried_without_the_idempotency_capability(
    target: HttpTarget, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    serve_session(mock)
    turns = mock.post(f"{SESSION_PATH}/turns")
    session = await target.open()
    for failure in (
        httpx.Response(503, headers={"Retry-After": "1"}),
        httpx.Response(429),
        httpx.ConnectError("refused"),
        httpx.ReadError("reset"),
    ):
        turns.side_effect = [failure, httpx.Response(200, json=wire_run(1))]
        with pytest.raises(TargetUnavailable):
            await session.send("hi")
    assert turns.call_count == 4 and sleeps.waits == []


async def test_a_turn_is_retried_under_the_same_key_with_the_capability(
    target: HttpTarget, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    serve_session(mock, "idempotency")
    turns = mock.post(f"{SESSION_PATH}/turns")
    turns.side_effect = [
        httpx.ReadError("reset"),
        httpx.Response(503, headers={"Retry-After": "1"}),
        httpx.Response(200, json={"run": wire_run(1)}),
    ]
    session = await target.open()
    turn = await session.send("hi")
    assert turn.index == 1 and turns.call_count == 3
    assert len({call.request.headers["Idempotency-Key"] for call in turns.calls}) == 1
    assert sleeps.waits == [0.25, 1.0]
    # A read timeout means the turn may still run: it is not repeated.
    turns.side_effect = [httpx.ReadTimeout("slow"), httpx.Response(200, json=wire_run(1))]
    with pytest.raises(TargetUnavailable, match="ReadTimeout"):
        await session.send("again")
    assert turns.call_count == 4


async def test_creating_a_session_retries_only_what_created_nothing(
    target: HttpTarget, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    mock.get("health").respond(json=health())
    create = mock.post("evals/sessions")
    create.side_effect = [
        httpx.ConnectError("refused"),
        problem(503, "session-limit", "Session limit"),
        httpx.Response(201, json={"sessionId": "a"}),
    ]
    assert (await target.open()).id == "a"
    create.side_effect = [httpx.ReadError("reset"), httpx.Response(201, json={"sessionId": "b"})]
    with pytest.raises(TargetUnavailable, match="ReadError"):
        await target.open()
    assert create.call_count == 4


async def test_other_statuses_are_not_retried(
    target: HttpTarget, mock: respx.MockRouter, sleeps: Sleeps
) -> None:
    route = mock.get("health").respond(500)
    with pytest.raises(TargetUnavailable):
        await target.check()
    assert route.call_count == 1 and sleeps.waits == []
