"""The project's own code in a run (issue 40 items 5, 6, 12; issue 38 item 11).

A bootstrap module imported once before discovery (Neuron's ``--autoload-file``), the
project folder importable from eval files, a factory hook that builds evaluators and
reporters with dependencies (Neuron's resolver), and ``[tool.evalport]`` keys that name
modules or files resolved against the pyproject.toml that holds them, wherever
``evalport run`` starts.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from evalport.protocol._cli import main

AGENT = """
async def agent(message, history, ctx):
    return f"echo: {message}"
"""

STATE = "booted = 0\n"

BOOT = """
import project_state

project_state.booted += 1
"""

EVALS = """
import project_state
from evalport.client import Evaluator, eval_case

BOOTED_BEFORE_DISCOVERY = project_state.booted


@eval_case
async def echoes(ctx):
    await ctx.send("hello")
    ctx.contains("echo: hello")
    ctx.check("bootstrap ran once, before discovery", BOOTED_BEFORE_DISCOVERY == 1)


class Greeter(Evaluator):
    def __init__(self, greeting):
        self.greeting = greeting

    def dataset(self):
        return [{"message": "hi"}]

    async def run(self, item):
        return (await self.ctx.send(item["message"])).reply

    def evaluate(self, output, item):
        self.check(self.ctx_contains(output))

    def ctx_contains(self, output):
        from evalport.client.assertions import Contains

        return Contains(self.greeting)
"""

REPORTERS = """
import json


class Recorder:
    def __init__(self, path):
        self.path = path

    def finish(self, report):
        with open(self.path, "w") as file:
            json.dump({"passed": report.summary.counts["passed"]}, file)
"""

CONTAINER = """
from pathlib import Path

from project_reporters import Recorder


def build(cls):
    if cls is Recorder:
        return Recorder(str(Path(__file__).parent / "recorded.json"))
    return cls(greeting="echo: hi")
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "project"
    (root / "evals").mkdir(parents=True)
    (root / "agents").mkdir()
    (root / "agents" / "echo_agent.py").write_text(AGENT)
    (root / "project_state.py").write_text(STATE)
    (root / "boot.py").write_text(BOOT)
    (root / "project_reporters.py").write_text(textwrap.dedent(REPORTERS))
    (root / "container.py").write_text(textwrap.dedent(CONTAINER))
    (root / "evals" / "ported_eval.py").write_text(textwrap.dedent(EVALS))
    (root / "pyproject.toml").write_text(
        "[tool.evalport]\n"
        'path = "evals"\n'
        'local = "agents/echo_agent.py:agent"\n'
        'bootstrap = "boot"\n'
        'factory = "container:build"\n'
        'reporters = ["project_reporters:Recorder"]\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("project_state", "boot", "project_reporters", "container"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return root


def test_keys_naming_code_resolve_against_their_pyproject(project, capsys) -> None:
    code = main(["run", "--config", str(project / "pyproject.toml"), "--out", "run"])
    output = capsys.readouterr()
    assert code == 0, output.out + output.err
    assert "2 passed" in output.out
    assert json.loads((project / "recorded.json").read_text()) == {"passed": 2}


def test_path_option_is_the_seed_spelling_of_the_positional_path(project, capsys) -> None:
    evals = str(project / "evals")
    code = main(["run", "--path", evals, "--out", "run", "--list"])
    assert code == 0, capsys.readouterr().err
    assert "ported_eval::echoes" in capsys.readouterr().out


def test_a_constructor_that_needs_arguments_names_the_factory(project, capsys) -> None:
    text = (project / "pyproject.toml").read_text().replace('factory = "container:build"\n', "")
    text = text.replace('reporters = ["project_reporters:Recorder"]\n', "")
    (project / "pyproject.toml").write_text(text)
    code = main(["run", "--config", str(project / "pyproject.toml"), "--out", "run"])
    output = capsys.readouterr()
    assert code == 1
    shown = output.out + output.err
    assert "Greeter() needs arguments (greeting)" in shown and 'factory = "module:build"' in shown
    (load_error,) = [line for line in shown.splitlines() if "LOAD ERROR" in line]
    assert "LOAD ERROR evals/ported_eval.py: TypeError" in load_error, load_error


def test_a_bootstrap_that_fails_is_a_configuration_error(project, capsys) -> None:
    (project / "boot.py").write_text("raise RuntimeError('no .env here')\n")
    code = main(["run", "--config", str(project / "pyproject.toml"), "--out", "run"])
    err = capsys.readouterr().err
    assert code == 2
    assert "bootstrap 'boot'" in err and "RuntimeError: no .env here" in err


def test_a_path_given_as_an_option_stays_relative_to_the_working_directory(
    project, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(project)
    assert Path("agents/echo_agent.py").is_file()
    code = main(["run", "evals", "--local", "agents/echo_agent.py:agent", "--list"])
    assert code == 0, capsys.readouterr().err


def test_pytest_started_in_a_subfolder_resolves_local_against_the_pyproject(
    tmp_path: Path,
) -> None:
    import subprocess

    root = tmp_path / "project"
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "echo_agent.py").write_text(AGENT)
    (root / "pyproject.toml").write_text(
        "[tool.evalport]\n"
        'local = "agents/echo_agent.py:agent"\n'
        "[tool.pytest.ini_options]\n"
        'asyncio_mode = "auto"\n'
        'asyncio_default_fixture_loop_scope = "function"\n'
    )
    (root / "tests").mkdir()
    (root / "tests" / "test_echo.py").write_text(
        "async def test_echo(evalport):\n"
        '    await evalport.send("hello")\n'
        '    evalport.contains("echo: hello")\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_echo.py"],
        cwd=root / "tests",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_bootstrap_option_names_a_module_of_the_folder_run_in(project, monkeypatch, capsys):
    (project / "pyproject.toml").write_text("[project]\nname = 'ported'\n")  # no settings
    evals = project / "evals" / "ported_eval.py"
    evals.write_text(evals.read_text().split("class Greeter")[0])  # no factory here
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", ".")])
    code = main(["run", "evals", "--bootstrap", "boot", "--local", "agents/echo_agent.py:agent"])
    output = capsys.readouterr()
    assert code == 0, output.out + output.err
    assert "1 passed" in output.out
