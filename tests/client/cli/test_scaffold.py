"""``evalport init`` and ``evalport new case`` through the command dispatcher, in empty
project folders: what they write parses, is read by evalport's own config loader and runs
green with ``evalport run``; anything that exists is refused and nothing is written."""

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from evalport.client._core._config import load_settings
from evalport.protocol._cli import main
from support.docs import DOCS, blocks
from support.servers import free_port
from support.surface import command_parsers

ROOT = Path(__file__).resolve().parents[3]
AGENT = f"{ROOT / 'examples' / 'support_agent.py'}:agent"
EVALPORT = str(Path(sys.executable).parent / "evalport")

TINY_AGENT = """
def agent(message, history, ctx):
    return f"You said: {message}"
"""

WRITTEN = ("evals/example_eval.py", "pyproject.toml", ".github/workflows/evals.yml")
IGNORED = "added .evalport/ to .gitignore"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def counts(path: Path) -> dict:
    return json.loads(path.read_text())["counts"]


def workflow_commands(path: Path) -> list[str]:
    document = yaml.safe_load(path.read_text())
    (job,) = document["jobs"].values()
    return [str(step["run"]).strip() for step in job["steps"] if "run" in step]


def test_init_writes_a_project_that_runs_green_against_the_agent(project, capsys):
    assert main(["init", "--agent", AGENT]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [f"wrote {name}" for name in WRITTEN]
    # the section parses and evalport's config loader reads it
    assert tomllib.loads((project / "pyproject.toml").read_text())["tool"]["evalport"]
    settings = load_settings(project)
    assert Path(settings.path or "") == project / "evals"
    assert settings.local == AGENT
    assert settings.token_env == "EVALPORT_TOKEN"
    # `evalport run` with no arguments takes the folder and the agent from the section
    assert main(["run", "--json", "results.json"]) == 0
    assert counts(project / "results.json")["passed"] == 1
    assert "PASS   example_eval::example (1/1)" in capsys.readouterr().out


def test_the_workflow_serves_the_agent_checks_it_and_runs_the_evals(project):
    assert main(["init", "--agent", "my_agent/app.py:agent"]) == 0
    commands = workflow_commands(project / ".github" / "workflows" / "evals.yml")
    evalport = [command for command in commands if command.startswith("evalport ")]
    assert [shlex.split(c)[1] for c in evalport] == ["serve", "check", "run"]
    serve, check, run = evalport
    assert serve == "evalport serve my_agent/app.py:agent --port 8765 &"
    assert "http://127.0.0.1:8765" in check and "--target http://127.0.0.1:8765" in run
    assert shlex.split(run)[2] == "evals"
    parsers = command_parsers()
    for command in evalport:  # every option exists (argparse fails the test otherwise)
        words = shlex.split(command.rstrip("&"))
        parsers[words[1]].parse_args(words[2:])
    assert any(c.startswith("pip install 'evalport[server,client]'") for c in commands)
    assert any("/health" in c for c in commands), "it waits for the server before checking"


def test_the_default_placeholder_runs_green_once_the_agent_exists(project):
    """The real console script, in a fresh process: init, then a tiny agent.py, then run."""
    env = {**os.environ, "PYTHONPATH": str(project)}
    env.pop("EVALPORT_TOKEN", None)
    done = subprocess.run(
        [EVALPORT, "init"], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "agent.py:agent" in done.stdout
    assert load_settings(project).local == "agent.py:agent"
    (project / "agent.py").write_text(TINY_AGENT)
    done = subprocess.run(
        [EVALPORT, "run", "--json", "results.json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts(project / "results.json") == {**counts(project / "results.json"), "passed": 1}


def test_init_appends_the_section_to_an_existing_pyproject(project):
    original = '[project]\nname = "shop"\nversion = "1.0"\n\n[tool.ruff]\nline-length = 100'
    (project / "pyproject.toml").write_text(original)
    assert main(["init", "--agent", AGENT]) == 0
    text = (project / "pyproject.toml").read_text()
    assert text.startswith(original + "\n")
    document = tomllib.loads(text)
    assert document["project"]["name"] == "shop"
    assert document["tool"]["ruff"] == {"line-length": 100}
    assert load_settings(project).local == AGENT
    assert main(["run"]) == 0


def test_init_refuses_to_overwrite_and_writes_nothing(project, capsys):
    assert main(["init", "--agent", AGENT]) == 0
    (project / "evals" / "example_eval.py").write_text("# mine\n")
    before = {name: (project / name).read_text() for name in WRITTEN}
    capsys.readouterr()
    assert main(["init"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        "evalport init: evals/example_eval.py exists: move it away, or pass --force to "
        "overwrite it",
        "evalport init: .github/workflows/evals.yml exists: move it away, or pass --force to "
        "overwrite it",
        "evalport init: pyproject.toml has a [tool.evalport] section already: edit it by "
        "hand, or pass --force to keep it and write the other files",
        "evalport init: nothing was written",
    ]
    assert {name: (project / name).read_text() for name in WRITTEN} == before


def test_one_existing_file_stops_every_write(project, capsys):
    workflow = project / ".github" / "workflows" / "evals.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("name: ours\n")
    assert main(["init"]) == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[0]
        .startswith("evalport init: .github/workflows/evals.yml exists")
    )
    assert not (project / "evals").exists() and not (project / "pyproject.toml").exists()
    assert workflow.read_text() == "name: ours\n"


def test_force_overwrites_the_files_but_keeps_an_existing_section(project, capsys):
    section = '[tool.evalport]\npath = "suite"\nrepeat = 3\n'
    (project / "pyproject.toml").write_text(section)
    (project / "evals").mkdir()
    (project / "evals" / "example_eval.py").write_text("# old\n")
    assert main(["init", "--force"]) == 0
    assert "kept pyproject.toml's [tool.evalport] as it is" in capsys.readouterr().out
    assert (project / "pyproject.toml").read_text() == section
    assert "async def example(ctx)" in (project / "evals" / "example_eval.py").read_text()
    assert (project / ".github" / "workflows" / "evals.yml").is_file()


@pytest.mark.parametrize(
    "content", ["[tool.evalport\npath = 1\n", "tool = { ruff = { line-length = 100 } }\n"]
)
def test_a_pyproject_it_cannot_extend_is_named_and_left_alone(project, capsys, content):
    (project / "pyproject.toml").write_text(content)
    assert main(["init"]) == 2
    error = capsys.readouterr().err
    assert f"{project / 'pyproject.toml'}:" in error and "nothing was written" in error
    assert (project / "pyproject.toml").read_text() == content
    assert not (project / "evals").exists()


def test_new_case_writes_an_eval_that_fails_until_edited(project, capsys):
    assert main(["new", "case", "refund_flow", "--description", "refunds a small order"]) == 0
    assert capsys.readouterr().out == "wrote evals/refund_flow_eval.py\n"
    path = project / "evals" / "refund_flow_eval.py"
    source = path.read_text()
    compile(source, str(path), "exec")
    assert "async def refund_flow(ctx):" in source
    assert '@eval_case("refunds a small order"' in source
    # a new case passes for no agent until its check is written (issue 38)
    assert main(["run", "evals", "--local", AGENT, "--json", "results.json"]) == 1
    assert counts(project / "results.json")["failed"] == 1
    assert "lacks 'EDIT ME: what the reply must say'" in capsys.readouterr().out


def test_new_case_refuses_to_overwrite(project, capsys):
    assert main(["new", "case", "refund_flow"]) == 0
    path = project / "evals" / "refund_flow_eval.py"
    path.write_text("# mine\n")
    capsys.readouterr()
    assert main(["new", "case", "refund_flow"]) == 2
    assert capsys.readouterr().err == (
        "evalport new: evals/refund_flow_eval.py exists: choose another NAME, "
        "or pass --force to overwrite it\n"
    )
    assert path.read_text() == "# mine\n"
    assert main(["new", "case", "refund_flow", "--force"]) == 0
    assert "async def refund_flow" in path.read_text()


@pytest.mark.parametrize("name", ["1st", "refund-flow", "class", "../escape", "", "café"])
def test_new_case_refuses_a_name_that_is_no_identifier(project, capsys, name):
    assert main(["new", "case", name]) == 2
    assert "is not a valid case name" in capsys.readouterr().err
    assert list(project.iterdir()) == []


def test_new_case_goes_into_the_configured_folder_or_dir(project, capsys):
    (project / "pyproject.toml").write_text('[tool.evalport]\npath = "suite"\n')
    (project / "src").mkdir()
    os.chdir(project / "src")  # the section's path is relative to pyproject.toml
    assert main(["new", "case", "search"]) == 0
    assert (project / "suite" / "search_eval.py").is_file()
    written = (project / "suite" / "search_eval.py").read_text()
    assert str(project) not in written  # no path of this machine in a file one commits
    assert "evalport run suite " in written
    os.chdir(project)
    assert main(["new", "case", "checkout_eval", "--dir", "more"]) == 0
    assert (project / "more" / "checkout_eval.py").is_file()  # _eval is not doubled


def test_new_needs_a_kind(project, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["new", "refund_flow"])
    assert exit_.value.code == 2
    assert "invalid choice: 'refund_flow'" in capsys.readouterr().err


def test_the_docs_show_the_workflow_init_writes(project):
    assert main(["init"]) == 0
    written = (project / ".github" / "workflows" / "evals.yml").read_text()
    shown = [code for language, code in blocks((DOCS / "ci.md").read_text()) if language == "yaml"]
    assert written in shown, "docs/ci.md shows another workflow than evalport init writes"


@pytest.mark.e2e
def test_the_workflow_steps_run_for_real_against_a_served_agent(project):
    """The job's shell steps (all but pip install) in one bash, on a free port: the real
    `evalport serve` in the background, the wait, `evalport check`, `evalport run`."""
    assert main(["init"]) == 0
    (project / "agent.py").write_text(TINY_AGENT)
    path = project / ".github" / "workflows" / "evals.yml"
    (job,) = yaml.safe_load(path.read_text())["jobs"].values()
    steps = [c for c in workflow_commands(path) if not c.startswith("pip install")]
    port = str(free_port())
    script = ["set -e"]
    for command in steps:
        command = command.replace("8765", port)
        if command.endswith("&"):
            script += [command, "SERVER=$!", "trap 'kill $SERVER' EXIT"]
        else:
            script.append(command)
    env = {
        **os.environ,
        **job["env"],
        "PATH": f"{Path(EVALPORT).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(project),
        "GITHUB_STEP_SUMMARY": str(project / "summary.md"),
    }
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS   example_eval::example (1/1)" in done.stdout
    assert (project / "junit.xml").is_file() and (project / "summary.md").is_file()


@pytest.mark.parametrize("agent", ["agent.py", 'a".py:agent', "my agent.py:agent", "x.py:1st"])
def test_init_refuses_an_agent_it_cannot_write(project, capsys, agent):
    assert main(["init", "--agent", agent]) == 2
    assert "is not module:attr or path.py:attr" in capsys.readouterr().err
    assert list(project.iterdir()) == []


def test_init_keeps_the_run_folder_out_of_git_once(project, capsys):
    (project / ".gitignore").write_text("__pycache__/")
    assert main(["init", "--agent", AGENT]) == 0
    assert IGNORED in capsys.readouterr().out
    assert (project / ".gitignore").read_text() == "__pycache__/\n.evalport/\n"
    assert main(["init", "--agent", AGENT, "--force"]) == 0
    assert IGNORED not in capsys.readouterr().out  # there already
    assert (project / ".gitignore").read_text().count(".evalport") == 1
