import io

from evalport.client.reports import ConsoleReporter, RunPlan
from report_data import sample_report


def test_live_progress_redraws_one_line_and_ends_with_the_summary():
    report = sample_report()
    stream = io.StringIO()
    console = ConsoleReporter(stream, live=True)
    console.start(RunPlan(cases=5, trials=13, provenance=report.summary.provenance))
    for result in report.results:
        for trial in result.trials:
            console.trial_done(trial)
        console.case_done(result, report.summary.cases[0])
    console.finish(report)
    text = stream.getvalue()
    assert text.startswith(
        "evalport: 5 cases, 13 trials against http://127.0.0.1:8765/ (support 1.2), trace policy "
        "safe (payloads shown as digests; --trace-policy verbatim shows them)\n"
    )
    assert "\r[13/13] 6 passed 4 failed 1 error 1 skipped 1 scored (1 cached)" in text
    assert "PASS " not in text  # no per-case lines on a terminal
    assert "FAIL   evals/test_support.py::refund_denied (2/5 passed, needed 4)" in text
    assert "ERROR  evals/test_support.py::lookup (0/1 passed, needed 1)" in text
    assert text.rstrip().endswith(
        "1 passed, 1 failed, 1 error, 1 skipped, 1 scored — 5 cases, 13 trials, 1 cached in 9.00s"
    )


def test_logs_get_one_line_per_case_and_the_reasons_of_those_that_did_not_pass():
    report = sample_report()
    stream = io.StringIO()
    console = ConsoleReporter(stream, live=False)
    for result, summary in zip(report.results, report.summary.cases, strict=True):
        console.case_done(result, summary)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "PASS   evals/test_support.py::refund_ok (4/5)"
    assert lines[-2:] == [
        "SCORED evals/test_support.py::tone (0/1 passed, needed 1, 1 cached)",
        "         judge",
    ]


def test_a_case_that_did_not_pass_is_named_once_in_logs():
    report = sample_report()
    stream = io.StringIO()
    console = ConsoleReporter(stream, live=False)
    for result, summary in zip(report.results, report.summary.cases, strict=True):
        console.case_done(result, summary)
    console.finish(report)
    text = stream.getvalue()
    line = "FAIL   evals/test_support.py::refund_denied (2/5 passed, needed 4)"
    assert text.count("evals/test_support.py::refund_denied") == 1
    after = text[text.index(line) + len(line) + 1 :].splitlines()
    assert after[0].startswith("         ")  # its first reason, right under it


def test_agent_text_cannot_drive_the_terminal():
    """A reply, an assertion message, a tool or case name holding escape sequences is
    printed escaped, -v included: no clear screen, no clipboard write, no fake PASS line."""
    escape = "\x1b[2J\x1b]52;c;aGk=\x07\r\x1b[32mPASS\x1b[0m fake"
    report = sample_report()
    for result in report.results:
        for trial in result.trials:
            for check in trial.assertions:
                check.message = escape
            trial.error = trial.error and escape
    report.summary.cases[1].failures = [escape]
    report.summary.cases[1].case_id += escape
    report.summary.provenance.target["agent_name"] = escape
    stream = io.StringIO()
    console = ConsoleReporter(stream, live=False, verbose=True)
    console.start(RunPlan(cases=5, trials=13, provenance=report.summary.provenance))
    for result, summary in zip(report.results, report.summary.cases, strict=True):
        console.case_done(result, summary)
    console.finish(report)
    text = stream.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "\\x1b[2J\\x1b]52;c;aGk=\\x07\\r\\x1b[32mPASS" in text
