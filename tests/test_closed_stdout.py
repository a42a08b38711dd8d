"""A reader that goes away (``evalport run ... | head -1``) makes the command stop printing,
quietly: no BrokenPipe traceback, and the exit code is still the verdict's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SUITE = """\
import asyncio
import os
from pathlib import Path

from evalport.client import eval_case


@eval_case("waits for the reader to leave")
async def waits(ctx):
    gate = Path(os.environ["EVALPORT_TEST_GATE"])
    while not gate.exists():  # the test closed its end of stdout
        await asyncio.sleep(0.01)
    await ctx.send("hi")
    ctx.contains("hello")
"""

AGENT = "async def agent(message):\n    return 'hello'\n"


def run_closing_stdout(tmp_path: Path, *extra: str) -> tuple[int, str]:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "wait_eval.py").write_text(SUITE)
    (tmp_path / "agent.py").write_text(AGENT)
    gate = tmp_path / "gate"
    command = [sys.executable, "-m", "evalport.protocol._cli", "run", "evals"]
    command += ["--local", "agent.py:agent", "--out", "out", *extra]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "EVALPORT_TEST_GATE": str(gate), "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()  # the header line, then the reader goes away
    process.stdout.close()
    gate.touch()
    err = process.stderr.read().decode()
    process.stderr.close()
    return process.wait(timeout=60), err


def test_a_closed_stdout_is_quiet_and_keeps_a_green_exit_code(tmp_path: Path) -> None:
    code, err = run_closing_stdout(tmp_path)
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
    assert code == 0
