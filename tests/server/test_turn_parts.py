"""Images and files in a turn (issue 18 item 1), on the server: ``TurnRequest.parts`` reach
the agent as typed parts (``ctx.parts``), the run records them, ``/health`` lists
``content-parts``, a server without it answers a problem naming it, and a body past the
size limit is a 413 that names the part it was cut in (real uvicorn)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx
from evalport.protocol import (
    CONTENT_PARTS_CAPABILITY,
    FilePart,
    ImagePart,
    ProblemType,
    TextPart,
)
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter, Limits
from serverkit import AUTH, TOKEN, Build, open_session
from support.servers import running_server

PNG = b"\x89PNG\r\n\x1a\n" + b"MARKER-7f3a" + bytes(range(256))


def reader(seen: list[Any]) -> Any:
    async def agent(message: str, history: object, ctx: TurnContext) -> str:
        seen.append((message, ctx.parts))
        sizes = [
            f"{type(part).__name__}:{len(part.data) if isinstance(part.data, bytes) else part.url}"
            for part in ctx.parts
            if isinstance(part, ImagePart | FilePart)
        ]
        return f"{message} | " + ",".join(sizes)

    return agent


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_parts_reach_the_agent_typed_and_the_run_records_them(build: Build) -> None:
    seen: list[Any] = []
    _, client = build(reader(seen))
    health = (await client.get("/health")).json()
    assert CONTENT_PARTS_CAPABILITY in health["capabilities"] and health["protocol"] == "1"
    session = await open_session(client)
    body = {
        "message": "What is on this receipt?",
        "parts": [
            {"type": "image", "mediaType": "image/png", "data": _b64(PNG)},
            {"type": "text", "text": "and this file"},
            {
                "type": "file",
                "url": "https://example.com/terms.pdf",
                "mediaType": "application/pdf",
            },
        ],
    }
    response = await client.post(f"/evals/sessions/{session}/turns", json=body)
    assert response.status_code == 200, response.text
    message, parts = seen[0]
    assert message == "What is on this receipt?\nand this file"
    assert parts == (
        TextPart(text="What is on this receipt?"),
        ImagePart(data=PNG, media_type="image/png"),
        TextPart(text="and this file"),
        FilePart(url="https://example.com/terms.pdf", media_type="application/pdf"),
    )
    run = response.json()["run"]
    assert (
        run["reply"] == f"{message} | ImagePart:{len(PNG)},FilePart:https://example.com/terms.pdf"
    )
    assert run["userMessages"] == [message]
    recorded = run["userParts"]
    assert [(part["turn"], part["type"]) for part in recorded] == [
        (1, "text"),
        (1, "image"),
        (1, "text"),
        (1, "file"),
    ]
    image = recorded[1]
    assert image["sha256"] == hashlib.sha256(PNG).hexdigest() and image["bytes"] == len(PNG)
    assert base64.b64decode(image["data"]) == PNG  # the server keeps no policy: verbatim

    # a plain turn after it: one text part, nothing more recorded, 1.0's shape
    response = await client.post(f"/evals/sessions/{session}/turns", json={"message": "thanks"})
    assert seen[1] == ("thanks", (TextPart(text="thanks"),))
    assert len(response.json()["run"]["userParts"]) == 4


async def test_a_plain_turn_keeps_the_1_0_run_shape(build: Build) -> None:
    _, client = build(reader([]))
    session = await open_session(client)
    response = await client.post(f"/evals/sessions/{session}/turns", json={"message": "hi"})
    assert "userParts" not in response.json()["run"]


async def test_a_server_without_content_parts_names_the_capability(build: Build) -> None:
    seen: list[Any] = []
    _, client = build(reader(seen), content_parts=False)
    health = (await client.get("/health")).json()
    assert CONTENT_PARTS_CAPABILITY not in health["capabilities"]
    session = await open_session(client)
    body = {"message": "look", "parts": [{"type": "image", "url": "https://example.com/a.png"}]}
    response = await client.post(f"/evals/sessions/{session}/turns", json=body)
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == ProblemType.CONTENT_PARTS_UNSUPPORTED
    assert CONTENT_PARTS_CAPABILITY in problem["detail"]
    assert problem["errors"][0]["path"] == "$.parts"
    assert seen == []
    plain = await client.post(f"/evals/sessions/{session}/turns", json={"message": "look"})
    assert plain.status_code == 200


async def test_bad_parts_are_422_naming_the_part(build: Build) -> None:
    _, client = build(reader([]))
    session = await open_session(client)
    turns = f"/evals/sessions/{session}/turns"
    cases: list[tuple[Any, str]] = [
        ({"parts": [{"type": "image", "data": _b64(PNG)}]}, "$.parts[0]"),
        (
            {"parts": [{"type": "text", "text": "a"}, {"type": "video", "url": "x"}]},
            "$.parts[1].type",
        ),
        ({"parts": [{"type": "file", "data": "!!", "mediaType": "a/b"}]}, "$.parts[0].data"),
        ({"parts": [{"type": "file", "url": "u", "data": "", "mediaType": "a/b"}]}, "$.parts[0]"),
        ({}, "$"),
        ({"message": "m", "parts": []}, "$.parts"),
    ]
    for body, path in cases:
        response = await client.post(turns, json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["errors"][0]["path"] == path, response.text


async def test_an_idempotency_key_is_bound_to_the_parts(build: Build) -> None:
    _, client = build(reader([]))
    session = await open_session(client)
    turns = f"/evals/sessions/{session}/turns"
    key = {"Idempotency-Key": "k1"}
    first = {"message": "m", "parts": [{"type": "image", "url": "https://example.com/a.png"}]}
    other = {"message": "m", "parts": [{"type": "image", "url": "https://example.com/b.png"}]}
    assert (await client.post(turns, json=first, headers=key)).status_code == 200
    again = await client.post(turns, json=first, headers=key)
    assert again.status_code == 200 and again.json()["run"]["turns"] == 1
    reused = await client.post(turns, json=other, headers=key)
    assert reused.status_code == 422
    assert reused.json()["type"] == ProblemType.IDEMPOTENCY_MISMATCH


async def test_a_message_that_spells_a_request_is_not_that_request(build: Build) -> None:
    """A key's fingerprint of a message and of a request with parts are apart: a message
    whose text is a parts request's JSON does not answer that request."""
    _, client = build(reader([]))
    session = await open_session(client)
    turns = f"/evals/sessions/{session}/turns"
    key = {"Idempotency-Key": "k1"}
    request = {"message": "m", "parts": [{"type": "image", "url": "https://example.com/a.png"}]}
    spelled = json.dumps(request, separators=(",", ":"))
    assert (await client.post(turns, json={"message": spelled}, headers=key)).status_code == 200
    reused = await client.post(turns, json=request, headers=key)
    assert reused.status_code == 422, reused.text
    assert reused.json()["type"] == ProblemType.IDEMPOTENCY_MISMATCH


def test_a_body_past_the_limit_is_a_413_naming_the_part() -> None:
    limit = 64 * 1024
    seen: list[Any] = []
    adapter = EvalAdapter(reader(seen), token=TOKEN, limits=Limits(max_body_bytes=limit))
    big = _b64(b"\x89PNG" + bytes(limit))
    with (
        running_server(adapter.app()) as base,
        httpx.Client(base_url=base, headers=AUTH, timeout=10) as http,
    ):
        session = http.post("/evals/sessions", json={}).json()["sessionId"]
        turns = f"/evals/sessions/{session}/turns"
        body = {
            "message": "two pictures",
            "parts": [
                {"type": "image", "mediaType": "image/png", "data": _b64(b"small")},
                {"type": "file", "mediaType": "application/pdf", "name": "a.pdf", "data": big},
            ],
        }
        response = http.post(turns, json=body)
        assert response.status_code == 413, response.text
        problem = response.json()
        assert problem["type"] == ProblemType.PAYLOAD_TOO_LARGE
        assert f"exceeds {limit} bytes, in part 1 (file)" in problem["detail"]
        assert problem["errors"][0]["path"] == "$.parts[1]"
        # a plain message past the limit names no part
        response = http.post(turns, json={"message": "x" * limit})
        assert response.status_code == 413
        assert response.json()["detail"] == f"The body exceeds {limit} bytes."
        assert seen == []
