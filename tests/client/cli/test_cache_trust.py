"""A run cache you can trust (issue 15, item 11), through ``evalport run --cache``.

Recordings are keyed by the agent's identity (for a local agent, a fingerprint of its
source files) and by the files ``cache-dependencies`` declares; a changed agent or a
changed dependency records again instead of replaying a stale run. The console says how
many trials were replayed and, with ``-v``, why a recording was not reused.
"""

import json
import textwrap

import pytest
from evalport.protocol._cli import main

AGENT = """\
from evalport.protocol.runtime import TurnContext

ANSWER = "It is 18°C in Paris."


async def agent(message: str, history: list, ctx: TurnContext) -> str:
    with open(__file__.replace("weather_agent.py", "data/forecast.txt")) as file:
        return file.read().strip() if message == "forecast?" else ANSWER
"""

SUITE = """\
from evalport.client import eval_case


@eval_case("weather")
async def weather(ctx):
    await ctx.send("weather in Paris?")
    ctx.contains("18°C")


@eval_case("forecast")
async def forecast(ctx):
    await ctx.send("forecast?")
    ctx.contains("sunny")
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "evals").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "evals" / "weather_eval.py").write_text(SUITE)
    (tmp_path / "weather_agent.py").write_text(AGENT)
    (tmp_path / "data" / "forecast.txt").write_text("sunny\n")
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [tool.evalport]
            path = "evals"
            local = "{tmp_path / "weather_agent.py"}:agent"
            cache = true
            cache-dependencies = ["data/**/*.txt"]
            """
        )
    )
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    monkeypatch.chdir(sub)  # globs are relative to the pyproject, not the working directory
    return tmp_path


def run(project, capsys, *extra):
    code = main(["run", "--config", str(project / "pyproject.toml"), "--json", "out.json", *extra])
    out = capsys.readouterr().out
    summary = json.loads((project / "elsewhere" / "out.json").read_text())
    verdicts = {case["description"]: case["verdict"] for case in summary["cases"]}
    return code, out, verdicts


def test_replays_until_the_agent_or_a_dependency_changes(project, capsys):
    code, out, _ = run(project, capsys)
    assert code == 0 and "run cache: 0 of 2 trials replayed" in out
    code, out, _ = run(project, capsys, "-v")
    assert code == 0 and "run cache: 2 of 2 trials replayed" in out
    assert "not replayed" not in out

    # The agent's code changes: its recordings are stale, and the suite sees the change.
    agent = project / "weather_agent.py"
    agent.write_text(agent.read_text().replace("18°C", "19°C"))
    code, out, verdicts = run(project, capsys, "-v")
    assert code == 1 and verdicts == {"weather": "failed", "forecast": "passed"}
    assert "run cache: 0 of 2 trials replayed" in out
    assert "not replayed: weather_eval::weather [trial 0]: the agent's source files changed" in out
    code, out, _ = run(project, capsys)
    assert "run cache: 2 of 2 trials replayed" in out

    # A declared dependency changes: every recording made against it records again.
    (project / "data" / "forecast.txt").write_text("rain\n")
    code, out, verdicts = run(project, capsys)
    assert verdicts == {"weather": "failed", "forecast": "failed"}
    assert "run cache: 0 of 2 trials replayed (-v says why the others were not)" in out
    (project / "data" / "more").mkdir()
    (project / "data" / "more" / "extra.txt").write_text("new file\n")
    code, out, _ = run(project, capsys, "-v")
    assert "0 of 2 trials replayed" in out
    assert "a file matched by cache-dependencies changed" in out


def test_fresh_says_so_with_verbose(project, capsys):
    run(project, capsys)
    _code, out, _ = run(project, capsys, "--fresh", "-v")
    assert "run cache: 0 of 2 trials replayed" in out
    assert "[trial 0]: --fresh: recordings are not read" in out


def test_cache_dependencies_must_be_a_list_of_globs(project, capsys):
    (project / "pyproject.toml").write_text('[tool.evalport]\ncache-dependencies = "data/*"\n')
    assert main(["run", "--config", str(project / "pyproject.toml")]) == 2
    err = capsys.readouterr().err
    assert "cache-dependencies" in err and "pyproject.toml" in err
