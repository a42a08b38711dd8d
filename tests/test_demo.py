"""``make demo`` end to end: the script serves the example agent with ``evalport serve``,
evaluates it over HTTP and writes every report; it must exit 0 and stop the server."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.e2e
def test_demo_serves_evaluates_and_reports(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "EVALPORT_DEMO_OUT": str(tmp_path)},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "11 of 11 checks passed" in output
    assert "8 passed, 0 failed, 0 error, 0 skipped, 0 scored" in output
    assert "server stopped\n" in output  # a clean stop, no exit code to report
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["provenance"]["repeat"] == 3
    assert summary["provenance"]["target"]["agent_name"] == "support-agent"
    cases = {case["case_id"]: case for case in summary["cases"]}
    assert {"support_eval::large_refund_rejected", "support_eval::order_status[shipped]"} <= set(
        cases
    )
    assert all(case["passes"] == 3 and case["required"] == 2 for case in cases.values())
    assert len(ET.parse(tmp_path / "junit.xml").getroot().findall(".//testcase")) == len(cases)
    assert (tmp_path / "run" / "summary.json").is_file() and (
        tmp_path / "run" / "results.jsonl"
    ).is_file()
    html = (tmp_path / "report.html").read_text()
    assert all(case_id in html for case_id in cases)
    assert "## evalport results" in (tmp_path / "summary.md").read_text()
