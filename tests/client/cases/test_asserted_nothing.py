"""A case that checked nothing is an error, never a pass (a green run means something was
checked); an assertion, a judge or a plain ``assert`` each count as a check."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from evalport.client import EvalContext, Verdict, cases_from, eval_case, run_trial
from evalport.client.judges import FakeJudge
from evalport.protocol._cli import main
from fake_target import FakeTarget, shop_agent

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def target():
    fake = FakeTarget(shop_agent)
    yield fake
    await fake.aclose()


def plain(source: str):
    """A case function compiled outside pytest, whose assertion rewriting would otherwise
    change how its ``assert`` statements compile."""
    scope: dict[str, object] = {}
    exec(compile(source, "evals/plain_eval.py", "exec"), scope)
    return scope["case"]


async def test_a_case_that_only_sends_is_an_error_naming_it(target) -> None:
    @eval_case(id="vacuous")
    async def vacuous(ctx: EvalContext) -> None:
        await ctx.send("hello")

    result = await run_trial(cases_from(vacuous)[0], target)
    assert result.verdict == Verdict.ERROR
    assert result.error_type == "AssertedNothing"
    assert result.error is not None and result.error.startswith("vacuous asserted nothing")


@pytest.mark.parametrize(
    "body",
    [
        "    ctx.contains('Hello')\n",  # an assertion method
        "    assert ctx.run.turns == 1\n",  # a plain assert
        "    def helper():\n        assert ctx.run.turns == 1\n    helper()\n",  # nested
        "    if ctx.run.turns != 1:\n        raise AssertionError('one turn')\n",
    ],
)
async def test_an_assertion_or_a_plain_assert_counts_as_a_check(target, body: str) -> None:
    func = plain("async def case(ctx):\n    await ctx.send('hello')\n" + body)
    result = await run_trial(cases_from(eval_case(id="checks")(func))[0], target)
    assert result.verdict == Verdict.PASSED, result.error


async def test_a_judge_alone_counts_as_a_check(target) -> None:
    @eval_case(id="judged", judge=FakeJudge(default=0.9))
    async def judged(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.judge().custom("Does the reply greet the user?")

    result = await run_trial(cases_from(judged)[0], target)
    assert result.verdict == Verdict.PASSED, (result.error, result.assertions)


def test_every_report_names_the_case_that_asserted_nothing(tmp_path: Path, capsys) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "echo_eval.py").write_text(
        "from evalport.client import eval_case\n\n\n"
        "@eval_case('greets')\nasync def greets(ctx):\n    await ctx.send('hello')\n"
    )
    out = tmp_path / "run"
    agent = f"{ROOT / 'examples' / 'support_agent.py'}:agent"
    reports = ["--junit", str(tmp_path / "junit.xml"), "--html", str(tmp_path / "report.html")]
    reports += ["--md", str(tmp_path / "summary.md")]
    code = main(["run", str(tmp_path / "evals"), "--local", agent, "--out", str(out), *reports])
    assert code == 1
    assert "asserted nothing" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert "asserted nothing" in json.dumps(summary)
    case = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase")
    assert case is not None and "asserted nothing" in ET.tostring(case, encoding="unicode")
    assert "asserted nothing" in (tmp_path / "report.html").read_text()
    assert "asserted nothing" in (tmp_path / "summary.md").read_text()
