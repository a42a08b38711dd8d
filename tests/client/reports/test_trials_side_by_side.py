"""The HTML report's trials side by side: trials that differ only in timings are one
outcome, and identifiers are never broken mid-word in the side-by-side columns."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest
from evalport.client import AssertionResult, TrialResult
from evalport.client.reports import RunReport, html_report, summarize, summarize_case
from evalport.client.reports._html_trial import case_details
from report_data import sample_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


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


BROKEN_WORDS = """() => {
  const broken = [];
  const walker = document.createTreeWalker(document.querySelector('.variants'), NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode()); ) {
    for (const word of node.textContent.matchAll(/[A-Za-z0-9_]{4,}/g)) {
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      const tops = new Set(Array.from(range.getClientRects(), (rect) => Math.round(rect.top)));
      if (tops.size > 1) broken.push(word[0]);
    }
  }
  return broken;
}"""


def failing(number: int, ok: bool) -> TrialResult:
    name = "called_tool(search_orders_by_customer_email_address)"
    message = (
        ""
        if ok
        else (
            "no call of search_orders_by_customer_email_address with "
            "{'query': 'ada.lovelace@analytical-engines.example.com'}"
        )
    )
    checked = AssertionResult(name=name, score=float(ok), passed=ok, message=message)
    return TrialResult(
        case_id="c",
        trial=number,
        verdict="passed" if ok else "failed",
        assertions=[checked],
        duration=0.3,
    )


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_side_by_side_trials_at_1400_px_break_no_identifier_mid_word(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    report = sample_report()
    result = msgspec.structs.replace(
        report.results[0], trials=[failing(0, True), failing(1, False)]
    )
    results = [result, *report.results[1:]]
    summary = summarize([summarize_case(r) for r in results], report.summary.provenance)
    path = tmp_path / "report.html"
    path.write_text(html_report(RunReport(summary=summary, results=results)), encoding="utf-8")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(path.as_uri())
            page.locator("details.case").first.evaluate("details => { details.open = true }")
            assert page.locator(".variants").count() >= 1
            assert page.evaluate(BROKEN_WORDS) == []
            message = page.get_by_text("no call of search_orders_by_customer_email_address")
            assert message.is_visible()  # the message is in view, not scrolled off
            box = message.bounding_box()
            assert box is not None and box["x"] + box["width"] <= 1400
        finally:
            browser.close()
