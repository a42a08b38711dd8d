"""The HTML report's trials side by side: trials that differ only in timings are one
outcome, and identifiers are never broken mid-word in the side-by-side columns."""

from __future__ import annotations

import re

import msgspec
from evalport.client import AssertionResult, TrialResult
from evalport.client.reports import html_report
from evalport.client.reports._html import STYLE, case_details
from report_data import sample_report


def trial(number: int, took: str) -> TrialResult:
    checked = AssertionResult(
        name="first_token_within(0.5)",
        score=1.0,
        passed=True,
        message=f"first token after {took} (turn 1)",
    )
    return TrialResult(
        case_id="c", trial=number, verdict="passed", assertions=[checked], duration=0.3
    )


def test_trials_that_differ_only_in_timings_are_one_outcome() -> None:
    report = sample_report()
    case = report.summary.cases[0]
    result = msgspec.structs.replace(
        report.results[0], trials=[trial(0, "0.104s"), trial(1, "131 ms"), trial(2, "0.2s")]
    )
    page = case_details(case, result)
    assert "different outcomes" not in page
    assert "trials 0, 1, 2" in page and "×3" in page


def test_side_by_side_columns_never_break_an_identifier_mid_word() -> None:
    rules = dict(re.findall(r"([^{}]+)\{([^}]*)\}", STYLE))
    variants = {selector: body for selector, body in rules.items() if ".variants" in selector}
    words = [body for selector, body in variants.items() if "overflow-wrap" in body]
    assert words and all("overflow-wrap:break-word" in body for body in words), variants
    assert any("table-layout:auto" in body for body in variants.values()), variants
    assert html_report(sample_report())  # the page still renders
