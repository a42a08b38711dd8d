"""``evalport run`` with the judge configured in ``[tool.evalport.judge]``: judged
assertions run against an OpenAI-compatible server (the judges' fake chat server on
loopback), and the reports keep judge scores, tokens and model apart from the target's."""

import json
import sys
import textwrap
from pathlib import Path

import pytest
from evalport.protocol._cli import main
from support.servers import running_server

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "client" / "judges"))
from judge_fake_server import FakeChatServer, verdict  # noqa: E402

AGENT = f"{ROOT / 'examples' / 'support_agent.py'}:agent"

SUITE = """
from evalport.client._core._cases import eval_case


@eval_case("the greeting is helpful", tags=["judged"])
async def helpful_greeting(ctx):
    await ctx.send("hello")
    ctx.contains("Hi!")
    ctx.judge().helpfulness()
"""


@pytest.mark.e2e
def test_judge_from_configuration(tmp_path, monkeypatch, capsys):
    chat = FakeChatServer()
    chat.reset(verdict(0.9, "clear offer of help"), verdict(0.7, "a bit terse"))
    with running_server(chat.app) as url:
        (tmp_path / "evals").mkdir()
        (tmp_path / "evals" / "greeting_eval.py").write_text(textwrap.dedent(SUITE))
        (tmp_path / "pyproject.toml").write_text(
            f'[tool.evalport]\nlocal = "{AGENT}"\n\n'
            f'[tool.evalport.judge]\nmodel = "fake-judge"\nbase-url = "{url}/v1"\n'
            'api-key-env = "FAKE_JUDGE_KEY"\n'
        )
        monkeypatch.setenv("FAKE_JUDGE_KEY", "judge-key-0123456789")
        monkeypatch.chdir(tmp_path)
        code = main(["run", "evals", "--repeat", "2", "--json", "r.json", "--out", "run"])
    assert code == 0, capsys.readouterr()
    assert len(chat.requests) == 2  # one judge call per trial, no more
    assert chat.headers[0]["authorization"] == "Bearer judge-key-0123456789"
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["provenance"]["judge_model"] == "fake-judge"
    case = summary["cases"][0]
    assert case["judge_mean"] == pytest.approx(0.8) and case["judge_std"] == pytest.approx(0.1)
    assert case["judge_tokens"] == 2 * (11 + 7)
    assert case["target_tokens"] == 2 * (44 + 18)  # the agent's estimate: one step a trial
    assert summary["judge_tokens"] == 36
    judges = json.loads(next((tmp_path / "run" / "cases").glob("*/judges.json")).read_text())
    # The two trials run concurrently: either may take the fake judge's first verdict.
    verdicts = sorted(
        (record["judges"][0]["score"], record["judges"][0]["reason"]) for record in judges
    )
    assert verdicts == [(0.7, "a bit terse"), (0.9, "clear offer of help")]
