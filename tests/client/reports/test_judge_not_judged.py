"""A judge that could not run reads "not judged" in the HTML report, never "null"."""

from evalport.client import JudgeRecord, TrialResult
from evalport.client.reports._html_trial import _judges


def test_a_judge_that_failed_is_not_judged_not_null() -> None:
    trial = TrialResult(
        case_id="c",
        trial=0,
        verdict="error",
        judges=[JudgeRecord(criterion="helpfulness", score=None, error="judge down")],
    )
    row = _judges(trial)
    assert "<td>not judged</td>" in row and "null" not in row
    assert "judge down" in row
