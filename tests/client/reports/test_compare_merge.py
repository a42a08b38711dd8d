import msgspec
import pytest
from evalport.client._core._config import ConfigError
from evalport.client.reports import CaseSummary, compare, merge
from report_data import sample_report


def _with(summary, case_id, **changes):
    cases = [
        msgspec.structs.replace(case, **changes) if case.case_id.endswith(case_id) else case
        for case in summary.cases
    ]
    return msgspec.structs.replace(summary, cases=cases)


def test_flips_rate_changes_and_significance():
    base = sample_report().summary
    new = _with(base, "refund_ok", verdict="failed", passes=0, trial_verdicts=["failed"] * 5)
    new = _with(new, "refund_denied", passes=3)  # same verdict, rate 2/5 -> 3/5
    new = _with(new, "tone", verdict="passed")
    new.cases.append(
        CaseSummary(case_id="evals/new.py::added", verdict="passed", samples=1, passes=1)
    )
    new.cases = [c for c in new.cases if not c.case_id.endswith("lookup")]
    comparison = compare(base, new)
    kinds = {change.case_id.split("::")[1]: change.kind for change in comparison.changes}
    assert kinds == {"refund_ok": "regression", "refund_denied": "rate", "tone": "fix"}
    regression = comparison.regressions[0]
    assert regression.p_value == pytest.approx(0.0476, abs=1e-4)  # Fisher 4/5 vs 0/5
    assert comparison.significant(regression)
    assert comparison.added == ["evals/new.py::added"]
    assert comparison.removed == ["evals/test_support.py::lookup"]
    assert comparison.p_value == 1.0  # one regression, one fix
    text = "\n".join(comparison.lines())
    assert (
        "regression evals/test_support.py::refund_ok: passed -> failed, 4/5 -> 0/5 (p=0.0476) *"
        in text
    )


def test_identical_runs_have_no_changes():
    summary = sample_report().summary
    comparison = compare(summary, summary)
    assert comparison.changes == [] and comparison.p_value == 1.0


def test_merge_joins_shards_and_refuses_overlaps():
    whole = sample_report().summary
    first = msgspec.structs.replace(whole, cases=whole.cases[:2])
    second = msgspec.structs.replace(whole, cases=whole.cases[2:])
    second.provenance = msgspec.structs.replace(whole.provenance, started_at="2026-11-29T09:00:00Z")
    merged = merge([first, second])
    assert [c.case_id for c in merged.cases] == [c.case_id for c in whole.cases]
    assert merged.counts == whole.counts and merged.trials == whole.trials
    assert merged.provenance.started_at == "2026-11-29T09:00:00Z"
    with pytest.raises(ConfigError, match="appears in two shards"):
        merge([whole, first])
    with pytest.raises(ConfigError, match="at least one"):
        merge([])
