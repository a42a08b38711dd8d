"""An agent run in the user's own process (``--local``) says what went wrong in full: its
exceptions with their messages, an agent written ``(message, ctx)`` refused at load, an
agent module that raises on import in one line, a turn that returned ``None``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from evalport.protocol._cli import main

CASE = """\
from evalport.client import eval_case


@eval_case("greets")
async def greets(ctx):
    await ctx.send("hi")
    ctx.contains("hello")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "greet_eval.py").write_text(CASE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(project: Path, agent: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    (project / "agent.py").write_text(textwrap.dedent(agent))
    code = main(["run", "evals", "--local", "agent.py:agent", "--out", "out"])
    return code, capsys.readouterr().err


def test_a_local_agent_error_reaches_stderr_in_full(project, capsys) -> None:
    agent = """\
    async def agent(message):
        raise ValueError("the orders table has no column 'sku'")
    """
    code, err = run(project, agent, capsys)
    assert code == 1
    assert "ValueError: the orders table has no column 'sku'" in err
    assert "withheld" not in err


def test_an_agent_taking_message_and_ctx_is_refused_at_load(project, capsys) -> None:
    agent = """\
    async def agent(message, ctx):
        return ctx.state.get("x", "hello")
    """
    code, err = run(project, agent, capsys)
    assert code == 2
    assert "(message, ctx)" in err and "(message, history, ctx)" in err


def test_an_agent_module_that_raises_on_import_is_one_line(project, capsys) -> None:
    agent = """\
    import os

    KEY = os.environ["EVALPORT_TEST_NO_SUCH_KEY"]


    async def agent(message):
        return "hello"
    """
    code, err = run(project, agent, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "agent.py:3" in lines[0] and "KeyError" in lines[0]
    assert "EVALPORT_TEST_NO_SUCH_KEY" in lines[0]


def test_serve_says_the_same_of_an_agent_module_that_raises(project) -> None:
    (project / "agent.py").write_text('raise RuntimeError("no model configured")\n')
    done = subprocess.run(
        [sys.executable, "-m", "evalport.protocol._cli", "serve", "agent.py:agent"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"EVALPORT_TOKEN": "t" * 24, "PATH": ""},
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "agent.py:1" in lines[0] and "RuntimeError: no model configured" in lines[0]


def test_a_turn_that_returned_none_says_so(project, capsys) -> None:
    agent = """\
    async def agent(message):
        reply = "hello"  # and forgot to return it
    """
    code, err = run(project, agent, capsys)
    assert code == 1
    assert "returned None" in err


def test_the_pytest_plugin_says_the_same_of_an_agent_module_that_raises(project) -> None:
    (project / "agent.py").write_text('raise RuntimeError("no model configured")\n')
    (project / "test_evals.py").write_text(
        "async def test_greets(evalport):\n    await evalport.send('hi')\n"
        "    evalport.contains('hello')\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_evals.py",
            "--evalport-local",
            "agent.py:agent",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=project,
    )
    assert done.returncode == 1
    failure = [line for line in done.stdout.splitlines() if "importing agent.py raised" in line]
    assert failure and "agent.py:1" in failure[0], done.stdout
    assert "RuntimeError: no model configured" in failure[0]
