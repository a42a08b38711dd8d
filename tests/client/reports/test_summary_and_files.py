import json

import msgspec
import pytest
from evalport.client import Verdict
from evalport.client._core._config import ConfigError
from evalport.client.reports import load_summary, write_run_folder
from evalport.client.reports._files import case_slug
from report_data import sample_report


def test_summary_counts_statistics_and_tags():
    summary = sample_report().summary
    assert summary.counts == {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "scored": 1}
    assert summary.total == 5 and summary.trials == 13 and summary.cached_trials == 1
    ok = summary.cases[0]
    assert (ok.passes, ok.samples, ok.required, ok.verdict) == (4, 5, 4, Verdict.PASSED)
    assert ok.flaky and ok.judge_mean == 0.75 and ok.judge_std == 0.0
    assert ok.judge_tokens == 5 * 55 and ok.target_tokens == 5 * 120
    assert summary.cases[2].samples == 1 and summary.cases[3].samples == 0  # skipped: no sample
    assert summary.tags["refund"].cases == 2 and summary.tags["refund"].passed == 1
    assert summary.cases[1].failures == ["reply_contains: reply lacks 'refund' (×3)"]
    assert summary.cases[2].failures == ["TargetUnavailable: ConnectError: refused"]
    assert not summary.ok


def test_strict_makes_scored_a_failure():
    report = sample_report(strict=True)
    report.summary.counts = {**report.summary.counts, "failed": 0, "error": 0}
    assert not report.summary.ok
    report.summary.provenance.strict = False
    assert report.summary.ok


def test_run_folder_holds_summary_results_traces_and_judges(tmp_path):
    report = sample_report()
    folder = write_run_folder(report, tmp_path / "run")
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["schema"] == "evalport.run/1"
    assert summary["provenance"]["git_sha"] == "0123456789abcdef0123"
    assert summary["provenance"]["judge_model"] == "judge-1"
    assert summary["provenance"]["repeat"] == 5
    lines = (folder / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["case_id"] for line in lines] == [c.case_id for c in report.results]
    assert json.loads(lines[0])["trials"][0]["run"] is None  # traces live in the case folders
    case_folder = folder / "cases" / case_slug(report.results[0].case_id)
    trace = json.loads((case_folder / "trial-0.json").read_text())
    assert trace["run"]["tools"][0]["tool_call"]["name"] == "lookup_order"
    assert trace["assertions"][0]["name"] == "reply_contains"
    judges = json.loads((case_folder / "judges.json").read_text())
    assert judges[0]["judges"][0]["criterion"] == "helpfulness"
    assert load_summary(folder) == report.summary
    assert load_summary(folder / "summary.json").cases[0].trial_verdicts[-1] == "failed"


def test_case_slugs_are_safe_and_distinct():
    a, b = case_slug("a/b::c[1]"), case_slug("a_b::c[1]")
    assert a != b and "/" not in a and ":" not in a


def test_load_summary_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read results"):
        load_summary(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_bytes(msgspec.json.encode({"cases": 3}))
    with pytest.raises(ConfigError, match=r"bad.json: not an evalport results file"):
        load_summary(bad)


def test_rewriting_a_run_folder_drops_the_traces_of_the_earlier_run(tmp_path):
    report = sample_report()
    write_run_folder(report, tmp_path)
    stale = tmp_path / "cases" / case_slug("evals/gone.py::old_case")
    stale.mkdir()
    (stale / "trial-0.json").write_text("{}")
    write_run_folder(report, tmp_path)
    assert not stale.exists()
    assert len(list((tmp_path / "cases").iterdir())) == len(report.results)
