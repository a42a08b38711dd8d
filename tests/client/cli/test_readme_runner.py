"""The documentation's runner section: every example in it runs (or, for CI files, parses)."""

import argparse
import asyncio
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from evalport.client import LocalTarget, Runner, RunOptions, discover
from evalport.client._core._config import load_settings
from evalport.client.cli import _run as run_command
from evalport.client.reports import load_reporter
from evalport.protocol._cli import main
from support.docs import docs_text

ROOT = Path(__file__).resolve().parents[3]
AGENT = ROOT / "examples" / "support_agent.py"


def blocks() -> list[tuple[str, str]]:
    text = docs_text()
    start = text.index("<!-- section:runner -->")
    end = text.index("<!-- /section:runner -->")
    return re.findall(r"```(\w+)\n(.*?)```", text[start:end], re.S)


def block(language: str, first_line: str | None = None) -> str:
    for lang, body in blocks():
        if lang == language and (first_line is None or body.startswith(first_line)):
            return body
    raise AssertionError(f"no {language} block starting with {first_line!r}")


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalport run", exit_on_error=False)
    run_command.add_arguments(parser)
    return parser


def test_quick_start_suite_runs_as_documented(tmp_path, monkeypatch, capsys):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "support_eval.py").write_text(block("python", "# evals/support_eval.py"))
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    commands = block("bash").replace("\\\n", " ").strip().splitlines()
    local = shlex.split(commands[0])
    assert local[:2] == ["evalport", "run"]
    assert main(local[1:]) == 0
    output = capsys.readouterr().out
    assert "2 passed, 0 failed, 0 error, 0 skipped, 0 scored" in output
    remote = shlex.split(commands[1].split(" ", 1)[1])  # after the EVALPORT_TOKEN=... prefix
    args = run_parser().parse_args(remote[2:])
    assert (args.repeat, args.pass_rate, args.junit, args.html) == (
        5,
        0.8,
        "junit.xml",
        "report.html",
    )


def test_configuration_and_custom_reporter(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(block("toml"))
    (tmp_path / "my_reporters.py").write_text(block("python", "# my_reporters.py"))
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "support_eval.py").write_text(block("python", "# evals/support_eval.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_reporters", raising=False)  # restored afterwards
    settings = load_settings(tmp_path)
    assert (settings.repeat, settings.pass_rate, settings.concurrency) == (5, 0.8, 16)
    assert settings.exclude_tags == ["slow"] and settings.judge.model == "gpt-4o-mini"
    reporter = load_reporter(settings.reporters[0])
    cases, errors = discover(settings.path)
    assert errors == []
    runner = Runner(LocalTarget(_agent()), RunOptions(repeat=2), reporters=[reporter])
    asyncio.run(runner.run(cases))
    assert reporter.message == "#evals: 2 passed, 0 failed"
    assert runner.reporters.errors == []


def _agent():
    sys.path.insert(0, str(AGENT.parent))
    from support_agent import agent

    return agent


def test_pytest_example_runs_with_the_plugin(tmp_path):
    (tmp_path / "test_agent.py").write_text(block("python", "# test_agent.py"))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--evalport-local",
            f"{AGENT}:agent",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert "2 passed" in done.stdout, done.stdout + done.stderr


def test_github_actions_example_parses_and_its_command_is_valid():
    workflow = yaml.safe_load(block("yaml"))
    steps = workflow["jobs"]["evals"]["steps"]
    command = next(step["run"] for step in steps if "evalport run" in step.get("run", ""))
    words = shlex.split(command)
    assert words[:2] == ["evalport", "run"]
    args = run_parser().parse_args(words[2:])
    assert args.md == "$GITHUB_STEP_SUMMARY" and args.junit == "junit.xml" and args.cache
    assert any(step.get("with", {}).get("path") == ".evalport/cache" for step in steps)
