"""Every report's header states the trace policy and names the target as the user gave it."""

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from evalport.client import HttpTarget, LocalTarget, Runner, RunOptions
from evalport.client._core._cases import Case
from evalport.client.reports import (
    ConsoleReporter,
    HtmlReporter,
    JsonReporter,
    JUnitReporter,
    MarkdownReporter,
)
from evalport.protocol import TracePolicy
from evalport.protocol._cli import main

ROOT = Path(__file__).resolve().parents[3]


async def echo(message, history, ctx):
    return f"echo: {message}"


async def echoes(ctx):
    await ctx.send("hi")
    ctx.contains("echo")


ECHOES = Case(id="echo_eval::echoes", func=echoes)


async def run_with_every_report(target, folder: Path) -> str:
    stream = io.StringIO()
    reporters = [
        ConsoleReporter(stream, live=False),
        HtmlReporter(folder / "report.html"),
        JsonReporter(folder / "summary.json"),
        JUnitReporter(folder / "junit.xml"),
        MarkdownReporter(folder / "summary.md"),
    ]
    await Runner(target, RunOptions(), reporters=reporters).run([ECHOES])
    return stream.getvalue()


@pytest.mark.parametrize(
    ("policy", "recorded", "stated"),
    [
        (None, "safe()", "trace policy safe (payloads shown as digests; --trace-policy verbatim"),
        (TracePolicy.verbatim(), "verbatim", "trace policy verbatim (payloads as the agent sent"),
        (
            TracePolicy.safe(allow_tools=["lookup"]),
            "safe(tools=lookup)",
            "trace policy safe(tools=lookup) (payloads shown as digests",
        ),
    ],
)
async def test_every_report_states_the_trace_policy(tmp_path, policy, recorded, stated):
    console = await run_with_every_report(LocalTarget(echo, policy=policy), tmp_path)
    assert stated in console.splitlines()[0]
    assert stated in (tmp_path / "report.html").read_text()
    assert stated in (tmp_path / "summary.md").read_text()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["provenance"]["trace_policy"] == recorded
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["trace_policy"] == recorded


async def test_a_local_target_is_named_as_the_user_gave_it(tmp_path):
    console = await run_with_every_report(
        LocalTarget(echo, location="agents/echo.py:echo"), tmp_path
    )
    assert console.startswith("evalport: 1 cases, 1 trials against agents/echo.py:echo (")
    assert "target agents/echo.py:echo (" in (tmp_path / "report.html").read_text()


def test_run_local_names_the_users_path_and_attr_not_an_adapter_class(tmp_path, capsys):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "echo_eval.py").write_text(
        "from evalport.client._core._cases import eval_case\n\n\n"
        "@eval_case('greets')\nasync def greets(ctx):\n    await ctx.send('hello')\n    ctx.succeeded()\n"
    )
    agent = f"{ROOT / 'examples' / 'support_agent.py'}:agent"
    code = main(
        ["run", str(tmp_path / "evals"), "--local", agent, "-v", "--out", str(tmp_path / "run")]
    )
    assert code == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert f"against {agent} (" in header
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["provenance"]["target"]["location"] == agent


def test_an_http_target_is_named_by_its_url_without_credentials():
    target = HttpTarget("https://user:secret@agents.example.com:8443/evals?token=x")
    assert target.identity.location == "https://agents.example.com:8443/evals/"


def test_every_header_names_the_required_pass_rate_apart_from_the_measured_one():
    """--pass-rate 0.8 is a requirement per case, not the run's result: each header says
    "required pass rate 80%", and the measured rates keep their own words."""
    from evalport.client.reports import html_report, markdown_summary
    from evalport.client.reports._view import run_page
    from report_data import sample_report

    report = sample_report()
    required = "required pass rate 80% per case"
    html, markdown = html_report(report), markdown_summary(report.summary)
    view = run_page("run-1", report)
    for page in (html, markdown, view):
        assert required in page
        assert "pass rate 0.8" not in page
    assert "pass rate: cases 25% · trials" in html  # measured: 1 of 4 judged cases passed
    assert "- pass rate 25% of cases" in markdown
