"""``evalport run`` console verbosity and ``--json -``: the real CLI against the example
agent in-process (--local), on the example suite and on a suite whose eval code prints."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from evalport.protocol._cli import main

ROOT = Path(__file__).resolve().parents[3]
EVALS = str(ROOT / "examples" / "evals")
AGENT = str(ROOT / "examples" / "support_agent.py") + ":agent"
REGRESSED = str(ROOT / "examples" / "support_agent_regressed.py") + ":agent"

NOISY = """
from evalport.client import eval_case


@eval_case("status of A1049")
async def status(ctx):
    print("eval code says hello")
    await ctx.send("where is order A1049?")
    ctx.contains("shipped")
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def line_of(path: Path, text: str) -> str:
    """``path:line`` of the first line holding ``text`` (as a report names a failed
    assertion: here an absolute path, the run's folder being elsewhere)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    number = next(index for index, line in enumerate(lines, 1) if text in line)
    return f"{path.resolve()}:{number}"


def test_json_dash_writes_the_summary_and_nothing_else_to_stdout(workdir, capsys):
    code = main(["run", EVALS, "--local", REGRESSED, "--out", "run", "--json", "-"])
    captured = capsys.readouterr()
    assert code == 1
    summary = json.loads(captured.out)  # the whole of stdout is one JSON document
    assert summary["counts"]["failed"] == 4 and summary["total"] == 9
    assert summary == json.loads((workdir / "run" / "summary.json").read_text())
    # the console report and the run folder line moved to stderr
    assert "FAIL   support_eval::order_status[shipped]" in captured.err
    assert "run folder: run" in captured.err


def test_json_dash_through_a_pipe_with_printing_eval_code(workdir):
    (workdir / "evals").mkdir()
    (workdir / "evals" / "noisy_eval.py").write_text(textwrap.dedent(NOISY))
    command = [sys.executable, "-m", "evalport.protocol._cli", "run", "evals", "--local", AGENT]
    done = subprocess.run(
        [*command, "--out", "run", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["passed"] == 1
    assert "eval code says hello" in done.stderr
    assert "PASS   noisy_eval::status" in done.stderr


def test_quiet_prints_only_the_closing_summary(workdir, capsys):
    assert main(["run", EVALS, "--local", AGENT, "--out", "run", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pass rate 100% of cases, 100% of trials; trial time mean ")
    assert lines[-1].startswith("9 passed, 0 failed, 0 error, 0 skipped, 0 scored — 9 cases")
    text = "\n".join(lines)
    for noise in ("evalport: 9 cases", "PASS   ", "run folder:"):
        assert noise not in text
    assert (workdir / "run" / "summary.json").exists()  # reports are still written


def test_quiet_and_verbose_together_are_a_usage_error(workdir, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["run", EVALS, "--local", AGENT, "-q", "-v"])
    assert exited.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_verbose_prints_every_assertion_and_the_transcript_of_failed_trials(workdir, capsys):
    assert main(["run", EVALS, "--local", REGRESSED, "--out", "run", "-v"]) == 1
    out = capsys.readouterr().out
    shipped = out[out.index("CASE   support_eval::order_status[shipped]") :]
    shipped = shipped[: shipped.index("CASE   ", 1)]
    assert "  trial 0: failed (" in shipped
    assert "    PASSED        gate 1.00/1.00 contains('shipped')" in shipped
    assert (
        "    FAILED        gate 0.00/1.00 called_tool(order_status, "
        "args ⊆ {order_id=\"A1049\"}): 'order_status' was never called"
    ) in shipped
    assert "      user:  Hi, where is my order A1049?" in shipped
    assert "      agent: Order A1049 is shipped with DHL." in shipped
    assert "      status completed, stopped: completed" in shipped
    receipt = out[out.index("CASE   support_eval::receipt_status") :]
    assert "      user:  Where is the order on this receipt?" in receipt
    assert "      user:  [image image/png, 547 bytes]" in receipt
    # passed trials list their assertions but no transcript: four failed trials, four
    assert out.count("    transcript:") == 4
    small = out[out.index("CASE   support_eval::small_refund") :]
    assert "PASSED        gate 1.00/1.00 event_seen(refund.proposed)" in small


def test_a_failing_case_is_named_once_with_its_reasons(workdir, capsys):
    assert main(["run", EVALS, "--local", REGRESSED, "--out", "run"]) == 1
    out = capsys.readouterr().out
    # A1049 fails twice: order_status[shipped] and receipt_status (the receipt's order)
    for order, cases in (("A1049", 2), ("A1050", 1), ("A1051", 1)):
        assert out.count(f"{order}\"}}): 'order_status' was never called") == cases, out
    lines = out.splitlines()
    first = lines.index("FAIL   support_eval::order_status[shipped] (0/1 passed, needed 1)")
    assert lines[first + 1] == (
        '         called_tool(order_status, args ⊆ {order_id="A1049"}): '
        "'order_status' was never called; no tool was called"
        f" (at {line_of(Path(EVALS) / 'support_eval.py', 'ctx.called_tool(')})"
    )
    assert sum("support_eval::order_status[shipped]" in line for line in lines) == 1
    assert "4 failed" in lines[-2]
