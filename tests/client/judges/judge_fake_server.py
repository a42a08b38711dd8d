"""A small fake OpenAI-compatible chat server (Starlette; the fixture serves it with real
uvicorn on loopback through ``support.servers.running_server``).

It answers ``POST /v1/chat/completions`` from a script of replies, in order, and keeps
every request it received. A reply is built with :func:`completion`, :func:`status` or
:func:`raw`. Past the end of the script it answers 500 "script exhausted", so a test that
makes more calls than it scripted fails loudly.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def completion(
    content: str,
    *,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    top_logprobs: list[tuple[str, float]] | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    """A 200 chat completion whose message content is ``content``."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    if top_logprobs is not None:
        choice["logprobs"] = {
            "content": [
                {
                    "token": top_logprobs[0][0],
                    "logprob": top_logprobs[0][1],
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top_logprobs],
                }
            ]
        }
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    return {"status": 200, "body": msgspec.json.encode(body), "headers": {}}


def verdict(score: float, reason: str = "ok", evidence: list[str] | None = None) -> dict[str, Any]:
    """A completion carrying a well-formed verdict."""
    answer = {"reason": reason, "evidence": evidence or [], "score": score}
    return completion(msgspec.json.encode(answer).decode())


def status(code: int, text: str = "", headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An error answer (e.g. 429 with Retry-After, 503, 400)."""
    body = msgspec.json.encode({"error": {"message": text or f"status {code}"}})
    return {"status": code, "body": body, "headers": headers or {}}


def raw(body: bytes, code: int = 200) -> dict[str, Any]:
    """Any body at all (malformed JSON, a non-completion)."""
    return {"status": code, "body": body, "headers": {}}


class FakeChatServer:
    """The scripted server; ``script`` and ``requests`` are reset per test."""

    def __init__(self) -> None:
        self.script: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])
        self.base_url = ""  # set by the fixture that serves the app

    def reset(self, *replies: dict[str, Any]) -> None:
        self.script = deque(replies)
        self.requests.clear()
        self.headers.clear()

    async def chat(self, request: Request) -> Response:
        self.requests.append(msgspec.json.decode(await request.body()))
        self.headers.append(dict(request.headers))
        if not self.script:
            return JSONResponse({"error": {"message": "script exhausted"}}, status_code=500)
        reply = self.script.popleft()
        return Response(
            reply["body"],
            status_code=reply["status"],
            headers=reply["headers"],
            media_type="application/json",
        )
