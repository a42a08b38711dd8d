"""``compare`` calls a case slower only when the difference is significant for the trials
it has, names both of its thresholds, and a removed case that passed is a regression for
``--fail-on-regression``."""

from __future__ import annotations

import msgspec
from evalport.client._core._stats import rank_sum_greater
from evalport.client.reports import RunReport, compare, summarize, summarize_case
from evalport.protocol._cli import main
from first_token_data import DENIED, STREAMED, timed, timed_report
from report_data import sample_report


def one_trial(first_token: float) -> RunReport:
    """The sample run where refund_ok had a single trial, one streamed turn."""
    report = sample_report()
    results = []
    for result in report.results:
        if result.case_id == STREAMED:
            result = msgspec.structs.replace(
                result, trials=[timed(result.trials[0], (first_token,))]
            )
        results.append(result)
    summary = summarize([summarize_case(result) for result in results], report.summary.provenance)
    return RunReport(summary=summary, results=results)


def test_one_trial_each_is_never_significant_so_never_slower() -> None:
    comparison = compare(one_trial(0.1).summary, one_trial(0.9).summary)
    assert [slow.case_id for slow in comparison.slower] == []


def test_a_shift_the_trials_support_is_slower_with_its_p_value() -> None:
    comparison = compare(timed_report().summary, timed_report(denied=(2.0,)).summary)
    (slow,) = comparison.slower  # five trials at 0.8 s, then five at 2.0 s
    assert slow.case_id == DENIED and slow.p_value < 0.05
    assert "p95 up more than 20% and 50 ms, rank-sum p < 0.05" in comparison.lines()[0]


def test_the_rank_sum_test_is_exact_for_small_samples() -> None:
    assert rank_sum_greater([0.8] * 5, [2.0] * 5) == 1 / 252  # one arrangement of C(10, 5)
    assert rank_sum_greater([0.1], [0.9]) == 0.5
    assert rank_sum_greater([0.9, 1.0], [0.1, 0.2]) == 1.0
    assert rank_sum_greater([], [1.0]) == 1.0


def without(report: RunReport, case_id: str) -> RunReport:
    results = [result for result in report.results if result.case_id != case_id]
    summary = summarize([summarize_case(r) for r in results], report.summary.provenance)
    return RunReport(summary=summary, results=results)


def test_a_removed_case_that_passed_fails_on_regression(tmp_path, capsys) -> None:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_bytes(msgspec.json.encode(timed_report().summary))
    new.write_bytes(msgspec.json.encode(without(timed_report(), STREAMED).summary))
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 1
    assert f"removed    {STREAMED} (it passed)" in capsys.readouterr().out
    # a removed case that did not pass is no regression
    new.write_bytes(msgspec.json.encode(without(timed_report(), DENIED).summary))
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 0
