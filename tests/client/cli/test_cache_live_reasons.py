"""``--cache`` never changes a verdict silently: a trial that asserts turn timings (which
no recording holds) runs live, and an unversioned HTTP agent without declared
dependencies gets a warning that a changed agent would not be noticed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evalport.protocol._cli import main
from evalport.server import EvalAdapter
from support.servers import running_server

AGENT = """\
async def agent(message):
    yield "It is 18°C "
    yield "in Paris."
"""

SUITE = """\
from evalport.client import eval_case


@eval_case("first token")
async def first_token(ctx):
    await ctx.send("weather in Paris?")
    ctx.first_token_within(30.0)


@eval_case("reply")
async def reply(ctx):
    await ctx.send("weather in Paris?")
    ctx.contains("18°C")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "weather_eval.py").write_text(SUITE)
    (tmp_path / "weather_agent.py").write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(project: Path, capsys: pytest.CaptureFixture[str], *target: str) -> tuple[int, str, str]:
    code = main(["run", "evals", *target, "--cache", "-v", "--json", "out.json"])
    captured = capsys.readouterr()
    summary = json.loads((project / "out.json").read_text())
    verdicts = {case["description"]: case["verdict"] for case in summary["cases"]}
    assert verdicts == {"first token": "passed", "reply": "passed"}, captured
    return code, captured.out, captured.err


def test_a_trial_asserting_turn_timings_runs_live_and_says_why(project, capsys) -> None:
    local = ("--local", f"{project / 'weather_agent.py'}:agent")
    code, out, _ = run(project, capsys, *local)
    assert code == 0 and "run cache: 0 of 2 trials replayed" in out
    code, out, _ = run(project, capsys, *local)
    assert code == 0 and "run cache: 1 of 2 trials replayed" in out
    assert "weather_eval::first_token [trial 0]: it asserts turn timings" in out


def test_an_unversioned_http_agent_gets_a_warning_that_changes_go_unnoticed(
    project, capsys
) -> None:
    async def agent(message: str) -> str:
        return "It is 18°C in Paris."

    with running_server(EvalAdapter(agent, token=None).app()) as url:
        code, _, err = run(project, capsys, "--target", url)
    assert code == 0
    assert "warning" in err and "version" in err and "cache-dependencies" in err

    with running_server(EvalAdapter(agent, token=None, version="2.1").app()) as url:
        code, _, err = run(project, capsys, "--target", url)
    assert "cache-dependencies" not in err
