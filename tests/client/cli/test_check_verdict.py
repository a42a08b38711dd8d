"""``evalport check``'s verdict (issue 39, items 12 to 14): a run answered without its
``{"run": ...}`` envelope fails; ``attach`` and ``delete`` are checked only where
``/health`` lists them; a check that could not run is printed as skipped, with why, and
counted; a stop reason out of the protocol is named with the allowed values."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.client.cli import _check as check
from evalport.client.cli._check import check_server
from evalport.protocol import StopReason
from evalport.server import EvalAdapter
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from support_agent import agent

TOKEN = "check-token-0123456789"


def _rewriting(inner: Any, rewrite: Any) -> Any:
    """An ASGI app that answers as ``inner`` with each JSON body passed through
    ``rewrite(method, path, body)``; one it returns None for, and streams, pass as they are."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def buffer(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            media = dict(start["headers"]).get(b"content-type", b"")
            if not media.startswith(b"application/json"):  # a stream, a problem: as it is
                await send(message)
                return
            if message["type"] == "http.response.start":
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            rewritten = rewrite(scope["method"], scope["path"], json.loads(body))
            if rewritten is not None:
                body = json.dumps(rewritten).encode()
            kept = [(k, v) for k, v in start["headers"] if k != b"content-length"]
            kept.append((b"content-length", str(len(body)).encode()))
            await send({"type": "http.response.start", "status": start["status"], "headers": kept})
            await send({"type": "http.response.body", "body": body})

        await inner(scope, receive, buffer)

    return app


def _unwrapped(method: str, path: str, body: Any) -> Any:
    """A server that answers a turn with the bare run, as some hand-written servers do."""
    if method == "POST" and path.endswith("/turns") and "run" in body:
        return body["run"]
    return None


async def test_a_run_answered_without_its_envelope_fails_the_turn_check():
    app = _rewriting(EvalAdapter(agent, token=TOKEN).app(), _unwrapped)
    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=app)
    )
    turn = {r.name: r for r in results}["turn"]
    assert not turn.ok
    assert '{"run": ...}' in turn.detail and "'reply'" in turn.detail


def _without_attach_and_delete(inner: Any) -> Any:
    """The adapter, with ``attach`` and ``delete`` left out of ``/health`` and their routes
    answering 405, as a server may that implements only the required operations."""

    def rewrite(method: str, path: str, body: Any) -> Any:
        if path == "/health":
            body["capabilities"] = [
                c for c in body["capabilities"] if c not in ("attach", "delete")
            ]
            return body
        return None

    listed = _rewriting(inner, rewrite)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        session = scope["type"] == "http" and scope["path"].count("/") == 3
        if session and scope["method"] in ("GET", "DELETE"):
            await Response(status_code=405)(scope, receive, send)
            return
        await listed(scope, receive, send)

    return app


async def test_attach_and_delete_are_skipped_where_health_does_not_list_them():
    app = _without_attach_and_delete(EvalAdapter(agent, token=TOKEN).app())
    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=app)
    )
    failed = [f"{r.name}: {r.detail}" for r in results if not r.ok and not r.skipped]
    assert failed == []
    skipped = {r.name: r.detail for r in results if r.skipped}
    assert skipped["attach"] == "/health does not list 'attach'"
    assert skipped["delete"] == "/health does not list 'delete'"
    assert skipped["delta"] == "/health does not list 'attach'"  # it reads ?since= by attach
    assert results[-1].name == "delete"  # each check keeps its place in the list


def _broken_app() -> Starlette:
    """Answers health and create; every turn is a run whose status is out of the protocol."""

    async def health(request):
        return JSONResponse(
            {"status": "ok", "protocol": "1", "agent": {"name": "x", "version": "1"}}
        )

    async def create(request):
        return JSONResponse({"sessionId": "s1"}, status_code=201)

    async def turn(request):
        return JSONResponse({"run": {"reply": "hi", "status": "done", "turns": 1}})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/evals/sessions", create, methods=["POST"]),
            Route("/evals/sessions/{sid}/turns", turn, methods=["POST"]),
        ]
    )


async def test_the_checks_that_build_on_a_failed_one_are_skipped_with_the_reason():
    results = await check_server("http://broken", transport=httpx.ASGITransport(app=_broken_app()))
    by_name = {r.name: r for r in results}
    assert not by_name["turn"].ok and not by_name["turn"].skipped
    assert by_name["second turn"].skipped and by_name["second turn"].detail == (
        "needs 'turn', which failed"
    )
    assert by_name["attach"].detail == "needs 'second turn', which was skipped"
    assert by_name["auth"].skipped and "no token" in by_name["auth"].detail
    names = [r.name for r in results]
    assert names[:6] == ["health", "auth", "create", "turn", "second turn", "attach"]


def test_the_verdict_counts_passed_failed_and_skipped(capsys, monkeypatch):
    async def fake_check_server(url, **options):
        return [
            check.CheckResult("health", True, "x 1"),
            check.CheckResult("turn", False, "run.status 'done'"),
            check.CheckResult("second turn", False, "needs 'turn', which failed", skipped=True),
        ]

    monkeypatch.setattr(check, "check_server", fake_check_server)
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    assert check.main(parser.parse_args(["http://x/"])) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "PASS  health: x 1",
        "FAIL  turn: run.status 'done'",
        "SKIP  second turn: needs 'turn', which failed",
        "1 passed, 1 failed, 1 skipped",
    ]


def test_only_skipped_checks_do_not_fail_the_verdict(capsys, monkeypatch):
    async def fake_check_server(url, **options):
        return [
            check.CheckResult("health", True, "x 1"),
            check.CheckResult("delta", False, "/health does not list 'delta'", skipped=True),
        ]

    monkeypatch.setattr(check, "check_server", fake_check_server)
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    assert check.main(parser.parse_args(["http://x/"])) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed, 1 skipped"


@pytest.mark.parametrize("where", ["run", "step"])
async def test_an_unknown_stop_reason_is_named_with_the_allowed_values(where):
    def rewrite(method: str, path: str, body: Any) -> Any:
        if method == "POST" and path.endswith("/turns"):
            run = body["run"]
            signal = {"reason": "done", "message": "", "context": {}, "source": "agent"}
            if where == "run":
                run["stopSignal"] = signal
            else:
                run["steps"][-1]["stopSignal"] = signal
            return body
        return None

    app = _rewriting(EvalAdapter(agent, token=TOKEN).app(), rewrite)
    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=app)
    )
    turn = {r.name: r for r in results}["turn"]
    assert not turn.ok
    assert "'done' is not one of " + ", ".join(StopReason.ALL) in turn.detail
