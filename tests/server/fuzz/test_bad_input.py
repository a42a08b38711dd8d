"""Bad input at scale, on real uvicorn: every answer is a clear problem, never a 5xx."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from evalport.server import EvalAdapter, Limits
from serverkit import AUTH, TOKEN, echo_agent
from support.servers import running_server

pytestmark = pytest.mark.e2e

PROBLEM = "urn:evalport:problem:"
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    adapter = EvalAdapter(echo_agent, token=TOKEN, limits=Limits(max_body_bytes=LIMIT))
    with running_server(adapter.app()) as url:
        yield url


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, headers=AUTH, timeout=10) as client:
        yield client


def session(http: httpx.Client) -> str:
    response = http.post("/evals/sessions", json={})
    assert response.status_code == 201
    return str(response.json()["sessionId"])


def problem(response: httpx.Response, status: int, kind: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == PROBLEM + kind and body["status"] == status
    assert "Traceback" not in response.text
    return dict(body)


def test_oversized_bodies_are_413_declared_or_streamed(http: httpx.Client) -> None:
    turns = f"/evals/sessions/{session(http)}/turns"
    big = b'{"message": "' + b"x" * (LIMIT + 1) + b'"}'
    declared = http.post(turns, content=big, headers={"Content-Type": "application/json"})
    problem(declared, 413, "payload-too-large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
        for start in range(0, len(big), 8192):
            yield big[start : start + 8192]

    streamed = http.post(turns, content=chunks(), headers={"Content-Type": "application/json"})
    problem(streamed, 413, "payload-too-large")
    assert http.post(turns, json={"message": "still fine"}).status_code == 200


@pytest.mark.parametrize("depth", [64, 950, 975, 1_000, 20_000])
def test_deeply_nested_bodies_are_rejected_cleanly(http: httpx.Client, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    turns = f"/evals/sessions/{session(http)}/turns"
    for path, body in (
        (turns, '{"message": ' + nested + "}"),
        ("/evals/sessions", '{"metadata": {"deep": ' + nested + "}}"),
    ):
        response = http.post(path, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code in (201, 400, 413, 422), response.text
        if response.status_code != 201:
            assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    "body",
    [b'{"message": "\xff\xfe caf\xe9"}', b"\xef\xbb\xbf\xff", b'{"message": "\xed\xa0\x80"}'],
)
def test_non_utf8_bodies_are_400(http: httpx.Client, body: bytes) -> None:
    turns = f"/evals/sessions/{session(http)}/turns"
    response = http.post(turns, content=body, headers={"Content-Type": "application/json"})
    problem(response, 400, "malformed-json")


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
     "application/xml", "application/jsonx"],
)  # fmt: skip
def test_wrong_content_types_are_415(http: httpx.Client, content_type: str) -> None:
    turns = f"/evals/sessions/{session(http)}/turns"
    response = http.post(
        turns, content=b'{"message": "hi"}', headers={"Content-Type": content_type}
    )
    body = problem(response, 415, "unsupported-media-type")
    assert "application/json" in str(body["detail"])


async def test_two_thousand_wrong_tokens_are_all_401(base_url: str) -> None:
    wrong = [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": "Bearer " + "A" * 4096},
        {"Authorization": f"bearer  {TOKEN.upper()}"},
    ]
    routes = [
        ("POST", "/evals/sessions"),
        ("GET", "/evals/sessions/abc"),
        ("POST", "/evals/sessions/abc/turns"),
        ("DELETE", "/evals/sessions/abc"),
        ("GET", "/health"),
    ]
    gate = asyncio.Semaphore(32)
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)

    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:

        async def attempt(n: int) -> tuple[int, str, str]:
            method, path = routes[n % len(routes)]
            headers = wrong[n % len(wrong)]
            async with gate:
                response = await client.request(
                    method,
                    path,
                    headers=headers,
                    json={"message": "x"} if method == "POST" else None,
                )
            return response.status_code, response.headers.get("www-authenticate", ""), response.text

        results = await asyncio.gather(*(attempt(n) for n in range(2000)))
        assert {status for status, _, _ in results} == {401}
        assert all(challenge.startswith("Bearer") for _, challenge, _ in results)
        assert all(PROBLEM + "unauthorized" in text for _, _, text in results)
        assert TOKEN not in "".join(text for _, _, text in results)
        ok = await client.post("/evals/sessions", headers=AUTH, json={})
        assert ok.status_code == 201
