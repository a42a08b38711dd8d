"""RetryPolicy and Retry-After parsing; both targets satisfy the Target protocol."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from evalport.client import (
    HttpSession,
    HttpTarget,
    LocalSession,
    LocalTarget,
    RetryPolicy,
    Session,
    SyncTarget,
    Target,
    TargetUnavailable,
)
from evalport.client._core._retry import parse_retry_after
from target_agents import SupportAgent


def test_backoff_doubles_up_to_the_cap_and_stops_after_the_attempts() -> None:
    policy = RetryPolicy(attempts=5, backoff=0.5, max_backoff=1.5, jitter=False)
    assert [policy.delay(retry) for retry in range(1, 6)] == [0.5, 1.0, 1.5, 1.5, None]
    assert RetryPolicy.never().delay(1) is None


def test_jitter_stays_within_half_and_full_delay() -> None:
    policy = RetryPolicy(backoff=1.0, max_backoff=1.0)
    assert all(0.5 <= (policy.delay(1) or 0) <= 1.0 for _ in range(50))


def test_retry_after_wins_unless_it_is_too_long() -> None:
    policy = RetryPolicy(max_retry_after=10)
    assert policy.delay(1, retry_after=7.0) == 7.0
    assert policy.delay(1, retry_after=11.0) is None


def test_retry_after_parsing() -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
    earlier = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(earlier, now=now.timestamp()) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_invalid_retry_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="backoff"):
        RetryPolicy(backoff=-1)


async def test_both_targets_and_their_sessions_are_targets_and_sessions() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"run": {"sessionId": "s"}})

    transport = httpx.MockTransport(answer)
    http = HttpTarget("http://agent.test/", health_check=False, transport=transport)
    local = LocalTarget(SupportAgent)
    assert isinstance(http, Target) and isinstance(local, Target)
    session = await local.open()
    assert isinstance(session, Session) and isinstance(session, LocalSession)
    attached = await http.attach("s")
    assert isinstance(attached, Session) and isinstance(attached, HttpSession)
    assert "tok" not in repr(HttpTarget("http://agent.test/", token="tok-1234567"))
    await http.aclose()
    await local.aclose()


def test_sync_facade_over_a_local_target() -> None:
    with SyncTarget(LocalTarget(SupportAgent)) as target:
        session = target.open(case_id="sync-local")
        turn = session.send("refund it")
        [pending] = turn.run.pending_approvals
        resumed = session.decide({pending.call_id: "approve"})
        assert resumed.run.status == "completed" and resumed.index == 1
        assert target.attach(session.id).run.turns == 1
        session.close()
        assert target.identity.kind == "local"


async def test_timeouts_are_explicit_and_configurable() -> None:
    default = HttpTarget("http://agent.test/")
    timeout = default._channel.clients.hold().timeout
    assert (timeout.connect, timeout.read) == (5.0, 300.0)
    short = HttpTarget("http://agent.test/", timeout=2.0)
    assert (
        short._channel.clients.hold().timeout.connect,
        short._channel.clients.hold().timeout.read,
    ) == (
        2.0,
        2.0,
    )
    custom = HttpTarget("http://agent.test/", timeout=httpx.Timeout(10.0, connect=1.0))
    assert custom._channel.clients.hold().timeout.connect == 1.0
    for target in (default, short, custom):
        await target.aclose()


def test_base_url_is_normalized_and_stripped_of_credentials() -> None:
    target = HttpTarget("https://user:pw-123456@agent.test/eval?key=abc#x")
    assert target.base_url == "https://agent.test/eval/"
    assert target.identity.location == "https://agent.test/eval/"
    with pytest.raises(ValueError, match="absolute") as raised:
        HttpTarget("ftp://user:pw-123456@agent.test/?key=abc")
    assert "pw-123456" not in str(raised.value) and "abc" not in str(raised.value)


async def test_retry_counts_are_the_attempts_actually_made() -> None:
    sent: list[str] = []

    def unavailable(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return httpx.Response(503, json={"title": "busy"})

    async def no_wait(delay: float) -> None:
        return None

    retry = RetryPolicy(attempts=4, sleep=no_wait)
    transport = httpx.MockTransport(unavailable)
    async with HttpTarget("http://agent.test/", transport=transport, retry=retry) as target:
        with pytest.raises(TargetUnavailable) as raised:
            await target.check()
    assert len(sent) == 4
    assert "after 4 attempt(s)" in str(raised.value)

    def refused(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        raise httpx.ConnectError("refused", request=request)

    sent.clear()
    transport = httpx.MockTransport(refused)
    async with HttpTarget("http://agent.test/", transport=transport, retry=retry) as target:
        with pytest.raises(TargetUnavailable) as raised:
            await target.check()
    assert len(sent) == 4
    assert "after 4 attempt(s)" in str(raised.value)
