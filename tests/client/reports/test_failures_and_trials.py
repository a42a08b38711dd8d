"""Agent failures readable in every report, identical trials once, differing ones side by
side, the judges' evidence, the tool timeline's time axis, and the console's case order.
All on real runs of the example support agent in-process (``review_run``)."""

import asyncio
import inspect
import io
import re
import xml.etree.ElementTree as ET

import pytest
import review_run as review
from evalport.client import TrialResult, Verdict
from evalport.client._core._cases import Case
from evalport.client._runner import Runner, RunOptions
from evalport.client.reports import (
    ConsoleReporter,
    HtmlReporter,
    JUnitReporter,
    MarkdownReporter,
)
from evalport.protocol import TracePolicy
from review_run import EVIDENCE, SECRET, review_run

DIGEST_JSON = re.compile(r'\{"hash":\s*"sha256:')
# where the crash case asserts, as every report names a failed assertion
CRASH_ASSERTION = (
    f"tests/client/reports/review_run.py:{inspect.getsourcelines(review.crash)[1] + 2}"
)


async def every_report(tmp_path, **options):
    stream = io.StringIO()
    reporters = [
        ConsoleReporter(stream, live=False, verbose=True),
        HtmlReporter(tmp_path / "report.html"),
        JUnitReporter(tmp_path / "junit.xml"),
        MarkdownReporter(tmp_path / "summary.md"),
    ]
    report = await review_run(reporters, **options)
    texts = {
        "console": stream.getvalue(),
        "html": (tmp_path / "report.html").read_text(),
        "junit": (tmp_path / "junit.xml").read_text(),
        "markdown": (tmp_path / "summary.md").read_text(),
    }
    return report, texts


def error_ids(report, case_id):
    _, result = report.case(case_id)
    return [info["errorId"] for trial in result.trials for info in trial.run["errorDetails"]]


async def test_an_agent_failure_shows_type_and_id_but_not_a_digest_under_safe(tmp_path):
    report, texts = await every_report(tmp_path)
    ids = error_ids(report, "review_eval::crash")
    assert len(ids) == 3 and len(set(ids)) == 3
    for name, text in texts.items():
        assert "agent error ConnectionError" in text, name
        assert ids[0] in text, name
        assert "--trace-policy verbatim" in text, name
        assert SECRET not in text, name
        if name == "html":  # one line: its crash case
            text = text[text.index('id="review_eval_crash') : text.index('id="review_eval_coin')]
        for line in text.replace("&quot;", '"').splitlines():
            if "agent error" in line:
                assert not DIGEST_JSON.search(line), (name, line)
    crash = next(c for c in report.summary.cases if c.case_id == "review_eval::crash")
    assert crash.failures == [
        "succeeded: status is 'failed', expected 'completed'; agent error ConnectionError: "
        "message hidden by the safe trace policy (run with --trace-policy verbatim to see it, "
        f"or find the error id in the agent's log: the server's, or stderr under --local) (at {CRASH_ASSERTION})"
        f" (×3; error id {ids[0]} and 2 more)"
    ]
    junit = ET.fromstring(texts["junit"].encode())
    case = next(c for c in junit.iter("testcase") if c.get("name") == "crash")
    assert "agent error ConnectionError" in case.find("failure").text
    html = texts["html"]
    rows = re.findall(r'<div class="msg failure">(.*?)</div>', html)
    assert len(rows) == 1  # three identical trials: one transcript
    assert rows[0].startswith("<b>agent error ConnectionError</b> · error id <code>")
    for error_id in ids:  # each trial's own id stays findable
        assert error_id in html


async def test_under_verbatim_the_agents_message_is_shown(tmp_path):
    _, texts = await every_report(tmp_path, policy=TracePolicy.verbatim())
    for name, text in texts.items():
        assert f"agent error ConnectionError: {SECRET}" in text or name == "html", name
        assert SECRET in text, name
        assert "message hidden" not in text, name


async def test_identical_trials_are_shown_once_with_their_count(tmp_path):
    _, texts = await every_report(tmp_path)
    html = texts["html"]
    status = html[html.index('id="review_eval_status') : html.index('id="review_eval_wrong')]
    assert status.count("<h4>transcript</h4>") == 1
    assert 'trials 0, 1, 2 <span class="count">×3</span> identical' in status
    for trial in range(3):
        assert f"trial {trial}: " in status  # each trial's session and duration
    coin = html[html.index('id="review_eval_coin') : html.index('id="review_eval_judged')]
    assert '2 different outcomes, side by side</p><div class="variants">' in coin
    assert coin.count("<h4>transcript</h4>") == 2
    assert 'trials 0, 2 <span class="count">×2</span>' in coin and "<b>trial 1</b>" in coin


async def test_the_judges_evidence_is_shown(tmp_path):
    _, texts = await every_report(tmp_path)
    console = texts["console"].splitlines()
    at = console.index("JUDGE  review_eval::judged")
    assert console[at + 1 : at + 4] == [
        "         helpfulness 0.80 (×3): It answers the question and names the carrier.",
        f"           “{EVIDENCE[0]}”",
        f"           “{EVIDENCE[1]}”",
    ]
    assert f"<li>“{EVIDENCE[0]}”</li>" in texts["html"]
    assert (
        "- `review_eval::judged` helpfulness 0.80 (×3): It answers the question and names the "
        f"carrier. Evidence: “{EVIDENCE[0]}”, “{EVIDENCE[1]}”"
    ) in texts["markdown"]


async def test_the_console_without_verbose_leaves_the_judges_out(tmp_path):
    stream = io.StringIO()
    await review_run([ConsoleReporter(stream, live=False)], repeat=1)
    assert "JUDGE" not in stream.getvalue() and EVIDENCE[0] not in stream.getvalue()


async def test_the_tool_timeline_has_a_time_axis(tmp_path):
    _, texts = await every_report(tmp_path, repeat=1)
    axes = re.findall(r'<div class="axis"[^>]*>(.*?)</div>', texts["html"])
    assert axes  # one per timeline with tool calls
    labels = re.findall(r">([0-9.]+) ms<", axes[0])
    assert labels[0] in ("0", "0.0", "0.00", "0.000") and len(labels) >= 3
    values = [float(label) for label in labels]
    assert values == sorted(values)


def test_no_empty_gap_above_cases():
    from evalport.client.reports import html_report
    from report_data import sample_report

    page = html_report(sample_report())
    assert "main>h2:first-child{margin-top:8px}" in page
    assert "header{padding-bottom:0}main{padding-top:0}" in page


async def test_the_console_prints_cases_in_discovery_order_whatever_finishes_first():
    ids = [f"order_eval::case_{n}" for n in range(6)]

    async def trial_function(case, target, *, trial, judge, strict):
        # the first cases take longest: they finish last
        await asyncio.sleep(0.02 * (len(ids) - ids.index(case.id)))
        return TrialResult(case_id=case.id, trial=trial, verdict=Verdict.PASSED)

    from evalport.client import LocalTarget

    async def echo(message, history, ctx):
        return message

    stream = io.StringIO()
    cases = [Case(id=case_id, func=lambda ctx: None) for case_id in ids]
    await Runner(
        LocalTarget(echo),
        RunOptions(concurrency=6),
        reporters=[ConsoleReporter(stream, live=False)],
        trial_function=trial_function,
    ).run(cases)
    lines = [line.split()[1] for line in stream.getvalue().splitlines() if line.startswith("PASS")]
    assert lines == ids


@pytest.mark.parametrize("repeat", [1, 3])
async def test_a_case_line_is_printed_as_soon_as_the_cases_before_it_finished(repeat):
    from evalport.client.reports import RunPlan
    from report_data import sample_report

    report = sample_report()
    stream = io.StringIO()
    console = ConsoleReporter(stream, live=False)
    plan_ids = [case.case_id for case in report.summary.cases]
    console.start(
        RunPlan(cases=5, trials=5 * repeat, provenance=report.summary.provenance, case_ids=plan_ids)
    )
    pairs = list(zip(report.results, report.summary.cases, strict=True))
    console.case_done(*pairs[1])
    assert stream.getvalue().count("\n") == 1  # only the header: case 0 is not done yet
    console.case_done(*pairs[0])
    printed = stream.getvalue().splitlines()[1:]  # case lines, with a failed case's reasons
    assert [line.split()[1] for line in printed if not line.startswith(" ")] == plan_ids[:2]
