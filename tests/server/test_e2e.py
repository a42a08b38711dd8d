"""End to end: real uvicorn on loopback ports, real sockets, the real ``evalport serve``."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from evalport.protocol import Message, decode_run
from evalport.protocol._cli import main as cli_main
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter
from serverkit import AUTH, TOKEN
from support.servers import free_port, running_process, running_server

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.e2e


def test_refund_conversation_over_real_http() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from support_agent import agent
    finally:
        sys.path.remove(str(ROOT / "examples"))
    adapter = EvalAdapter(agent, token=TOKEN)
    with running_server(adapter.app()) as base, httpx.Client(base_url=base, headers=AUTH) as http:
        assert http.get("/health").json()["agent"] == {"name": "support-agent", "version": "1.0.0"}
        session_id = http.post("/evals/sessions", json={"caseId": "refunds/123"}).json()[
            "sessionId"
        ]
        turns = f"/evals/sessions/{session_id}/turns"
        proposed = decode_run(
            http.post(turns, json={"message": "Hi, I want a refund for order #123"}).content
        )
        assert "Shall I refund it" in proposed.reply
        suspended = decode_run(http.post(turns, json={"message": "Yes, please proceed."}).content)
        assert suspended.status == "in_progress"
        (pending,) = suspended.pending_approvals
        assert (pending.tool, pending.arguments["amount"]) == ("refund_order", 180.0)
        busy = http.post(turns, json={"message": "hello?"})
        assert busy.status_code == 409 and busy.json()["type"].endswith("session-suspended")
        decided = http.post(
            f"/evals/sessions/{session_id}/approvals",
            json={
                "decisions": {
                    pending.call_id: {
                        "decision": "reject",
                        "reason": "above the auto-approve threshold",
                    }
                }
            },
        )
        run = decode_run(decided.content)
        assert run.status == "completed"
        assert "cannot" in run.reply and "above the auto-approve threshold" in run.reply
        assert [t.tool_call.name for t in run.tools] == ["search_orders", "refund_order"]
        assert run.tools[1].approval is not None and run.tools[1].approval.state == "rejected"
        assert http.delete(f"/evals/sessions/{session_id}").status_code == 204


def test_a_client_that_disconnects_mid_turn_does_not_cancel_it() -> None:
    started = threading.Event()
    finish = threading.Event()
    calls: list[str] = []

    async def slow(message: str, history: list[Message], ctx: TurnContext) -> str:
        calls.append(message)
        started.set()
        while not finish.is_set():
            await asyncio.sleep(0.01)
        return "finished anyway"

    adapter = EvalAdapter(slow, token=TOKEN)
    with running_server(adapter.app()) as base, httpx.Client(base_url=base, headers=AUTH) as http:
        session_id = http.post("/evals/sessions").json()["sessionId"]
        path = f"/evals/sessions/{session_id}/turns"
        body = b'{"message":"hang up"}'
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(
                f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Type: application/json\r\nIdempotency-Key: k-1\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            assert started.wait(5)
        # The client is gone; the turn goes on and its result is kept under the key.
        finish.set()
        deadline = time.monotonic() + 5
        while decode_run(http.get(f"/evals/sessions/{session_id}").content).status != "completed":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        retried = http.post(path, json={"message": "hang up"}, headers={"Idempotency-Key": "k-1"})
        assert decode_run(retried.content).reply == "finished anyway"
        assert calls == ["hang up"]


SLOW_AGENT = textwrap.dedent(
    """
    import asyncio

    async def agent(message, history, ctx):
        await asyncio.sleep(float(message))
        return f"slept {message}"
    """
)


def test_evalport_serve_runs_the_example_and_drains_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "evalport.protocol._cli", "serve", "slow_agent:agent"]
    args += [
        "--port",
        str(port),
        "--token-env",
        "SLOW_TOKEN",
        "--prefix",
        "/agent",
        "--log-level",
        "warning",
    ]
    with (
        running_process(
            args, health_url=f"{base}/agent/health", env={"SLOW_TOKEN": TOKEN}, cwd=str(tmp_path)
        ) as process,
        httpx.Client(base_url=base + "/agent", headers=AUTH, timeout=10) as http,
    ):
        assert http.get("/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
        session_id = http.post("/evals/sessions").json()["sessionId"]
        results: list[httpx.Response] = []
        turn = threading.Thread(
            target=lambda: results.append(
                http.post(f"/evals/sessions/{session_id}/turns", json={"message": "0.8"})
            )
        )
        turn.start()
        time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        turn.join(10)
        assert results and results[0].status_code == 200
        assert decode_run(results[0].content).reply == "slept 0.8"
        # uvicorn re-raises SIGTERM once it has drained, as a signalled process should.
        assert process.wait(10) == -signal.SIGTERM


def test_evalport_serve_the_readme_example_file() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [
        sys.executable,
        "-m",
        "evalport.protocol._cli",
        "serve",
        "examples/support_agent.py:agent",
    ]
    args += ["--port", str(port), "--log-level", "warning"]
    with (
        running_process(
            args, health_url=f"{base}/health", env={"EVALPORT_TOKEN": TOKEN}, cwd=str(ROOT)
        ),
        httpx.Client(base_url=base, headers=AUTH) as http,
    ):
        session_id = http.post("/evals/sessions").json()["sessionId"]
        reply = http.post(
            f"/evals/sessions/{session_id}/turns", json={"message": "where is A1051?"}
        )
        assert decode_run(reply.content).reply == "Order A1051 is processing."


# -- start-up refusals (in-process: they return before uvicorn starts) -------------------------


def serve(*args: str) -> int:
    return cli_main(["serve", *args])


def test_serve_refuses_to_start_without_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("EVALPORT_TOKEN", raising=False)
    assert serve("examples/support_agent.py:agent") == 2
    assert "no bearer token" in capsys.readouterr().err


def test_serve_refuses_no_auth_off_loopback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("EVALPORT_TOKEN", raising=False)
    code = serve("examples/support_agent.py:agent", "--insecure-no-auth", "--host", "0.0.0.0")
    assert code == 2
    assert "loopback" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon", "module:attr"),
        ("missing/file.py:agent", "no such file"),
        ("examples/support_agent.py:nope", "no attribute 'nope'"),
        ("not_a_module_xyz:agent", "cannot import module"),
        ("examples/support_agent.py:REFUND_LIMIT", "not an agent"),
    ],
)
def test_serve_names_a_bad_target(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    monkeypatch.chdir(ROOT)
    assert serve(target) == 2
    assert message in capsys.readouterr().err


def test_evalport_serve_without_auth_on_loopback_when_told_so() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [
        sys.executable,
        "-m",
        "evalport.protocol._cli",
        "serve",
        "examples/support_agent.py:agent",
    ]
    args += ["--port", str(port), "--insecure-no-auth", "--log-level", "warning"]
    env = {"EVALPORT_TOKEN": ""}
    with (
        running_process(args, health_url=f"{base}/health", env=env, cwd=str(ROOT)) as process,
        httpx.Client(base_url=base) as http,
    ):
        assert http.get("/health").status_code == 200
        assert http.post("/evals/sessions").status_code == 201
        assert process.stderr is not None
        assert "NO AUTH (loopback only)" in process.stderr.readline()
        # a rebound host name, and a page of another site that reached this address, are
        # refused before any session is made (DNS rebinding, a blind cross-site POST)
        for headers in (
            {"host": "evil.example"},
            {"origin": "https://evil.example"},
            {"sec-fetch-site": "cross-site"},
        ):
            refused = http.post("/evals/sessions", headers=headers)
            assert refused.status_code == 403, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["type"] == "urn:evalport:problem:forbidden"
            assert "this machine" in refused.json()["detail"]
        assert http.get("/health", headers={"host": "localhost"}).status_code == 200
        # a body must say it is JSON: a form or a Blob without a type cannot make a session
        untyped = http.post("/evals/sessions", content=b"{}")
        assert untyped.status_code == 415, untyped.text
        assert untyped.json()["type"] == "urn:evalport:problem:unsupported-media-type"
        assert http.post("/evals/sessions", json={}).status_code == 201


def test_the_serve_command_drains_the_adapter_on_a_signal() -> None:
    import uvicorn
    from evalport.server._cli import DrainingServer

    adapter = EvalAdapter(lambda message, history, ctx: message, token=TOKEN)
    server = DrainingServer(uvicorn.Config(adapter.app()), adapter)
    server.handle_exit(signal.SIGTERM, None)
    assert adapter.draining and server.should_exit
