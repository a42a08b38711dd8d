import argparse
import json
import sys
from pathlib import Path

import httpx
import pytest
from evalport.client.cli import _check as check
from evalport.client.cli._check import Unreachable, check_server
from evalport.client.cli._check_capabilities import CHECK_INTERRUPT
from evalport.server import EvalAdapter
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from support_agent import agent

TOKEN = "check-token-0123456789"


async def test_the_real_adapter_passes_every_check():
    app = EvalAdapter(agent, token=TOKEN).app()
    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=app)
    )
    failed = [f"{r.name}: {r.detail}" for r in results if not r.ok]
    assert failed == []
    assert [r.name for r in results] == [
        "health",
        "auth",
        "create",
        "turn",
        "second turn",
        "attach",
        "delta",
        "content parts",
        "streaming",
        "malformed JSON",
        "invalid body",
        "unknown session",
        "approvals",
        "interrupts",
        "delete",
    ]
    assert results[0].detail == "support-agent 1.0.0"


async def test_content_parts_are_checked_only_where_the_server_lists_them():
    app = EvalAdapter(agent, token=TOKEN, content_parts=False).app()
    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=app)
    )
    skipped = {r.name: r.detail for r in results if r.skipped}
    assert all(r.ok for r in results if not r.skipped)
    assert skipped == {"content parts": "/health does not list 'content-parts'"}
    on = EvalAdapter(agent, token=TOKEN).app()
    checked = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=on)
    )
    detail = {r.name: r.detail for r in checked}
    assert "sha256" in detail["content parts"]


def _broken_app() -> Starlette:
    async def health(request):
        agent = {"name": "x", "version": "1"}
        capabilities = ["attach", "delete"]
        return JSONResponse(
            {"status": "ok", "protocol": "1", "agent": agent, "capabilities": capabilities}
        )

    async def create(request):
        return JSONResponse({"sessionId": "s1"}, status_code=201)

    async def turn(request):
        try:
            json.loads(await request.body())
        except ValueError:
            return Response("Traceback (most recent call last): ...", status_code=500)
        run = {"reply": "hi", "status": "done", "turns": 1, "steps": [{"id": "step-1"}]}
        return JSONResponse({"run": run})

    async def session(request):
        return JSONResponse({"run": {"reply": "hi", "status": "completed", "turns": 1}})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/evals/sessions", create, methods=["POST"]),
            Route("/evals/sessions/{sid}/turns", turn, methods=["POST"]),
            Route("/evals/sessions/{sid}", session, methods=["GET", "DELETE"]),
        ]
    )


async def test_a_broken_server_gets_each_failure_named():
    results = await check_server("http://broken", transport=httpx.ASGITransport(app=_broken_app()))
    by_name = {r.name: r for r in results}
    assert by_name["health"].ok and by_name["create"].ok
    assert not by_name["turn"].ok and "status 'done'" in by_name["turn"].detail
    assert (
        not by_name["malformed JSON"].ok
        and "HTTP 500, expected 400" in by_name["malformed JSON"].detail
    )
    assert not by_name["unknown session"].ok
    assert not by_name["delete"].ok and "HTTP 200, expected 204" in by_name["delete"].detail
    assert by_name["second turn"].skipped  # it builds on a valid first turn
    assert by_name["second turn"].detail == "needs 'turn', which failed"


async def test_unreachable_server_raises():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(Unreachable, match="refused"):
        await check_server("http://nowhere", transport=httpx.MockTransport(refuse))


def test_cli_exit_codes(capsys, monkeypatch):
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    args = parser.parse_args(["http://127.0.0.1:9", "--timeout", "2"])
    assert check.main(args) == 3
    assert "is unreachable" in capsys.readouterr().err
    args = parser.parse_args(["http://127.0.0.1:9", "--token-env", "EVALPORT_NO_SUCH_VAR"])
    monkeypatch.delenv("EVALPORT_NO_SUCH_VAR", raising=False)
    assert check.main(args) == 2


class _Gated:
    """Every turn calls a gated tool, and a second one when the first was approved."""

    def __init__(self, info):
        pass

    async def turn(self, message, ctx):
        from evalport.protocol import ToolCall

        ctx.model_step(tool_calls=[ToolCall(id=None, name="refund", arguments={"order": "A1"})])
        first = await ctx.request_approval("refund", {"order": "A1"})
        if not first.approved:
            return f"not refunded: {first.reason}"
        second = await ctx.request_approval("notify", {"order": "A1"})
        return f"refunded, notified={second.approved}"


@pytest.mark.parametrize("approve", [False, True], ids=["rejected", "approved"])
async def test_a_turn_that_suspends_is_decided_and_the_sequence_goes_on(approve):
    app = EvalAdapter(_Gated, token=TOKEN).app()
    results = await check_server(
        "http://adapter/",
        token=TOKEN,
        transport=httpx.ASGITransport(app=app),
        message="please refund A1",
        approve=approve,
    )
    failed = [f"{r.name}: {r.detail}" for r in results if not r.ok]
    assert failed == []
    assert len(results) == 15  # content parts and streaming: their turns are decided too
    turn = {r.name: r.detail for r in results}["turn"]
    if approve:
        assert turn.endswith("; 2 pending call(s) approved")
    else:
        assert turn.endswith("; 1 pending call(s) rejected")
    assert turn.startswith("status completed, ")


def test_the_approve_option_reaches_the_checks(monkeypatch):
    seen = {}

    async def fake_check_server(url, **options):
        seen.update(options)
        return []

    monkeypatch.setattr(check, "check_server", fake_check_server)
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    assert check.main(parser.parse_args(["http://x/", "--approve"])) == 0
    assert seen["approve"] is True
    assert check.main(parser.parse_args(["http://x/"])) == 0
    assert seen["approve"] is False


async def test_a_server_that_lists_delta_but_sends_whole_runs_fails_the_delta_check():
    adapter = EvalAdapter(agent, token=TOKEN)
    inner = adapter.app()

    async def ignores_since(scope, receive, send):
        if scope["type"] == "http":
            scope = {**scope, "query_string": b""}
        await inner(scope, receive, send)

    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=ignores_since)
    )
    by_name = {r.name: r for r in results}
    assert by_name["attach"].ok
    assert not by_name["delta"].ok
    assert "answered the whole run" in by_name["delta"].detail
    await adapter.aclose()


async def test_interrupts_are_checked_where_the_server_lists_them():
    """An answer with nothing pending is the documented 409, one without its answer the
    documented 422; without approvals (and so interrupts) there is no such check."""
    app = EvalAdapter(agent, token=TOKEN).app()
    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=app)
    )
    detail = {r.name: r.detail for r in results if r.ok}
    assert detail["interrupts"] == (
        "an answer with nothing pending is a 409 problem; one without its answer a 422"
    )
    off = EvalAdapter(agent, token=TOKEN, approvals=False).app()
    unlisted = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=off)
    )
    assert all(r.ok for r in unlisted if not r.skipped)
    assert {r.name: r.detail for r in unlisted if r.skipped} == {
        "approvals": "/health does not list 'approvals'",
        "interrupts": "/health does not list 'interrupts'",
    }


async def test_a_server_that_resumes_on_any_answer_fails_the_interrupts_check():
    """A server that lists interrupts but takes an answer with nothing pending."""
    inner = EvalAdapter(agent, token=TOKEN).app()

    async def accepts_answers(scope, receive, send):
        if scope["type"] == "http" and scope["path"].endswith("/approvals"):
            body = (await receive())["body"]
            if b'"answer"' in body:
                await Response(b'{"run": {}}', media_type="application/json")(scope, receive, send)
                return

            async def again():
                return {"type": "http.request", "body": body, "more_body": False}

            receive = again
        await inner(scope, receive, send)

    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=accepts_answers)
    )
    by_name = {r.name: r for r in results}
    assert by_name["approvals"].ok
    assert not by_name["interrupts"].ok and "expected 409" in by_name["interrupts"].detail


async def test_a_server_that_reads_the_state_before_the_body_passes_the_interrupts_check():
    """An answer without its answer on a session waiting for none: the protocol does not
    order the two problems, so a 409 not-suspended passes as well as the 422."""
    inner = EvalAdapter(agent, token=TOKEN).app()

    async def state_first(scope, receive, send):
        if scope["type"] == "http" and scope["path"].endswith("/approvals"):
            body = (await receive())["body"]
            if b'"answer"' in body:  # nothing is pending: whatever the decision, a 409
                body = json.dumps(
                    {"decisions": {CHECK_INTERRUPT: {"decision": "answer", "answer": 1}}}
                ).encode()

            async def again():
                return {"type": "http.request", "body": body, "more_body": False}

            receive = again
        await inner(scope, receive, send)

    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=state_first)
    )
    by_name = {r.name: r for r in results}
    assert by_name["interrupts"].ok, by_name["interrupts"].detail
    assert by_name["interrupts"].detail == (
        "an answer with nothing pending is a 409 problem, one without its answer too"
    )


class _Asks:
    """Every turn stops to ask which size."""

    def __init__(self, info):
        pass

    async def turn(self, message, ctx):
        size = await ctx.interrupt("choice", {"options": ["S", "M"]})
        return f"size {size}"


async def test_a_turn_that_interrupts_fails_with_what_to_do():
    app = EvalAdapter(_Asks, token=TOKEN).app()
    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=app)
    )
    turn = {r.name: r for r in results}["turn"]
    assert not turn.ok
    assert "waits for an answer to 1 interrupt(s) (choice)" in turn.detail
    assert "--message" in turn.detail


async def test_a_server_that_lists_streaming_but_answers_json_fails_the_streaming_check():
    inner = EvalAdapter(agent, token=TOKEN).app()

    async def ignores_accept(scope, receive, send):
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"accept"]
            scope = {**scope, "headers": headers}
        await inner(scope, receive, send)

    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=ignores_accept)
    )
    by_name = {r.name: r for r in results}
    assert not by_name["streaming"].ok
    assert "answered 'application/json'" in by_name["streaming"].detail
    assert by_name["turn"].ok and by_name["delete"].ok


async def test_a_stream_with_events_out_of_the_protocol_fails_the_streaming_check():
    inner = EvalAdapter(agent, token=TOKEN).app()

    async def renames_an_event(scope, receive, send):
        async def sending(message):
            if message["type"] == "http.response.body":
                body = message.get("body", b"").replace(b"event: step-started", b"event: step")
                message = {**message, "body": body}
            await send(message)

        await inner(scope, receive, sending)

    results = await check_server(
        "http://adapter/", token=TOKEN, transport=httpx.ASGITransport(app=renames_an_event)
    )
    by_name = {r.name: r for r in results}
    assert not by_name["streaming"].ok
    assert by_name["streaming"].detail == "event 'step' is not a protocol event"
