"""A run whose turns streamed: the sample run (:mod:`report_data`) with times to first
token on two of its cases, for the tests of every report that shows them."""

from __future__ import annotations

import msgspec
from evalport.client import TrialResult, TurnTiming
from evalport.client.reports import RunReport, summarize, summarize_case
from report_data import sample_report

STREAMED = "evals/test_support.py::refund_ok"
DENIED = "evals/test_support.py::refund_denied"
REPLAYED = "evals/test_support.py::tone"  # its one trial came from the run cache

# refund_ok: five trials of two turns; turn 2 of trial 1 did not stream (no first token)
FIRST_TOKENS = {0: (0.1, 0.3), 1: (0.2, None), 2: (0.5, 0.2), 3: (0.3, 0.1), 4: (0.2, 0.3)}
# sorted: 0.1 0.1 0.2 0.2 0.2 0.3 0.3 0.3 0.5; p50 the 5th, p95 at rank 7.6: 0.3 + 0.6 * 0.2
P50, P95, MEAN = 0.2, 0.42, 2.2 / 9


def timed(trial: TrialResult, times: tuple[float | None, ...]) -> TrialResult:
    timings = [
        TurnTiming(
            turn=turn,
            total=1.0,
            first_event=None if first is None else first / 2,
            first_token=first,
        )
        for turn, first in enumerate(times, start=1)
    ]
    return msgspec.structs.replace(trial, timings=timings)


def timed_report(scale: float = 1.0, denied: tuple[float, ...] = (0.8,)) -> RunReport:
    """The sample run with the turns of refund_ok timed (times ``scale``), each trial of
    refund_denied with one turn, and nothing else streamed."""
    report = sample_report()
    results = []
    for result in report.results:
        if result.case_id == STREAMED:
            trials = [
                timed(
                    trial,
                    tuple(None if t is None else t * scale for t in FIRST_TOKENS[trial.trial]),
                )
                for trial in result.trials
            ]
            result = msgspec.structs.replace(result, trials=trials)
        elif result.case_id == DENIED:
            trials = [timed(trial, (denied[0],)) for trial in result.trials]
            result = msgspec.structs.replace(result, trials=trials)
        results.append(result)
    summary = summarize(
        [summarize_case(result) for result in results],
        report.summary.provenance,
        duration=report.summary.duration,
    )
    return RunReport(summary=summary, results=results)
