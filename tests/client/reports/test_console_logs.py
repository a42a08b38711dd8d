"""``-v`` shows what a case logged with ``ctx.log()`` and its recorded output (issue 40
item 11; Neuron's verbose console shows an item's output)."""

from __future__ import annotations

from evalport.client import CaseResult, TrialResult, Verdict
from evalport.client.reports._console import detail_lines


def test_verbose_details_print_each_trials_logs_and_output() -> None:
    trial = TrialResult(
        case_id="greets",
        verdict=Verdict.PASSED,
        logs=["asked about A1", 'tool said {"status": "late"}'],
        output="Hello! How can I help?",
    )
    lines = detail_lines(CaseResult(case_id="greets", trials=[trial]))
    assert "    log: asked about A1" in lines
    assert '    log: tool said {"status": "late"}' in lines
    assert "    output: Hello! How can I help?" in lines
