"""A failed assertion names the file and line of the eval code that made it, in every
report (console, summary.json, JUnit, HTML, Markdown), as an exception in eval code does;
a passed one keeps its location in the results without showing it."""

from __future__ import annotations

import inspect
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from evalport.client import EvalContext, SyncEvalContext, Verdict, cases_from, eval_case, run_trial
from evalport.client.judges import FakeJudge
from evalport.protocol._cli import main
from fake_target import FakeTarget, shop_agent

ROOT = Path(__file__).resolve().parents[3]
HERE = os.path.relpath(__file__)

EVAL = """\
from evalport.client import eval_case


@eval_case("status")
async def status(ctx):
    await ctx.send("where is order A1049?")
    ctx.contains("A1049")
    ctx.contains("teleported")
"""


@pytest.fixture
async def target():
    fake = FakeTarget(shop_agent)
    yield fake
    await fake.aclose()


def test_every_report_names_the_failed_assertion_file_and_line(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "status_eval.py").write_text(EVAL)
    lines = EVAL.splitlines()
    failing = lines.index('    ctx.contains("teleported")') + 1
    where = f"evals/status_eval.py:{failing}"
    agent = f"{ROOT / 'examples' / 'support_agent.py'}:agent"
    reports = ["--junit", "junit.xml", "--html", "report.html", "--md", "summary.md"]
    code = main(["run", "evals", "--local", agent, "--out", "run", *reports])
    assert code == 1
    console = capsys.readouterr().out
    assert f"(at {where})" in console
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    [failure] = summary["cases"][0]["failures"]
    assert failure.endswith(f"(at {where})")
    case = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase")
    assert case is not None and where in ET.tostring(case, encoding="unicode")
    assert where in (tmp_path / "report.html").read_text()
    assert where in (tmp_path / "summary.md").read_text()
    # The passing assertion keeps its own line in the results, shown nowhere.
    assert f"evals/status_eval.py:{failing - 1}" not in console


async def test_each_kind_of_check_records_the_line_that_made_it(target) -> None:
    marks: list[int] = []

    @eval_case(id="kinds", judge=FakeJudge(default=0.2))
    async def kinds(ctx: EvalContext) -> None:
        await ctx.send("where is order A1049?")
        marks.append(_line())
        ctx.contains("teleported")  # an assertion method
        ctx.check("by hand", False, "a plain check")  # Instructor's form
        ctx.judge().custom("Is it right?")  # a judge expectation, resolved later
        ctx.require(False, "a requirement")

    result = await run_trial(cases_from(kinds)[0], target)
    assert result.verdict == Verdict.FAILED
    locations = [check.location for check in result.assertions]
    assert locations == [f"{HERE}:{marks[0] + offset}" for offset in (1, 2, 3, 4)]


async def test_a_sync_case_records_its_lines_too(target) -> None:
    @eval_case(id="sync")
    def sync(ctx: SyncEvalContext) -> None:
        ctx.send("where is order A1049?")
        ctx.contains("teleported")

    result = await run_trial(cases_from(sync)[0], target)
    [check] = result.assertions
    assert not check.passed and check.location is not None
    assert check.location.startswith(f"{HERE}:")


def _line() -> int:
    """The line number of the caller's call."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno
