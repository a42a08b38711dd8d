"""The example evals (``make demo``'s suite) exercise token and step budgets: the example
agent records an estimated usage per model step, so every case costs target tokens, the
HTML report shows them, and a budget a case sets is checked against them."""

import json
import re
from pathlib import Path

from evalport.protocol._cli import main

ROOT = Path(__file__).resolve().parents[3]
AGENT = f"{ROOT / 'examples' / 'support_agent.py'}:agent"


def test_example_evals_report_target_tokens_and_hold_their_budgets(tmp_path, capsys) -> None:
    code = main(
        [
            "run",
            str(ROOT / "examples" / "evals"),
            "--local",
            AGENT,
            "--json",
            str(tmp_path / "r.json"),
            "--html",
            str(tmp_path / "r.html"),
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0, capsys.readouterr().out
    summary = json.loads((tmp_path / "r.json").read_text())
    cases = {case["case_id"]: case for case in summary["cases"]}
    assert all(case["target_tokens"] > 0 for case in cases.values()), cases
    assert summary["target_tokens"] == sum(case["target_tokens"] for case in cases.values())
    assert cases["support_eval::small_refund"]["target_tokens"] == 357  # within its 400
    html = (tmp_path / "r.html").read_text()
    assert f"tokens: target {summary['target_tokens']}," in html
    assert re.search(r"target tokens: input \d+, output \d+;", html)
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    refund = next(json.loads(line) for line in lines if "::small_refund" in line)
    budgets = {a["name"]: (a["passed"], a["context"]) for a in refund["trials"][0]["assertions"]}
    assert budgets["max_steps(4)"] == (True, {"steps": 4})
    assert budgets["total_tokens_at_most(400)"] == (True, {"tokens": 357})
    assert budgets["tokens_at_most(output, 80)"] == (True, {"tokens": 65})
