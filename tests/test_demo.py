"""``make demo`` end to end, as a newcomer gets it: a venv holding the wheel and only the
``server`` and ``client`` extras' dependencies runs the script, which serves the example
agent with ``evalport serve``, evaluates it over HTTP, writes every report, then serves
the regressed agent, runs the same suite and prints ``evalport compare``; it must exit 0
and stop both servers. The Makefile keeps the demo's venv apart from the dev one."""

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.venvs import build_wheel, clean_env, make_venv

ROOT = Path(__file__).resolve().parent.parent
DEMO_DEPS = ["msgspec", "starlette", "uvicorn", "httpx", "httpx-sse", "pyyaml", "jsonschema"]


def make_dry_run(target: str) -> str:
    """The commands ``make target`` would run from scratch (``-n -B``: print them all)."""
    done = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_the_demo_installs_only_its_extras_in_a_venv_of_its_own() -> None:
    demo, test = make_dry_run("demo"), make_dry_run("test")
    assert "-m venv .venv-demo" in demo and "install -q --disable-pip-version-check -e" in demo
    assert "'.[server,client]'" in demo and "dev" not in demo, demo
    assert ".venv-demo/bin/python examples/demo.py" in demo
    # test keeps the toolchain
    assert ".venv-demo" not in test and "'.[all,dev,docs]'" in test, test


@pytest.mark.e2e
@pytest.mark.venv
def test_demo_serves_evaluates_reports_and_shows_a_regression(tmp_path):
    python = make_venv(tmp_path, build_wheel(tmp_path / "wheel"), DEMO_DEPS)
    out = tmp_path / "out"
    done = subprocess.run(
        [str(python), str(ROOT / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=150,
        env=clean_env(EVALPORT_DEMO_OUT=str(out)),
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "15 passed, 0 failed, 0 skipped" in output
    assert "9 passed, 0 failed, 0 error, 0 skipped, 0 scored" in output
    assert "5 passed, 4 failed, 0 error, 0 skipped, 0 scored" in output  # the regressed agent
    assert output.count("server stopped\n") == 2  # clean stops, no exit code to report
    assert "4 regressed, 0 fixed" in output
    for row in ("shipped", "delivered", "processing"):
        assert f"regression support_eval::order_status[{row}]: passed -> failed" in output
    assert "regression support_eval::receipt_status: passed -> failed" in output
    assert "demo: as expected" in output and "warning" not in output.lower()
    summary = json.loads((out / "results.json").read_text())
    assert summary["provenance"]["repeat"] == 3
    assert summary["provenance"]["target"]["agent_name"] == "support-agent"
    cases = {case["case_id"]: case for case in summary["cases"]}
    assert {"support_eval::large_refund_rejected", "support_eval::order_status[shipped]"} <= set(
        cases
    )
    assert all(case["passes"] == 3 and case["required"] == 2 for case in cases.values())
    regressed = json.loads((out / "regressed.json").read_text())
    assert regressed["counts"]["failed"] == 4
    assert len(ET.parse(out / "junit.xml").getroot().findall(".//testcase")) == len(cases)
    assert (out / "run" / "summary.json").is_file() and (out / "run" / "results.jsonl").is_file()
    html = (out / "report.html").read_text()
    assert all(case_id in html for case_id in cases)
    assert "## evalport results" in (out / "summary.md").read_text()
