"""A run that claims more turns than it holds (a server may say 1e12) is rendered from what
it holds: every transcript ends at once (`evalport run --html` never ended)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from evalport.client.judges import render_transcript
from evalport.client.reports import html_report
from evalport.client.reports._transcript import transcript_lines
from evalport.protocol import decode_run
from report_data import sample_report

CLAIMED = 10**12


def _ends(work: Callable[[], object], seconds: float = 10.0) -> object:
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(work()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"still rendering after {seconds} s"
    return done[0]


def test_every_transcript_renders_what_the_run_holds_not_what_it_claims() -> None:
    report = sample_report()
    trial = next(t for r in report.results for t in r.trials if t.run is not None)
    data = dict(trial.run)
    data["steps"] = [dict(step) for step in data["steps"]]
    data["turns"] = CLAIMED
    data["steps"][0]["turn"] = CLAIMED  # a step of a far turn is shown, once
    trial.run = data
    page = _ends(lambda: html_report(report))
    assert isinstance(page, str) and "message 1" in page
    lines = _ends(lambda: transcript_lines(trial))
    assert isinstance(lines, list) and lines[0] == "user:  message 1"
    run = decode_run(json.dumps(data).encode())
    judged = _ends(lambda: render_transcript(run))
    assert isinstance(judged, str) and "message 1" in judged
