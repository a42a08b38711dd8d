"""Time to first token in every report: the figures (p50/p95 over every streamed turn of a
case), the console, Markdown, HTML, JUnit, ``summary.json``, ``evalport view`` and
``compare``; a run whose turns did not stream shows nothing for them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import msgspec
import pytest
from chromium import chromium_binary, load_page
from evalport.client.reports import (
    RunReport,
    compare,
    html_report,
    junit_xml,
    load_summary,
    markdown_summary,
    merge,
    write_run_folder,
)
from evalport.client.reports._console import detail_lines, summary_lines
from evalport.client.reports._files import load_run_folder
from evalport.client.reports._view import compare_page, run_page
from evalport.protocol._cli import main
from first_token_data import DENIED, MEAN, P50, P95, REPLAYED, STREAMED, timed_report
from report_data import sample_report


def _case(report: RunReport, case_id: str):
    return next(case for case in report.summary.cases if case.case_id == case_id)


def test_a_case_has_p50_and_p95_over_every_streamed_turn_of_its_trials():
    report = timed_report()
    figures = _case(report, STREAMED).first_token
    assert figures.count == 9
    assert figures.p50 == pytest.approx(P50)
    assert figures.p95 == pytest.approx(P95)
    assert figures.mean == pytest.approx(MEAN)
    details = _case(report, STREAMED).trial_details
    assert [trial.first_tokens for trial in details] == [
        [0.1, 0.3],
        [0.2],
        [0.5, 0.2],
        [0.3, 0.1],
        [0.2, 0.3],
    ]
    denied = _case(report, DENIED).first_token
    assert (denied.count, denied.p50, denied.p95) == (5, pytest.approx(0.8), pytest.approx(0.8))
    replayed = _case(report, REPLAYED).first_token
    assert (replayed.count, replayed.mean, replayed.p50, replayed.p95) == (0, None, None, None)
    # the run's figure: every streamed turn of the run (9 of refund_ok, 5 at 0.8)
    run = report.summary.analytics.first_token
    assert run.count == 14
    assert run.p50 == pytest.approx(0.3)  # ranks 6 and 7 of 14: 0.3 and 0.3
    assert run.p95 == pytest.approx(0.8)


def test_a_merged_run_gets_the_same_figures_as_one_run():
    summary = timed_report().summary
    first = msgspec.structs.replace(summary, cases=summary.cases[:1])
    second = msgspec.structs.replace(summary, cases=summary.cases[1:])
    merged = merge([first, second])
    assert merged.analytics.first_token == summary.analytics.first_token
    assert merged.cases[0].first_token == summary.cases[0].first_token


def test_summary_json_keeps_the_figures_and_an_older_summary_still_loads(tmp_path):
    folder = write_run_folder(timed_report(), tmp_path / "run")
    data = json.loads((folder / "summary.json").read_text())
    cases = {case["case_id"]: case for case in data["cases"]}
    streamed = cases[STREAMED]["first_token"]
    assert streamed["count"] == 9
    assert streamed["p50"] == pytest.approx(P50) and streamed["p95"] == pytest.approx(P95)
    assert cases[STREAMED]["trial_details"][1]["first_tokens"] == [0.2]
    assert cases[REPLAYED]["first_token"]["count"] == 0
    assert data["analytics"]["first_token"]["count"] == 14
    # results.jsonl keeps every turn's timing, for the run browser
    read = load_run_folder(folder)
    trial = next(r for r in read.results if r.case_id == STREAMED).trials[1]
    assert [timing.first_token for timing in trial.timings] == [0.2, None]
    # a summary written before the field loads with empty figures
    del data["analytics"]["first_token"]
    for case in data["cases"]:
        del case["first_token"]
        for detail in case["trial_details"]:
            del detail["first_tokens"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    loaded = load_summary(old)
    assert loaded.cases[0].first_token.count == 0
    assert loaded.analytics.first_token.p95 is None
    assert "first token" not in markdown_summary(loaded)


def test_console_summary_and_verbose_show_the_time_to_first_token():
    report = timed_report()
    analytics = next(line for line in summary_lines(report.summary) if "trial time" in line)
    assert analytics.endswith("; first token p50 0.30s, p95 0.80s")
    streamed = next(r for r in report.results if r.case_id == STREAMED)
    lines = detail_lines(streamed)
    assert lines[0] == f"CASE   {STREAMED} (first token p50 0.20s, p95 0.42s)"
    assert lines[1] == "  trial 0: passed (0.25s; first token 0.10s, 0.30s)"
    assert "  trial 1: passed (0.25s; first token 0.20s)" in lines
    replayed = detail_lines(next(r for r in report.results if r.case_id == REPLAYED))
    assert replayed[0] == f"CASE   {REPLAYED}"
    assert replayed[1] == "  trial 0: scored (0.25s, cached)"


def test_console_without_timings_shows_no_time_to_first_token():
    report = sample_report()
    lines = summary_lines(report.summary)
    lines += [line for result in report.results for line in detail_lines(result)]
    text = "\n".join(lines)
    assert "first token" not in text
    assert any(line.endswith("p95 0.25s") for line in lines)  # the trial time line as before


def test_markdown_has_a_time_to_first_token_column_when_a_turn_streamed():
    text = markdown_summary(timed_report().summary)
    assert (
        "| case | verdict | passes | 95% interval | pass@k | pass^k | first token p50 / p95 "
        "| notes |\n|---|---|---|---|---|---|---|---|" in text
    )
    assert (
        f"| `{STREAMED}` | ✅ passed | 4/5 (need 4) | 0.38..0.96 | 1.00 (k=5) | 0.00 "
        "| 0.20s / 0.42s | flaky, judge 0.75±0.00 |" in text
    )
    tone = next(line for line in text.splitlines() if line.startswith(f"| `{REPLAYED}`"))
    assert tone.endswith("| 0.00 | - | cached |")
    assert "; first token p50 0.30s, p95 0.80s" in text
    assert "None" not in text and "null" not in text


def test_markdown_without_timings_keeps_its_table():
    text = markdown_summary(sample_report().summary)
    assert "first token" not in text
    assert "| case | verdict | passes | 95% interval | pass@k | pass^k | notes |" in text


def test_html_shows_the_column_each_trial_s_turns_and_the_analytics_row():
    page = html_report(timed_report())
    assert "<th>95% interval</th><th>first token p50 / p95</th><th>notes</th>" in page
    assert '<td class="first-token">0.20s / 0.42s</td>' in page
    assert '<td class="first-token">0.80s / 0.80s</td>' in page
    assert page.count('<td class="first-token">-</td>') == 3  # error, skipped, replayed
    assert "trial 0: 0.250s · first token 0.100s, 0.300s · session s-" in page
    assert "trial 1: 0.250s · first token 0.200s · session s-" in page
    assert (
        "<tr><td>first token (turns)</td><td>14</td><td>0.44s</td><td>0.30s</td>"
        "<td>0.80s</td></tr>" in page
    )
    assert "None" not in page and ">null<" not in page


def test_html_without_timings_has_no_column():
    page = html_report(sample_report())
    assert "first token" not in page and "first-token" not in page


def test_junit_carries_the_figures_as_properties():
    root = ET.fromstring(junit_xml(timed_report().summary))
    cases = {case.get("name"): case for case in root.iter("testcase")}
    properties = {p.get("name"): p.get("value") for p in cases["refund_ok"].iter("property")}
    assert properties["first_token_p50"] == "0.2000"
    assert properties["first_token_p95"] == "0.4200"
    replayed = {p.get("name") for p in cases["tone"].iter("property")}
    assert not replayed & {"first_token_p50", "first_token_p95"}


def test_view_run_page_has_the_column_whatever_the_filter_shows():
    report = timed_report()
    page = run_page("new", report)
    assert "<th>first token p50 / p95</th>" in page
    assert '<td class="first-token">0.20s / 0.42s</td>' in page
    assert "trial 0: 0.250s · first token 0.100s, 0.300s" in page
    # only cases without timings shown: the column stays, with dashes
    errors = run_page("new", report, verdict="error")
    assert "<th>first token p50 / p95</th>" in errors
    assert '<td class="first-token">-</td>' in errors
    assert "first token" not in run_page("old", sample_report())


def test_compare_flags_a_case_whose_time_to_first_token_p95_regressed():
    base = timed_report().summary
    new = timed_report(scale=2.0).summary  # refund_ok p95 0.42s -> 0.84s
    comparison = compare(base, new)
    assert [(s.case_id, s.base_p95, s.new_p95) for s in comparison.slower] == [
        (STREAMED, pytest.approx(0.42), pytest.approx(0.84))
    ]
    assert comparison.slower[0].growth == pytest.approx(1.0)
    assert comparison.changes == [] and comparison.regressions == []  # verdicts alike
    lines = comparison.lines()
    assert lines[0].endswith(
        "; 1 slower to first token (p95 up more than 20% and 50 ms, rank-sum p < 0.05)"
    )
    assert f"  slower     {STREAMED}: first token p95 0.42s -> 0.84s (+100%, p=0.00687)" in lines
    assert len(compare(base, new, ttft_tolerance=1.5).slower) == 0  # +100% is within 150%


def test_compare_does_not_flag_an_equal_run_nor_a_small_or_unmeasured_change():
    summary = timed_report().summary
    same = compare(summary, timed_report().summary)
    assert same.slower == [] and same.changes == []
    assert "slower" not in "\n".join(same.lines())
    # +19%: within the tolerance
    assert compare(summary, timed_report(scale=1.19).summary).slower == []
    # +25% but only 0.04s more: under the 50 ms floor
    quick = timed_report(scale=0.1)  # refund_ok p95 0.042s
    assert compare(quick.summary, timed_report(scale=0.125).summary).slower == []
    # +25% and 0.105s more, but nine turns each that mostly overlap: not significant
    assert compare(summary, timed_report(scale=1.25).summary).slower == []
    # +60%: the nine turns support it
    slowed = compare(summary, timed_report(scale=1.6).summary).slower
    assert [s.case_id for s in slowed] == [STREAMED]
    # a case only one run timed is not compared
    assert compare(sample_report().summary, summary).slower == []
    assert compare(summary, sample_report().summary).slower == []


def test_compare_orders_the_slower_cases_most_slowed_first():
    base = timed_report().summary
    new = timed_report(scale=1.5, denied=(2.0,)).summary  # +50% and +150%
    assert [s.case_id for s in compare(base, new).slower] == [DENIED, STREAMED]


def test_the_compare_command_lists_slower_cases_and_does_not_fail_on_them(tmp_path, capsys):
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_bytes(msgspec.json.encode(timed_report().summary))
    new.write_bytes(msgspec.json.encode(timed_report(scale=2.0).summary))
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert f"  slower     {STREAMED}: first token p95 0.42s -> 0.84s (+100%, p=0.00687)" in out
    assert main(["compare", str(base), str(new), "--ttft-tolerance", "1.5"]) == 0
    assert "slower" not in capsys.readouterr().out


def test_view_compare_page_lists_the_slower_cases():
    page = compare_page("base", timed_report(), "new", timed_report(scale=2.0))
    assert "<h2>Slower to first token</h2>" in page
    assert (
        f'<tr><td><span class="kind slower">slower</span></td><td><code>{STREAMED}</code>'
        "</td><td>0.42s</td><td>0.84s</td><td>+100%</td></tr>" in page
    )
    assert "Slower to first token" not in compare_page(
        "base", timed_report(), "new", timed_report()
    )


@pytest.mark.skipif(chromium_binary() is None, reason="chromium is not installed (CI installs it)")
async def test_the_time_to_first_token_column_renders_in_chromium(tmp_path):
    path = tmp_path / "report.html"
    path.write_text(html_report(timed_report()), encoding="utf-8")
    column = (
        "(() => { const heads = [...document.querySelector('main table').rows[0].cells]"
        ".map(c => c.innerText); const at = heads.indexOf('first token p50 / p95');"
        " return [at, [...document.querySelector('main table').rows].slice(1)"
        ".map(r => r.cells[at].innerText)]; })()"
    )
    page = await load_page(path, width=1280, checks=(column,), screenshot=tmp_path / "ttft.png")
    assert page.errors == [] and page.requests == []
    assert [c for c in page.console if c.startswith(("error", "warning"))] == []
    assert page.values[0] == [4, ["0.20s / 0.42s", "0.80s / 0.80s", "-", "-", "-"]]
    assert "first token (turns)\t14\t0.44s\t0.30s\t0.80s" in page.text
    assert "trial 0: 0.250s · first token 0.100s, 0.300s" in page.text
    assert (tmp_path / "ttft.png").stat().st_size > 0
