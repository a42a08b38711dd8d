"""Result analytics on a real run: the example suite against the regressed example agent
in-process, through ``evalport run`` with every report, read back from the files."""

import json
from pathlib import Path

import pytest
from evalport.client._core._results import RunData, TrialResult
from evalport.client._core._stats import percentile
from evalport.client.reports import load_summary
from evalport.client.reports._transcript import transcript_lines
from evalport.protocol._cli import main

ROOT = Path(__file__).resolve().parents[3]
EVALS = str(ROOT / "examples" / "evals")
REGRESSED = str(ROOT / "examples" / "support_agent_regressed.py") + ":agent"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("analytics")
    args = ["run", EVALS, "--local", REGRESSED, "--out", str(folder / "run"), "-q"]
    args += ["--json", str(folder / "s.json"), "--md", str(folder / "s.md")]
    args += ["--html", str(folder / "s.html"), "--repeat", "2"]
    assert main(args) == 1
    return folder


def _trial_files(folder: Path) -> list[dict]:
    return [
        json.loads(path.read_text()) for path in sorted(folder.glob("run/cases/*/trial-*.json"))
    ]


def test_pass_rates_overall_per_tag_and_assertion_totals(run):
    summary = json.loads((run / "s.json").read_text())
    figures = summary["analytics"]
    assert figures["pass_rate"] == 5 / 9
    assert figures["trial_pass_rate"] == 10 / 18
    assert summary["tags"]["status"] == {"cases": 4, "passed": 0, "pass_rate": 0.0}
    assert figures["assertions"]["called_tool"] == {
        "passed": 4,
        "failed": 8,
        "soft_failed": 0,
        "not_evaluated": 0,
    }
    # the totals agree with the assertions the trial files hold
    trials = _trial_files(run)
    assert len(trials) == 18
    held = [check for trial in trials for check in trial["assertions"]]
    totals = figures["assertion_outcomes"]
    assert sum(totals.values()) == len(held)
    assert totals["passed"] == sum(check["passed"] for check in held)
    assert totals["failed"] == sum(not check["passed"] for check in held)


def test_durations_per_trial_and_per_case(run):
    summary = json.loads((run / "s.json").read_text())
    cases = summary["cases"]
    trial_times = [trial["duration"] for case in cases for trial in case["trial_details"]]
    assert len(trial_times) == 18 and all(time > 0 for time in trial_times)
    trials = summary["analytics"]["trial_durations"]
    assert trials["count"] == 18
    assert trials["mean"] == pytest.approx(sum(trial_times) / 18)
    assert trials["p50"] == pytest.approx(percentile(trial_times, 50))
    assert trials["p95"] == pytest.approx(percentile(trial_times, 95))
    assert min(trial_times) <= trials["p50"] <= trials["p95"] <= max(trial_times)
    per_case = summary["analytics"]["case_durations"]
    assert per_case["count"] == 9
    assert per_case["mean"] == pytest.approx(sum(case["duration"] for case in cases) / 9)
    first = cases[0]["trial_durations"]
    times = [trial["duration"] for trial in cases[0]["trial_details"]]
    assert first["count"] == 2 and first["p50"] == pytest.approx(sum(times) / 2)


def test_each_trial_keeps_its_reply_and_each_case_its_dataset_row(run):
    summary = json.loads((run / "s.json").read_text())
    cases = {case["case_id"]: case for case in summary["cases"]}
    shipped = cases["support_eval::order_status[shipped]"]
    assert shipped["row"] == {
        "id": "shipped",
        "order": "A1049",
        "status": "shipped",
        "carrier": "DHL",
    }
    assert [trial["reply"] for trial in shipped["trial_details"]] == [
        "Order A1049 is shipped with DHL."
    ] * 2
    assert [trial["verdict"] for trial in shipped["trial_details"]] == ["failed", "failed"]
    assert cases["support_eval::find_orders"]["row"] is None
    # every reply is the one the (redacted) run in the run folder holds
    for trial in _trial_files(run):
        case = cases[trial["caseId"]]
        assert case["trial_details"][trial["trial"]]["reply"] == trial["run"]["reply"]


def test_console_markdown_and_html_show_the_analytics(run, capsys):
    markdown = (run / "s.md").read_text()
    assert "### Analytics" in markdown
    assert "- pass rate 56% of cases, 56% of trials; trial time mean " in markdown
    assert "- by tag: " in markdown and "status 0/4 (0%)" in markdown
    assert "(not passed by kind: called_tool 8/12)" in markdown
    html = (run / "s.html").read_text()
    assert "<h2>Analytics</h2>" in html and "pass rate: cases 56% · trials 56%" in html
    assert (
        "<tr><td><code>called_tool</code></td><td>4</td><td>8</td><td>0</td><td>0</td></tr>" in html
    )


def test_an_earlier_summary_without_analytics_still_loads(run, tmp_path):
    data = json.loads((run / "s.json").read_text())
    del data["analytics"]
    for case in data["cases"]:
        for name in ("row", "trial_durations", "trial_details", "assertions"):
            del case[name]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    loaded = load_summary(old)
    assert loaded.total == 9 and loaded.analytics.pass_rate is None
    assert loaded.cases[0].trial_details == []


def test_transcripts_keep_tool_payloads_as_the_trace_policy_left_them(run):
    trial = next(
        trial for trial in _trial_files(run) if trial["caseId"] == "support_eval::small_refund"
    )
    result = TrialResult(case_id="x", run=RunData(json.dumps(trial["run"]).encode()))
    lines = transcript_lines(result)
    assert lines[0] == "user:  I'd like my money back for order A1050."
    refund = next(line for line in lines if line.startswith("tool   refund_order("))
    assert "order_id=<redacted <string:5> #" in refund and "A1050" not in refund
    assert lines[-1] == "status completed, stopped: completed"


def test_percentile():
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1], 101)
