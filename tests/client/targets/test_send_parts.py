"""Images and files in a turn (issue 18 item 1), on the client: ``ctx.send(image=, file=)``
and lists of parts reach the agent over HTTP (in-process ASGI) and in ``LocalTarget``
alike; a server without ``content-parts`` is refused before anything is sent; and under
the safe policy the bytes (a planted marker) reach no report, cache file or judge prompt."""

from __future__ import annotations

import base64
import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from evalport.client import EvalContext, HttpTarget, LocalTarget
from evalport.client.judges import render_transcript
from evalport.protocol import (
    AgentRun,
    ContentPartsUnsupported,
    ImagePart,
    Message,
    Step,
    TextPart,
    TracePolicy,
    UserPart,
)
from evalport.protocol._cli import main
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter

TOKEN = "parts-token-0123456789"
MARKER = b"PLANTED-MARKER-93c1"
PNG = b"\x89PNG\r\n\x1a\n" + MARKER + bytes(range(40))


async def describer(message: str, history: object, ctx: TurnContext) -> str:
    """Says what it received: each part's type, and for bytes their sha256 prefix."""
    said = []
    for part in ctx.parts:
        if isinstance(part, TextPart):
            said.append(f"text:{part.text}")
        elif isinstance(part.data, bytes):
            said.append(f"{part.media_type}:{hashlib.sha256(part.data).hexdigest()[:12]}")
        else:
            said.append(f"url:{part.url}")
    return " | ".join(said)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def http_target(adapter: EvalAdapter) -> HttpTarget:
    transport = httpx.ASGITransport(app=adapter.app())
    return HttpTarget("http://agent.test", token=TOKEN, transport=transport)


@pytest.mark.parametrize("where", ["http", "local"])
async def test_send_image_and_file_reach_the_agent(where: str, tmp_path: Path) -> None:
    (tmp_path / "receipt.png").write_bytes(PNG)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "terms.pdf").write_bytes(b"%PDF-1.4 terms")
    adapter = EvalAdapter(describer, token=TOKEN)
    target = http_target(adapter) if where == "http" else LocalTarget(describer)
    async with target:
        session = await target.open()
        ctx = EvalContext(target, session, base_dir=tmp_path)
        turn = await ctx.send("What is on this receipt?", image="receipt.png")
        assert turn.reply == f"text:What is on this receipt? | image/png:{sha(PNG)}"
        assert turn.message == "What is on this receipt?"
        turn = await ctx.send(
            ["compare", ImagePart(data=b"GIF89a-tiny", media_type="image/gif"), "with"],
            image="https://example.com/a.png",
            file=[tmp_path / "docs" / "terms.pdf", "docs/terms.pdf"],
        )
        pdf = sha(b"%PDF-1.4 terms")
        assert turn.reply == (
            f"text:compare | image/gif:{sha(b'GIF89a-tiny')} | text:with | "
            f"url:https://example.com/a.png | application/pdf:{pdf} | application/pdf:{pdf}"
        )
        assert turn.message == "compare\nwith"
        run = ctx.run
        assert run.user_messages == ["What is on this receipt?", "compare\nwith"]
        assert run.user_parts and [(p.turn, p.type) for p in run.user_parts][:2] == [
            (1, "text"),
            (1, "image"),
        ]
        image = run.user_parts[1]
        assert image.data is None, "the safe policy dropped the bytes"
        assert image.sha256 == hashlib.sha256(PNG).hexdigest() and image.size == len(PNG)
        assert [p.name for p in run.user_parts if p.type == "file"] == ["terms.pdf"] * 2
        await ctx.send("plain")  # a plain turn after parts
        assert ctx.run.user_messages[-1] == "plain"
        await session.close()
    await adapter.aclose()


async def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    async with LocalTarget(describer) as target:
        ctx = EvalContext(target, await target.open(), base_dir=tmp_path)
        with pytest.raises(FileNotFoundError, match=r"image='nope\.png'.*nope\.png"):
            ctx.send("look", image="nope.png")
        with pytest.raises(TypeError, match=r"ctx.send\(file=...\) takes a path"):
            ctx.send("look", file=3.5)
        assert ctx.run.turns == 0


async def test_a_server_without_the_capability_is_refused_before_sending() -> None:
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok", "protocol": "1", "capabilities": []})
        if request.url.path == "/evals/sessions":
            return httpx.Response(201, json={"sessionId": "s1"})
        return httpx.Response(200, json={"run": {"reply": "ok", "status": "completed", "turns": 1}})

    target = HttpTarget("http://old.test", transport=httpx.MockTransport(answer))
    async with target:
        session = await target.open()
        with pytest.raises(ContentPartsUnsupported, match="content-parts"):
            await session.send("look", parts=[ImagePart(url="https://example.com/a.png")])
        assert sent == ["GET /health", "POST /evals/sessions"]
        turn = await session.send("look")  # text still goes, as a 1.0 body
        assert turn.reply == "ok" and sent[-1] == "POST /evals/sessions/s1/turns"


async def test_a_list_of_text_only_is_a_plain_message() -> None:
    """``ctx.send(["hi", TextPart("there")])`` is the message "hi\\nthere", with no parts:
    a server without ``content-parts`` takes it."""
    bodies: list[Any] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok", "protocol": "1", "capabilities": []})
        if request.url.path == "/evals/sessions":
            return httpx.Response(201, json={"sessionId": "s1"})
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"run": {"reply": "ok", "status": "completed", "turns": 1}})

    async with HttpTarget("http://old.test", transport=httpx.MockTransport(answer)) as target:
        ctx = EvalContext(target, await target.open())
        turn = await ctx.send(["hi", TextPart(text="there")])
    assert turn.reply == "ok"
    assert bodies[0]["message"] == "hi\nthere" and "parts" not in bodies[0]


def test_policies_on_recorded_parts() -> None:
    data = base64.b64encode(PNG).decode()
    run = AgentRun(
        turns=1,
        user_messages=["look"],
        user_parts=[
            UserPart(turn=1, type="text", text="look"),
            UserPart(turn=1, type="image", media_type="image/png", data=PNG),
            UserPart(turn=1, type="file", url="data:text/plain,SECRET-" + MARKER.decode()),
        ],
        steps=[
            Step(
                turn=1,
                output_messages=[
                    Message(
                        role="user",
                        content=[
                            {"type": "image", "base64": data, "mime_type": "image/png"},
                            {
                                "type": "image_url",
                                "image_url": {"url": f"data:image/png;base64,{data}"},
                            },
                        ],
                    )
                ],
            )
        ],
    )
    safe = TracePolicy.safe().apply(run)
    encoded = json.dumps(msgspec.to_builtins(safe))
    assert MARKER.decode() not in encoded and data[:40] not in encoded
    assert safe.user_parts and safe.user_parts[1].sha256 == hashlib.sha256(PNG).hexdigest()
    assert safe.user_parts[2].url is None and safe.user_parts[2].sha256
    assert run.user_parts and run.user_parts[1].data == PNG, "apply copied, the run is intact"
    assert TracePolicy.verbatim().apply(run).user_parts == run.user_parts
    for shown in (safe, run):  # a judge never reads bytes, whatever the policy kept
        transcript = render_transcript(shown)
        assert "USER ATTACHED IMAGE: image/png, " in transcript and "sha256:" in transcript
        assert MARKER.decode() not in transcript and data[:40] not in transcript


SIGNED = "https://user:pw@bucket.example.com/a/receipt.png?X-Amz-Signature=SIG-7f3a&token=TOK-91c2"


def test_a_presigned_url_keeps_no_query_under_the_safe_policy() -> None:
    """Under safe, a part's URL keeps scheme://host/path and its query (a signature, a
    token) and user info become a digest; a judge never reads the query, whatever the
    policy kept; verbatim keeps the URL whole."""
    run = AgentRun(
        turns=1,
        user_messages=["look"],
        user_parts=[UserPart(turn=1, type="image", media_type="image/png", url=SIGNED)],
        steps=[
            Step(
                turn=1,
                output_messages=[
                    Message(
                        role="user",
                        content=[
                            {"type": "image_url", "image_url": {"url": SIGNED}},
                            {"type": "image", "source": {"type": "url", "url": SIGNED}},
                        ],
                    )
                ],
            )
        ],
    )
    safe = TracePolicy.safe().apply(run)
    encoded = json.dumps(msgspec.to_builtins(safe))
    for secret in ("SIG-7f3a", "TOK-91c2", "user:pw"):
        assert secret not in encoded
    digest = hashlib.sha256(SIGNED.encode()).hexdigest()
    kept = f"https://bucket.example.com/a/receipt.png?sha256={digest}"
    assert safe.user_parts and safe.user_parts[0].url == kept
    assert encoded.count(kept) == 3
    assert TracePolicy.safe().apply(safe) == safe, "applying twice changes nothing"
    assert TracePolicy.verbatim().apply(run).user_parts == run.user_parts
    assert run.user_parts and run.user_parts[0].url == SIGNED, "the run is intact"
    for shown in (safe, run):
        transcript = render_transcript(shown)
        assert "IMAGE: image/png, https://bucket.example.com/a/receipt.png\n" in transcript
        assert "SIG-7f3a" not in transcript and "TOK-91c2" not in transcript
        assert "user:pw" not in transcript and "sha256=" not in transcript


AGENT = """
import hashlib

async def agent(message, history, ctx):
    sizes = [len(part.data) for part in ctx.parts if getattr(part, "data", None)]
    return f"{message}: {sizes}"
"""

EVALS = """
from evalport.client import eval_case


@eval_case("reads the receipt")
async def receipt(ctx):
    await ctx.send("What is on this receipt?", image="receipt.png")
    ctx.contains("[{size}]")
"""


def test_the_bytes_reach_no_report_or_cache_file(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "receipt.png").write_bytes(PNG)
    (tmp_path / "evals" / "receipt_eval.py").write_text(
        textwrap.dedent(EVALS).replace("{size}", str(len(PNG)))
    )
    for _ in range(2):  # the second run would replay a recording, if one were written
        reports = ["--out", "run", "--json", "s.json", "--html", "r.html"]
        cache = ["--cache", "--cache-dir", "cache", "-q"]
        code = main(["run", "evals", "--local", "agent.py:agent", *reports, *cache])
        assert code == 0
    b64 = base64.b64encode(PNG)
    written = [
        path
        for path in tmp_path.rglob("*")
        if path.is_file() and path.suffix != ".py" and path.name != "receipt.png"
    ]
    assert any(path.name == "s.json" for path in written)
    leaked = [p for p in written if MARKER in p.read_bytes() or b64[:40] in p.read_bytes()]
    assert leaked == []
    assert any(hashlib.sha256(PNG).hexdigest().encode() in p.read_bytes() for p in written)


async def seen_data(message: str, history: list[Any], ctx: TurnContext) -> str:
    images = [part for part in ctx.parts if isinstance(part, ImagePart)]
    return " ".join(f"{type(part.data).__name__}:{part.data!r}" for part in images)


async def test_base64_text_data_reaches_a_local_agent_as_bytes_as_over_http() -> None:
    """An ImagePart built with base64 text: over HTTP the wire made it bytes, in-process it
    failed inside the runtime, was swallowed, and the turn came back pending and empty."""
    part = ImagePart(data=base64.b64encode(b"\x89PNG-bytes").decode(), media_type="image/png")
    adapter = EvalAdapter(seen_data, token="parts-token-0123456789")
    replies = []
    for target in (
        LocalTarget(seen_data),
        HttpTarget(
            "http://agent.test",
            token="parts-token-0123456789",
            transport=httpx.ASGITransport(app=adapter.app()),
        ),
    ):
        async with target:
            session = await target.open()
            replies.append((await session.send("look", parts=[part])).reply)
    await adapter.aclose()
    assert replies == ["bytes:b'\\x89PNG-bytes'"] * 2


async def test_a_failure_of_the_runtime_itself_reaches_the_caller() -> None:
    """Not the agent's failure (a failed run) but the runtime's: the send raises it."""
    from evalport.protocol.runtime import AgentSession, SessionInfo, session_factory

    info = SessionInfo(session_id="s1")
    session = AgentSession(await session_factory(seen_data)(info), info)
    with pytest.raises(TypeError):
        await session.send("look", parts=[ImagePart(data="not bytes", media_type="image/png")])
