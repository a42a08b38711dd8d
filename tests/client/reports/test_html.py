import re

import pytest
from chromium import chromium_binary, load_page
from evalport.client.reports import HtmlReporter, html_report
from report_data import sample_report


def test_html_is_self_contained_and_escapes_transcripts():
    page = html_report(sample_report())
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    for case_id in ("refund_ok", "refund_denied", "lookup", "staging_only", "tone"):
        assert f"evals/test_support.py::{case_id}" in page
    assert "lookup_order · 120.0 ms" in page  # tool timeline
    assert "target tokens: input 100, output 20; judge tokens: 55" in page
    assert "from the run cache" in page


@pytest.mark.skipif(chromium_binary() is None, reason="chromium is not installed (CI installs it)")
async def test_html_renders_in_headless_chromium_without_console_errors(tmp_path):
    report = sample_report()
    path = tmp_path / "report.html"
    HtmlReporter(path).finish(report)
    page = await load_page(path)
    assert page.errors == []
    assert [
        line for line in page.console if line.split(":")[0] in ("error", "warning", "assert")
    ] == []
    assert page.requests == []
    for result in report.results:
        assert result.case_id in page.text
    assert "transcript" in page.text and "tool timeline" in page.text
    assert "refund" in page.text and "helpfulness" in page.text


@pytest.mark.skipif(chromium_binary() is None, reason="chromium is not installed (CI installs it)")
async def test_the_chromium_check_catches_console_errors(tmp_path):
    path = tmp_path / "broken.html"
    path.write_text(
        "<!DOCTYPE html><html><body><p>x</p><script>console.error('bad thing');"
        "undefinedFunction();</script></body></html>"
    )
    page = await load_page(path)
    assert page.console == ["error: bad thing"]
    assert "undefinedFunction is not defined" in page.errors[0]


@pytest.mark.skipif(chromium_binary() is None, reason="chromium is not installed (CI installs it)")
async def test_report_of_a_real_run_renders_every_case_and_transcript(tmp_path):
    import sys
    from pathlib import Path

    from evalport.client import LocalTarget, Runner, RunOptions, discover

    root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(root / "examples"))
    from support_agent import agent

    cases, errors = discover(root / "examples" / "evals")
    assert errors == []
    path = tmp_path / "report.html"
    report = await Runner(
        LocalTarget(agent), RunOptions(repeat=2), reporters=[HtmlReporter(path)]
    ).run(cases)
    page = await load_page(path)
    assert page.errors == [] and page.requests == []
    assert [line for line in page.console if not line.startswith(("info", "verbose"))] == []
    for case in report.summary.cases:
        assert case.case_id in page.text
    assert "user I want a refund for order A1049" in page.text
    assert "refund_order ·" in page.text  # the tool timeline of the refund cases


NO_OVERFLOW = """
(() => {
  const page = document.documentElement;
  const tables = [...document.querySelectorAll('table')].filter(
    (table) => table.scrollWidth > table.parentElement.clientWidth + 1
  );
  return {
    page: page.scrollWidth - page.clientWidth,
    tables: tables.map((table) => table.className + ': ' + table.innerText.slice(0, 80)),
    assertionTables: document.querySelectorAll('table.assertions').length,
  };
})()
"""

FAILURE_ROWS = """
[...document.querySelectorAll('.msg.failure')].map((row) => ({
  text: row.innerText,
  height: row.getBoundingClientRect().height,
}))
"""

GAP = """
(() => {
  const filters = document.querySelector('.filters').getBoundingClientRect();
  const cases = [...document.querySelectorAll('h2')].find((h) => h.textContent === 'Cases');
  return cases.getBoundingClientRect().top - filters.bottom;
})()
"""


@pytest.mark.skipif(chromium_binary() is None, reason="chromium is not installed (CI installs it)")
async def test_a_run_with_failures_renders_at_1280px_without_overflow(tmp_path):
    from review_run import LONG, review_run

    path = tmp_path / "report.html"
    await review_run([HtmlReporter(path)])
    page = await load_page(path, width=1280, checks=(NO_OVERFLOW, FAILURE_ROWS, GAP))
    assert page.errors == [] and page.requests == []
    overflow, failures, gap = page.values
    assert overflow == {"page": 0, "tables": [], "assertionTables": 7}, overflow
    assert LONG in page.text  # wrapped, not cut
    assert len(failures) == 1  # the agent's failure, once for three identical trials
    assert failures[0]["text"].startswith("agent error ConnectionError · error id ")
    assert "message hidden by the safe trace policy" in failures[0]["text"]
    assert failures[0]["height"] > 0
    assert gap < 40, f"{gap:.0f}px between the filters and Cases"


TAG_ROWS_SHOWN = """
(() => {
  const shown = {};
  for (const verdict of ['failed', 'error', 'passed', 'all']) {
    document.querySelector(`.filters button[data-verdict=${verdict}]`).click();
    const heading = [...document.querySelectorAll('h2')].find((h) => h.textContent === 'Tags');
    const rows = [...heading.nextElementSibling.querySelectorAll('tr')].slice(1);
    shown[verdict] = rows.filter((row) => row.offsetParent !== null)
      .map((row) => row.cells[0].textContent);
  }
  return shown;
})()
"""


@pytest.mark.skipif(chromium_binary() is None, reason="chromium is not installed (CI installs it)")
async def test_the_verdict_filter_also_filters_the_tags_table(tmp_path):
    path = tmp_path / "report.html"
    HtmlReporter(path).finish(sample_report())
    page = await load_page(path, checks=(TAG_ROWS_SHOWN,))
    assert page.errors == []
    assert page.values[0] == {
        "failed": ["approval", "refund"],  # refund_denied's tags
        "error": ["orders"],
        "passed": ["refund"],
        "all": ["approval", "orders", "refund"],
    }
