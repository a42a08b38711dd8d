"""``evalport serve`` checks every setting before it starts: a bad one is exit 2 and one line.

The values are those a probe got past start-up (issue 16 item 8): a TTL of nan, inf or
1e12 started and then answered 500 to every create, ``--turn-timeout inf`` ended in an
OverflowError traceback, ``nan`` meant no timeout, ``--port 70000`` bound another port.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from evalport.protocol._cli import main as cli_main
from evalport.server import Limits
from serverkit import TOKEN

ROOT = Path(__file__).parents[2]
TARGET = "examples/support_agent.py:agent"

BAD = [
    ("--session-ttl", "nan"),
    ("--session-ttl", "inf"),
    ("--session-ttl", "1e12"),
    ("--session-ttl", "0"),
    ("--turn-timeout", "inf"),
    ("--turn-timeout", "nan"),
    ("--turn-timeout", "-1"),
    ("--turn-timeout", "1e12"),
    ("--lease-ttl", "nan"),
    ("--lease-ttl", "inf"),
    ("--port", "70000"),
    ("--port", "0"),
    ("--max-sessions", "0"),
    ("--max-body-bytes", "10"),
    ("--turn-threads", "0"),
    ("--max-run-bytes", "100"),
]


@pytest.mark.parametrize(("option", "value"), BAD)
def test_a_bad_setting_is_exit_2_and_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    monkeypatch.chdir(ROOT)
    assert cli_main(["serve", TARGET, option, value]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("evalport serve: ")
    assert option in lines[0]
    assert " not " in lines[0]  # says what it got


@pytest.mark.parametrize(("option", "value"), [("--turn-timeout", "inf"), ("--port", "70000")])
def test_the_real_command_exits_2_with_one_line(option: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evalport.protocol._cli", "serve", TARGET, option, value],
        cwd=ROOT,
        env={"EVALPORT_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert option in done.stderr
    assert "Traceback" not in done.stderr


def test_zero_turn_timeout_still_means_no_timeout() -> None:
    from argparse import ArgumentParser

    from evalport.server._cli import add_arguments, limits_from

    parser = ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([TARGET, "--turn-timeout", "0", "--turn-threads", "3"])
    limits = limits_from(args)
    assert limits.turn_timeout is None
    assert limits.turn_threads == 3


@pytest.mark.parametrize(
    "values",
    [
        {"session_ttl": float("nan")},
        {"turn_timeout": float("inf")},
        {"lease_ttl": 1e12},
        {"max_run_bytes": 1.5},
        {"turn_threads": 0},
    ],
)
def test_limits_refuse_the_same_values_in_code(values: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(values))):
        Limits(**values)  # type: ignore[arg-type]
