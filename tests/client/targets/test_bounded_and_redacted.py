"""Client units: excerpts by the policy, 401 wording, URL credentials, bounded identity,
and the runner's ``attach`` rules (httpx.MockTransport, no server)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from evalport.client import (
    AuthFailed,
    HttpTarget,
    LocalTarget,
    ProtocolError,
    Runner,
    RunOptions,
    TargetUnavailable,
)
from evalport.client.cli._targets import read_token, without_credentials
from evalport.protocol import TracePolicy
from target_agents import SupportAgent

BASE = "http://agent.test/"
PAGE = b"<html><body>internal host db-7.corp, session=abc123secret</body></html>"


def _health(request: httpx.Request) -> httpx.Response | None:
    if request.url.path == "/health":
        return httpx.Response(200, json={"status": "ok", "protocol": "1"})
    return None


@pytest.mark.parametrize("verbatim", [False, True])
async def test_a_text_reply_is_quoted_only_under_a_verbatim_policy(verbatim: bool) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/evals/sessions":
            return httpx.Response(201, json={"sessionId": "s"})
        return _health(request) or httpx.Response(200, content=PAGE)

    policy = TracePolicy.verbatim() if verbatim else TracePolicy.safe()
    transport = httpx.MockTransport(answer)
    async with HttpTarget(BASE, transport=transport, policy=policy) as target:
        session = await target.open()
        with pytest.raises(ProtocolError) as raised:
            await session.send("hi")
    text = f"{raised.value} {raised.value.excerpt}"
    assert ("abc123secret" in text) is verbatim
    if not verbatim:
        assert f"not JSON: {len(PAGE)} bytes, sha256:" in (raised.value.excerpt or "")


async def test_a_401_says_whether_a_token_was_sent() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"type": "about:blank", "title": "Unauthorized"})

    transport = httpx.MockTransport(refuse)
    async with HttpTarget(BASE, transport=transport) as target:
        with pytest.raises(AuthFailed, match="none were sent"):
            await target.check()
    async with HttpTarget(BASE, token="tok-0123456789", transport=transport) as target:
        with pytest.raises(AuthFailed, match="refused the credentials"):
            await target.check()


def test_read_token_defaults_to_evalport_token() -> None:
    assert read_token(None, {}) == (None, "EVALPORT_TOKEN")
    assert read_token(None, {"EVALPORT_TOKEN": "t1"}) == ("t1", "EVALPORT_TOKEN")
    assert read_token("MINE", {"EVALPORT_TOKEN": "t1", "MINE": "t2"}) == ("t2", "MINE")
    with pytest.raises(ValueError, match="--token-env MINE: the variable is not set"):
        read_token("MINE", {"EVALPORT_TOKEN": "t1"})


def test_without_credentials_hides_user_and_password_of_every_url() -> None:
    assert (
        without_credentials("--target=https://u:p@ss@h.test:8/x")
        == "--target=https://***@h.test:8/x"
    )
    assert without_credentials("see http://tok@h.test and ftp://a:b@c/") == (
        "see http://***@h.test and ftp://***@c/"
    )
    assert without_credentials("http://h.test/?mail=a@b") == "http://h.test/?mail=***"
    assert without_credentials("http://h.test/p?api_key=s3cr3t&x=1#f y") == (
        "http://h.test/p?api_key=***&x=***#f y"
    )
    assert without_credentials("http://h.test/?s3cr3t") == "http://h.test/?***"
    assert without_credentials("-k refund") == "-k refund"


async def test_the_runner_bounds_learning_the_identity_by_its_timeout() -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        raise AssertionError("unreachable")

    transport = httpx.MockTransport(never)
    async with HttpTarget(BASE, transport=transport) as target:
        runner = Runner(target, RunOptions(timeout=0.2))
        with pytest.raises(TargetUnavailable, match=r"within 0\.2 s"):
            await runner.run([])


def test_the_runner_refuses_attach_with_repeat() -> None:
    with pytest.raises(ValueError, match="repeat 1"):
        Runner(LocalTarget(SupportAgent), RunOptions(attach="s", repeat=3))
