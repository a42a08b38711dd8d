import xml.etree.ElementTree as ET

import msgspec
from evalport.client.reports import (
    JUnitReporter,
    MarkdownReporter,
    compare,
    junit_xml,
    markdown_summary,
)
from report_data import sample_report


def _cases(root):
    return {element.get("name"): element for element in root.iter("testcase")}


def test_junit_has_a_testcase_per_case_with_pass_rates():
    root = ET.fromstring(junit_xml(sample_report().summary))
    suite = root.find("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "1"
    assert suite.get("errors") == "1" and suite.get("skipped") == "1"
    cases = _cases(root)
    assert set(cases) == {"refund_ok", "refund_denied", "lookup", "staging_only", "tone"}
    assert cases["refund_ok"].get("classname") == "evals.test_support"
    properties = {p.get("name"): p.get("value") for p in cases["refund_ok"].iter("property")}
    assert properties["passes"] == "4" and properties["trials"] == "5"
    assert properties["pass_rate"] == "0.8000" and properties["flaky"] == "true"
    assert float(properties["wilson_low"]) < 0.8 < float(properties["wilson_high"])
    assert cases["refund_ok"].find("failure") is None
    failure = cases["refund_denied"].find("failure")
    assert failure.get("message") == "2/5 trials passed (needed 4)"
    assert "reply lacks 'refund'" in failure.text
    assert cases["lookup"].find("error").get("message") == "ConnectError: refused"
    assert cases["staging_only"].find("skipped") is not None
    assert cases["tone"].find("failure") is None  # scored passes unless strict
    suite_props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert suite_props["agent"] == "support@1.2" and suite_props["cached_trials"] == "1"


def test_junit_strict_fails_scored_and_lists_load_errors():
    summary = sample_report(strict=True).summary
    summary.load_errors = ["evals/broken.py: SyntaxError: invalid syntax (line 3)"]
    root = ET.fromstring(junit_xml(summary))
    suite = root.find("testsuite")
    assert suite.get("failures") == "2" and suite.get("errors") == "2" and suite.get("tests") == "6"
    assert _cases(root)["tone"].find("failure").get("type") == "scored"
    assert _cases(root)["load error"].find("error").get("type") == "load"


def test_markdown_summary_table_and_reasons():
    summary = sample_report().summary
    text = markdown_summary(summary)
    assert f"Tokens: target {summary.target_tokens:,}, judge {summary.judge_tokens:,}" in text
    assert "✅ 1 passed · ❌ 1 failed · 💥 1 error · ⏭️ 1 skipped · 🟡 1 scored" in text
    assert "5 cases, 13 trials, 1 from the run cache" in text
    assert (
        "| `evals/test_support.py::refund_ok` | ✅ passed | 4/5 (need 4) | 0.38..0.96 | 1.00 (k=5) | 0.00 | flaky, judge 0.75±0.00 |"
        in text
    )
    assert "- `evals/test_support.py::lookup`: TargetUnavailable: ConnectError: refused" in text


def test_markdown_includes_the_baseline_and_appends_to_the_step_summary(tmp_path, monkeypatch):
    base = sample_report().summary
    new = sample_report()
    new.summary.cases[0].verdict = "failed"
    step = tmp_path / "step.md"
    step.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    MarkdownReporter(step, baseline=base).finish(new)
    text = step.read_text()
    assert text.startswith("# earlier step\n## evalport results")
    assert "### Compared with the baseline" in text
    assert "regression evals/test_support.py::refund_ok: passed -> failed" in text
    other = tmp_path / "summary.md"
    other.write_text("old")
    MarkdownReporter(other).finish(new)
    assert other.read_text().startswith("## evalport results")
    assert compare(base, new.summary).regressions[0].case_id.endswith("refund_ok")


HOSTILE = "\x1b[2J\x1b[32mPASS\x1b[0m \x00\x07 <img src=x onerror=alert(1)> [click](https://evil.example) ``` | ~~gone~~"


def _hostile_summary():
    summary = sample_report().summary
    failing = next(case for case in summary.cases if case.verdict == "failed")
    failing.failures = [HOSTILE]
    failing.case_id = "evals/test_x.py::`odd`|\x1bcase"
    erring = next(case for case in summary.cases if case.verdict == "error")
    erring.error = "Boom\x1b: " + HOSTILE
    erring.failures = []
    summary.load_errors = ["evals/broken.py: \x1b[31mSyntaxError\x1b[0m"]
    return summary


def test_junit_stays_well_formed_xml_whatever_the_agent_wrote():
    summary = _hostile_summary()
    root = ET.fromstring(junit_xml(summary))  # raised "not well-formed" before
    case = next(c for c in root.iter("testcase") if c.get("name").startswith("`odd`"))
    assert case.get("name") == "`odd`|\\x1bcase"
    assert "\\x1b[32mPASS\\x1b[0m \\x00\\x07 <img" in case.find("failure").text
    errors = [element.get("message") for element in root.iter("error")]
    assert "Boom\\x1b: \\x1b[2J" in " ".join(errors)


def test_markdown_shows_agent_text_and_renders_none_of_it():
    summary = _hostile_summary()
    text = markdown_summary(summary)
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "[click](" not in text and "\\[click\\](https://evil.example)" in text
    assert "```" not in text.replace("\\`\\`\\`", "")  # no fence the agent opened
    assert "\\~\\~gone\\~\\~" in text
    # the case id stays one code span: its own backticks and bar cannot close it
    assert "``evals/test_x.py::`odd`\\|\\x1bcase``" in text
    assert "\x1b" not in text and "\x00" not in text and "\\x1b\\[2J" in text


def _recorded_report():
    """The sample run, its cases' trials having recorded outputs (an evaluator's run())."""
    report = sample_report()
    cases = {result.case_id.rpartition("::")[2]: result for result in report.results}
    for trial in cases["refund_denied"].trials:
        trial.output = (
            {"refund": False, "note": "a | b\nsee <b>&</b>"} if trial.verdict == "failed" else "ok"
        )
    cases["refund_ok"].trials[0].output = "x" * 500
    for index, trial in enumerate(cases["tone"].trials):
        trial.output = f"\x1b[31mtone {index}\x1b[0m ]]> <!--"
    first = cases["lookup"].trials[0]
    cases["lookup"].trials = [msgspec.structs.replace(first, trial=i, output=i) for i in range(5)]
    return report


def test_junit_carries_each_cases_recorded_output_escaped(tmp_path):
    report = _recorded_report()
    path = tmp_path / "junit.xml"
    JUnitReporter(path).finish(report)
    cases = _cases(ET.fromstring(path.read_bytes()))  # well-formed whatever was recorded
    note = '{"refund": false, "note": "a | b\\nsee <b>&</b>"}'
    failure = cases["refund_denied"].find("failure")
    assert (
        failure.text
        == f"reply_contains: reply lacks 'refund' (×3)\nrecorded output (×3): {note}\nrecorded output (×2): ok"
    )
    assert cases["refund_denied"].find("system-out").text == failure.text.split("\n", 1)[1]
    # a passed case shows it too, cut short
    assert cases["refund_ok"].find("system-out").text == f"recorded output: {'x' * 199}…"
    # control characters escaped, XML's own syntax kept as text
    out = cases["tone"].find("system-out").text
    assert out == "recorded output: \\x1b[31mtone 0\\x1b[0m ]]> <!--"
    # three distinct outputs shown, the rest counted; the error's text ends with them
    error = cases["lookup"].find("error").text
    assert (
        error
        == "TargetUnavailable: ConnectError: refused\nrecorded output: 0\nrecorded output: 1\nrecorded output: 2\nand 2 more distinct outputs"
    )
    assert cases["staging_only"].find("system-out") is None  # it recorded nothing


def test_markdown_lists_recorded_outputs_one_line_each_and_renders_none():
    report = _recorded_report()
    text = markdown_summary(report.summary, results=report.results)
    section = text.split("### Recorded output\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section == [
        f"- `evals/test_support.py::refund_ok`: {'x' * 199}…",
        '- `evals/test_support.py::refund_denied` (×3): {"refund": false, "note": '
        '"a \\| b\\\\nsee &lt;b&gt;&amp;&lt;/b&gt;"}',
        "- `evals/test_support.py::refund_denied` (×2): ok",
        "- `evals/test_support.py::lookup`: 0",
        "- `evals/test_support.py::lookup`: 1",
        "- `evals/test_support.py::lookup`: 2",
        "- `evals/test_support.py::lookup`: and 2 more distinct outputs",
        "- `evals/test_support.py::tone`: \\\\x1b\\[31mtone 0\\\\x1b\\[0m \\]\\]&gt; &lt;!--",
    ]
    assert "### Recorded output" not in markdown_summary(report.summary)  # no results, no section
