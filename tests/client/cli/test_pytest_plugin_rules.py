"""The pytest plugin applies ``evalport run``'s rules to a test: a test that checked
nothing fails (``AssertedNothing``), a turn the agent failed fails it unless it asserted
``failed()``, and failed soft assertions are listed in pytest's summary."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SUITE = """
async def test_checks_nothing(evalport):
    await evalport.send("Where is my order A1049?")


async def test_a_plain_assert_is_a_check(evalport):
    turn = await evalport.send("Where is my order A1049?")
    assert "A1049" in turn.reply


async def test_soft_failure(evalport):
    await evalport.send("Where is my order A1049?")
    evalport.contains("shipped")
    evalport.contains("teleported").soft()


async def test_broken_turn(evalport):
    await evalport.send("break")
    evalport.not_called_tool("refund_order")


async def test_expected_failure(evalport):
    await evalport.send("break")
    evalport.failed()
"""

AGENT = """
async def agent(message):
    if message == "break":
        raise RuntimeError("the model client is misconfigured")
    return "Order A1049 is shipped with DHL."
"""


LOCAL = ("--evalport-local", "rules_agent:agent")


def test_the_plugin_applies_the_rules_of_evalport_run(tmp_path: Path) -> None:
    (tmp_path / "test_agent_evals.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "rules_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *LOCAL],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert "FAILED test_agent_evals.py::test_checks_nothing" in output, output
    assert "AssertedNothing" in output
    assert "PASSED test_agent_evals.py::test_a_plain_assert_is_a_check" in output, output
    assert "PASSED test_agent_evals.py::test_soft_failure" in output, output
    assert "FAILED test_agent_evals.py::test_broken_turn" in output
    assert "turn_failed: turn 1 failed: agent error RuntimeError" in output
    assert "PASSED test_agent_evals.py::test_expected_failure" in output
    soft = output.split("evalport soft failures")[1]
    assert "test_agent_evals.py::test_soft_failure" in soft
    assert "contains('teleported')" in soft
