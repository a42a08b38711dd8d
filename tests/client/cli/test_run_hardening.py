"""``evalport run`` and ``check`` on a bad day: silent servers, tokens, secrets in URLs and
in replies, the trace policy, and ``--attach``. Real sockets and real uvicorn throughout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from evalport.client import HttpTarget
from evalport.protocol._cli import main
from evalport.server import EvalAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from support.servers import running_server

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
AGENT = str(ROOT / "examples" / "support_agent.py") + ":agent"
TOKEN = "run-hardening-token-0123456789"

SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("status of A1049")
async def status(ctx):
    await ctx.send("where is order A1049?")
    ctx.contains("shipped")
    ctx.called_tool("order_status", {"order_id": "A1049"})
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "support_eval.py").write_text(textwrap.dedent(SUITE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALPORT_TOKEN", raising=False)
    return tmp_path


def _support_agent():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from support_agent import agent
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return agent


def written(folder: Path) -> dict[str, str]:
    """Every file under ``folder``, by path, as text."""
    return {
        str(path): path.read_text(errors="replace")
        for path in folder.rglob("*")
        if path.is_file() and ".pyc" not in path.name
    }


# -- 16.4: every wait bounded; a silent server ends the run with exit 3 -------------------


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """Accepts connections on a loopback port and never answers a byte."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                connection, _ = listener.accept()
                held.append(connection)

    thread = threading.Thread(target=accept, name="silent-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()


def test_a_silent_server_ends_the_run_with_exit_3_within_the_timeout(project, capsys):
    with silent_server() as url:
        started = time.monotonic()
        code = main(["run", "evals", "--target", url, "--timeout", "1.5"])
        elapsed = time.monotonic() - started
    assert code == 3
    assert elapsed < 10
    err = capsys.readouterr().err
    assert "did not answer GET /health within 1.5 s" in err


def test_the_read_timeout_is_an_option_and_a_config_key(project, capsys):
    with silent_server() as url:
        started = time.monotonic()
        code = main(["run", "evals", "--target", url, "--read-timeout", "0.5", "--timeout", "60"])
        elapsed = time.monotonic() - started
        assert code == 3
        assert elapsed < 15  # four attempts of 0.5 s and their backoff, not 60 s
        assert "ReadTimeout" in capsys.readouterr().err

        (project / "pyproject.toml").write_text(
            "[tool.evalport]\nread-timeout = 0.5\nconnect-timeout = 2\ntimeout = 60\n"
        )
        started = time.monotonic()
        assert main(["run", "evals", "--target", url]) == 3
        assert time.monotonic() - started < 15
    (project / "pyproject.toml").write_text("[tool.evalport]\nread-timeout = nan\n")
    assert main(["run", "evals", "--target", url]) == 2
    assert "read-timeout must be a positive number of seconds" in capsys.readouterr().err


def test_check_is_bounded_the_same_way(capsys):
    with silent_server() as url:
        started = time.monotonic()
        code = main(["check", url, "--read-timeout", "0.5", "--timeout", "60"])
        assert code == 3 and time.monotonic() - started < 10
        assert "is unreachable" in capsys.readouterr().err
        started = time.monotonic()
        assert main(["check", url, "--timeout", "1"]) == 3
        assert time.monotonic() - started < 10


# -- 15.6: EVALPORT_TOKEN by default; a 401 says what was read ---------------------------


def test_run_and_check_read_evalport_token_unless_told_otherwise(project, monkeypatch, capsys):
    app = EvalAdapter(_support_agent(), token=TOKEN).app()
    with running_server(app) as url:
        monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
        assert main(["run", "evals", "--target", url]) == 0
        assert main(["check", url]) == 0
        capsys.readouterr()

        monkeypatch.setenv("EVALPORT_TOKEN", "a-wrong-token-0123456789")
        assert main(["run", "evals", "--target", url]) == 2
        err = capsys.readouterr().err
        assert "refused the token read from $EVALPORT_TOKEN" in err
        assert main(["check", url]) == 2  # the same mistake, the same exit code as run
        assert "refused the token read from $EVALPORT_TOKEN" in capsys.readouterr().err

        monkeypatch.setenv("MY_AGENT_TOKEN", TOKEN)  # --token-env wins over the default
        assert main(["run", "evals", "--target", url, "--token-env", "MY_AGENT_TOKEN"]) == 0
        capsys.readouterr()

        monkeypatch.delenv("EVALPORT_TOKEN")
        assert main(["run", "evals", "--target", url]) == 2
        err = capsys.readouterr().err
        assert "none was sent ($EVALPORT_TOKEN is not set)" in err
        assert "refused the token" not in err
        assert main(["check", url]) == 2
        assert "none was sent" in capsys.readouterr().err


def test_check_with_a_token_against_a_server_without_auth_says_so(monkeypatch, capsys):
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    with running_server(EvalAdapter(_support_agent(), token=None).app()) as url:
        assert main(["check", url]) == 1
    out = capsys.readouterr().out
    assert "FAIL  auth: HTTP 201 without a token, although $EVALPORT_TOKEN holds one" in out


# -- 16.7: credentials in a URL reach no file and no --json ------------------------------


def evalport(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command line in a subprocess (so that ``sys.argv`` is what it was given)."""
    return subprocess.run(
        [sys.executable, "-m", "evalport.protocol._cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_credentials_in_the_target_url_reach_no_file(project):
    secret = "planted-url-secret-7f3a9c"
    app = EvalAdapter(_support_agent(), token=None).app()
    with running_server(app) as url:
        with_credentials = url.replace("http://", f"http://alice:{secret}@")
        reports = ["--json", "r.json", "--junit", "r.xml", "--md", "r.md", "--html", "r.html"]
        done = evalport(
            project, "run", "evals", f"--target={with_credentials}", "--out", "run", *reports
        )
        assert done.returncode == 0, done.stderr
    files = written(project)
    assert {"r.json", "r.xml", "r.md", "r.html"} <= {Path(name).name for name in files}
    assert len([name for name in files if "/run/" in name]) >= 3
    leaks = [name for name, text in files.items() if secret in text]
    assert leaks == []
    assert secret not in done.stdout and secret not in done.stderr
    command = json.loads((project / "r.json").read_text())["provenance"]["command"]
    assert "--target=http://***@127.0.0.1" in " ".join(command)


def test_credentials_in_an_unreachable_url_stay_out_of_the_error(project, capsys):
    with silent_server() as url:
        with_credentials = url.replace("http://", "http://bob:hunter2-planted@")
        assert main(["run", "evals", "--target", with_credentials, "--timeout", "0.5"]) == 3
    err = capsys.readouterr().err
    assert "hunter2-planted" not in err and "127.0.0.1" in err


# -- 16.6: a non-JSON reply is quoted only under the verbatim policy ---------------------

PAGE_SECRET = "planted-proxy-page-secret-42"


def _lying_app() -> Starlette:
    """Health and create as the protocol says; a turn answered by a proxy's HTML page."""

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "protocol": "1", "agent": {"name": "liar"}})

    async def create(request: Request) -> Response:
        body = await request.json()
        if "create" in (body.get("caseId") or ""):
            return HTMLResponse(f"<html><body>{PAGE_SECRET}</body></html>", status_code=502)
        return JSONResponse({"sessionId": "s-1"}, status_code=201)

    async def turn(request: Request) -> Response:
        return HTMLResponse(f"<html><body>upstream says {PAGE_SECRET}</body></html>")

    async def delete(request: Request) -> Response:
        return Response(status_code=204)

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/evals/sessions", create, methods=["POST"]),
            Route("/evals/sessions/{sid}/turns", turn, methods=["POST"]),
            Route("/evals/sessions/{sid}", delete, methods=["DELETE"]),
        ]
    )


LIAR_SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("a turn answered by html")
async def turn_html(ctx):
    await ctx.send("hello")


@eval_case("a create answered by html")
async def create_html(ctx):
    await ctx.send("hello")
"""


@pytest.mark.parametrize("policy", ["safe", "verbatim"])
def test_a_non_json_reply_is_quoted_by_the_policy(project, capsys, policy):
    (project / "evals" / "support_eval.py").write_text(textwrap.dedent(LIAR_SUITE))
    with running_server(_lying_app()) as url:
        args = ["run", "evals", "--target", url, "--out", "run", "--json", "r.json"]
        chosen = ["--trace-policy", policy] if policy != "safe" else []  # safe: the default
        assert main([*args, *chosen]) == 1
    out, err = capsys.readouterr()
    files = written(project / "run")
    assert {"summary.json", "results.jsonl"} <= {Path(name).name for name in files}
    texts = [out, err, *files.values(), (project / "r.json").read_text()]
    summary = (project / "r.json").read_text()
    assert "answered 502" in summary and "turn_html" in summary
    if policy == "safe":
        assert [text[:80] for text in texts if PAGE_SECRET in text] == []
        assert "not JSON" in summary and "--trace-policy verbatim" in summary
    else:  # the same run quotes the page: what the safe run hid was there
        assert PAGE_SECRET in out and PAGE_SECRET in summary
        assert any(PAGE_SECRET in text for name, text in files.items() if "results" in name)


# -- 15.1: --trace-policy and trace-policy reach the target -------------------------------


def _arguments_seen(folder: Path) -> list[object]:
    """The tool arguments of every trial file of a run folder."""
    return [
        record["tool_call"]["arguments"]
        for path in folder.glob("cases/*/trial-*.json")
        for record in json.loads(path.read_text())["run"]["tools"]
    ]


@pytest.mark.parametrize("where", ["http", "local"])
def test_the_trace_policy_is_an_option_and_a_config_key(project, where):
    app = EvalAdapter(_support_agent(), token=None).app()
    with running_server(app) as url:
        target = ["--target", url] if where == "http" else ["--local", AGENT]
        assert main(["run", "evals", *target, "--out", "safe"]) == 0
        assert main(["run", "evals", *target, "--out", "open", "--trace-policy", "verbatim"]) == 0
        (project / "pyproject.toml").write_text('[tool.evalport]\ntrace-policy = "verbatim"\n')
        assert main(["run", "evals", *target, "--out", "configured"]) == 0
    assert {"order_id": "A1049"} not in _arguments_seen(project / "safe")
    assert any("sha256:" in json.dumps(args) for args in _arguments_seen(project / "safe"))
    assert {"order_id": "A1049"} in _arguments_seen(project / "open")
    assert {"order_id": "A1049"} in _arguments_seen(project / "configured")
    (project / "pyproject.toml").write_text('[tool.evalport]\ntrace-policy = "loose"\n')
    assert main(["run", "evals", *target]) == 2


# -- 16.5: a --local agent's exception text is not printed under the safe policy ----------

FAILING_AGENT = """
def agent(message, history, ctx):
    raise RuntimeError("planted-agent-secret-99 for " + message)
"""

FAILING_SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("the agent fails")
async def fails(ctx):
    await ctx.send("hello")
    ctx.contains("hello")
"""


@pytest.mark.parametrize("policy", ["safe", "verbatim"])
def test_local_agent_errors_reach_stderr_in_full_whatever_the_policy(project, policy):
    (project / "failing_agent.py").write_text(textwrap.dedent(FAILING_AGENT))
    (project / "evals" / "support_eval.py").write_text(textwrap.dedent(FAILING_SUITE))
    chosen = ["--trace-policy", policy] if policy != "safe" else []  # safe: the default
    args = ["--local", "failing_agent.py:agent", *chosen, "--out", "run"]
    done = evalport(project, "run", "evals", *args)
    assert done.returncode == 1, done.stderr
    assert "RuntimeError" in done.stderr
    error_id = re.search(r"agent error ([0-9a-f-]{36})", done.stderr)
    assert error_id is not None, done.stderr
    # the user's own process: its errors in full on stderr (issue 38); the run's reports
    # still follow the policy
    assert "planted-agent-secret-99" in done.stderr and "Traceback" in done.stderr
    if policy == "safe":
        assert "planted-agent-secret-99" not in done.stdout


# -- 15.8: --attach takes one trial at a time, and refuses what cannot work ---------------

ATTACH_SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("first question")
async def first(ctx):
    await ctx.send("one")
    ctx.contains("heard one")


@eval_case("second question")
async def second(ctx):
    await ctx.send("two")
    ctx.contains("heard two")


@eval_case("third question")
async def third(ctx):
    await ctx.send("three")
    ctx.contains("heard three")
"""


async def slow_agent(message: str, history: list, ctx) -> str:
    await asyncio.sleep(0.3)
    return f"heard {message}"


def test_attach_runs_one_trial_at_a_time_in_the_session(project, capsys):
    (project / "evals" / "support_eval.py").write_text(textwrap.dedent(ATTACH_SUITE))
    with running_server(EvalAdapter(slow_agent, token=None).app()) as url:

        async def open_session() -> str:
            async with HttpTarget(url) as target:
                return (await target.open()).id

        async def turns(session_id: str) -> list[str]:
            async with HttpTarget(url) as target:
                return list((await target.attach(session_id)).run.user_messages)

        session_id = asyncio.run(open_session())
        args = ["run", "evals", "--target", url, "--attach", session_id, "--concurrency", "8"]
        assert main([*args, "--json", "r.json"]) == 0, capsys.readouterr().out
        summary = json.loads((project / "r.json").read_text())
        assert summary["counts"]["passed"] == 3
        assert asyncio.run(turns(session_id)) == ["one", "two", "three"]  # discovery order

        assert main([*args, "--repeat", "2"]) == 2
        err = capsys.readouterr().err.strip()
        assert "--repeat 2" in err and len(err.splitlines()) == 1
        assert main(["run", "evals", "--local", AGENT, "--attach", session_id]) == 2
        err = capsys.readouterr().err.strip()
        assert "--attach needs --target" in err and len(err.splitlines()) == 1
