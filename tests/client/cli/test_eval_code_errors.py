"""Mistakes in eval code say where they are (issue 15, items 4 and 5).

A suite with four common mistakes runs through ``evalport run --local`` against the example
agent: an exception in the case, a misspelt context method, a ``ctx.send`` that was never
awaited, an assertion before anything was sent. Each trial is an ``error`` whose message
names the file, the line and the source line, in the console, the JSON summary, the run
folder's trial JSON (with the traceback), the JUnit XML and the HTML report.
"""

import json
import textwrap
import xml.etree.ElementTree as ET
from html import escape as html_escape
from pathlib import Path

import pytest
from evalport.protocol._cli import main

AGENT = str(Path(__file__).resolve().parents[3] / "examples" / "support_agent.py") + ":agent"

SUITE = """\
from evalport.client import eval_case


@eval_case("a bug in the eval")
async def key_error(ctx):
    await ctx.send("where is order A1049?")
    row = {"order": "A1049"}
    ctx.contains(row["my bug"])


@eval_case("a misspelt method")
async def misspelt(ctx):
    await ctx.send("where is order A1049?")
    ctx.contain("shipped")


@eval_case("a send never awaited")
async def unawaited(ctx):
    ctx.send("where is order A1049?")
    ctx.contains("shipped")


@eval_case("a send never awaited, nothing after")
async def unawaited_last(ctx):
    await ctx.send("hello")
    ctx.send("where is order A1049?")


@eval_case("asserts before sending")
async def too_early(ctx):
    ctx.contains("shipped")
    await ctx.send("where is order A1049?")


@eval_case("a sync case asserts before sending")
def sync_too_early(ctx):
    ctx.contains("shipped")
"""

# case id -> (line of the statement, its source, words the message must hold)
EXPECTED = {
    "a bug in the eval": (8, 'ctx.contains(row["my bug"])', ["'my bug'"]),
    "a misspelt method": (
        14,
        'ctx.contain("shipped")',
        ["has no attribute 'contain'", "did you mean 'contains'?"],
    ),
    "a send never awaited": (
        20,
        'ctx.contains("shipped")',
        ["ctx.send(...) at evals/buggy_eval.py:19 was never awaited", "await ctx.send"],
    ),
    "a send never awaited, nothing after": (
        None,
        None,
        ["ctx.send(...) at evals/buggy_eval.py:26 was never awaited"],
    ),
    "asserts before sending": (
        31,
        'ctx.contains("shipped")',
        ["nothing was sent", "await ctx.send(message)"],
    ),
    "a sync case asserts before sending": (
        37,
        'ctx.contains("shipped")',
        ["nothing was sent"],
    ),
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "buggy_eval.py").write_text(SUITE)
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.evalport]\npath = "evals"\nlocal = "{AGENT}"\n'
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_each_mistake_is_an_error_that_names_its_line_in_every_report(project, capsys):
    reports = ["--json", "out.json", "--junit", "junit.xml", "--html", "report.html"]
    code = main(["run", *reports, "--out", "run"])
    console = capsys.readouterr().out
    assert code == 1
    summary = json.loads((project / "out.json").read_text())
    cases = {case["description"]: case for case in summary["cases"]}
    folder = [json.loads(p.read_text()) for p in (project / "run" / "cases").glob("*/trial-0.json")]
    trials = {data["caseId"]: data for data in folder}
    junit = ET.parse(project / "junit.xml").getroot()
    junit_text = " ".join(
        (element.get("message") or "") + " " + (element.text or "") for element in junit.iter()
    )
    html = (project / "report.html").read_text()
    assert len(trials) == len(EXPECTED) == len(cases)
    for description, (line, source, words) in EXPECTED.items():
        case = cases[description]
        trial = trials[case["case_id"]]
        assert case["verdict"] == trial["verdict"] == "error", description
        message = case["error"]
        assert trial["error"] == message
        for word in words:
            assert word in message, (description, message)
        if line is not None:
            assert trial["traceback"].startswith("Traceback (most recent call last)")
            assert f"(at evals/buggy_eval.py:{line} in " in message, message
            assert message.endswith(f": {source})"), message
            assert f'evals/buggy_eval.py", line {line}' in trial["traceback"]
        else:  # noticed when the case ended: nothing raised it, so no frames
            assert trial["traceback"].endswith(message)
        assert message in console, description
        assert message in junit_text, description
        assert html_escape(message) in html, description


def test_suggestions_come_only_when_a_name_is_close(project, capsys):
    (project / "evals" / "buggy_eval.py").write_text(
        textwrap.dedent(
            """\
            from evalport.client import eval_case


            @eval_case("far from any name")
            async def far(ctx):
                await ctx.send("hello")
                ctx.zzzqqq()
            """
        )
    )
    assert main(["run", "--json", "out.json"]) == 1
    (case,) = json.loads((project / "out.json").read_text())["cases"]
    message = case["error"]
    assert "has no attribute 'zzzqqq'" in message and "did you mean" not in message
