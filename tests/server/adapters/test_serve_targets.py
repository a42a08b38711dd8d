"""What ``evalport serve`` makes of its target, in a real subprocess: a framework's own
agent (wrapped in its adapter), an async factory or lifespan made inside its loop, and a
target that is neither (one short line, exit 2)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.docs import section_blocks
from support.servers import free_port, wait_for_http

pytestmark = pytest.mark.e2e

TOKEN = "serve-targets-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HERE = Path(__file__).parent


def command(target: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "evalport.protocol._cli", "serve", target,
        "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip


@contextlib.contextmanager
def serving(target: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``evalport serve target``; yields its URL and its stderr file (complete after exit)."""
    port = free_port()
    stderr = tmp_path / "stderr.txt"
    env = {"EVALPORT_TOKEN": TOKEN, "EFFECTS": str(tmp_path / "effects.txt")}
    with stderr.open("w") as sink:
        process = subprocess.Popen(
            command(target, port), stderr=sink, stdout=subprocess.DEVNULL,
            env={**os.environ, **env}, text=True,
        )  # fmt: skip
        try:
            wait_for_http(f"http://127.0.0.1:{port}/health", timeout=90, process=process)
            yield f"http://127.0.0.1:{port}", stderr
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                process.kill()
                process.wait(30)


def one_turn(url: str, message: str) -> dict:
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
        created = http.post("/evals/sessions", json={})
        assert created.status_code == 201, created.text
        session = created.json()["sessionId"]
        response = http.post(f"/evals/sessions/{session}/turns", json={"message": message})
        assert response.status_code == 200, response.text
        return response.json()["run"]


@pytest.mark.parametrize(
    ("name", "module", "wrapper"),
    [
        ("pydantic_ai_raw", "pydantic_ai", "PydanticAIAgent"),
        ("openai_agents_raw", "agents", "OpenAIAgentsAgent"),
        ("langgraph_raw", "langgraph", "LangGraphAgent"),
    ],
)
def test_a_frameworks_own_agent_is_served_through_its_adapter(
    tmp_path: Path, name: str, module: str, wrapper: str
) -> None:
    pytest.importorskip(module)
    with serving(f"{HERE / 'served_frameworks.py'}:{name}", tmp_path) as (url, stderr):
        run = one_turn(url, "my name is Ada")
        assert run["status"] == "completed" and run["reply"] == "you are Ada (1 messages)"
        assert len(run["steps"]) == 1  # recorded by the adapter, step by step
    lines = stderr.read_text().splitlines()
    assert any(f"evalport.server.adapters.{wrapper}" in line for line in lines), lines


@pytest.mark.parametrize("name", ["make_agent", "lifespan", "generator"])
def test_an_async_target_is_made_inside_the_serving_loop(tmp_path: Path, name: str) -> None:
    with serving(f"{HERE / 'served_async.py'}:{name}", tmp_path) as (url, _):
        run = one_turn(url, "hello")
        assert run["reply"] == "hello: made in the serving loop=True"
    effects = tmp_path / "effects.txt"
    if name != "make_agent":  # what follows the yield runs at shutdown
        assert effects.read_text().splitlines() == ["started", "stopped"]


def test_an_async_target_that_fails_at_start_up_exits_2_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        command(f"{HERE / 'served_async.py'}:broken", free_port()),
        env={**os.environ, "EVALPORT_TOKEN": TOKEN},
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "broken failed at start-up: ConnectionError: no database at db:5432" in done.stderr


def test_a_target_that_is_no_agent_is_named_in_one_short_line(tmp_path: Path) -> None:
    done = subprocess.run(
        command(f"{HERE / 'served_async.py'}:huge", free_port()),
        env={**os.environ, "EVALPORT_TOKEN": TOKEN},
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 2
    assert "xxxxxxxxxx" not in done.stderr and len(done.stderr) < 400, done.stderr
    assert "Huge object is not an agent" in done.stderr


def test_the_docs_async_resources_example_is_served(tmp_path: Path) -> None:
    blocks = section_blocks("server", "python")
    (block,) = [b for b in blocks if b.startswith("# app.py: evalport serve app.py:agent")]
    app = tmp_path / "app.py"
    app.write_text(block)
    with serving(f"{app}:agent", tmp_path) as (url, _):
        run = one_turn(url, "hello")
    assert run["reply"] == "hello (orders at https://orders.example)"


def test_serve_recognises_framework_agents_without_importing_any_framework() -> None:
    code = (
        "import sys\n"
        "from evalport.server import _cli\n"
        "from evalport.server._served import as_agent\n"
        "async def agent(message, history, ctx): return message\n"
        "assert as_agent(agent, say=print) is agent\n"
        "assert not {'pydantic_ai', 'agents', 'langgraph'} & set(sys.modules), sorted(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
