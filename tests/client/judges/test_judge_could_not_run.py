"""A judge that could not run counts one way whatever the cause (none configured, its key
variable unset, its server refusing or closing connections): the trial is an ``error``,
counted under errors, with a message naming what to set. A judge server that is down
stops costing retries after a few connection failures in a row, across the run's trials.
Runs ``evalport run`` on the example agent with real sockets on loopback."""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from evalport.client.judges._chat import BREAKER_FAILURES
from evalport.protocol._cli import main

ROOT = Path(__file__).resolve().parents[3]
OUTPUTS = ["--json", "out.json", "--out", "run", "--pass-rate", "1.0"]
AGENT = f"{ROOT / 'examples' / 'support_agent.py'}:agent"

SUITE = """
from evalport.client import eval_case


@eval_case("the status is right and helpful")
async def status(ctx):
    await ctx.send("Where is my order A1049?")
    ctx.contains("shipped")
    ctx.judge().helpfulness()  # soft, the default
"""


@contextmanager
def refusing_port() -> Iterator[str]:
    """A loopback port bound but not listening: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@contextmanager
def closing_server() -> Iterator[tuple[str, list[int]]]:
    """A loopback server that accepts each connection and closes it at once, counting."""
    accepted: list[int] = []
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)


def run_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, judge: str, repeat: int = 1
) -> tuple[int, dict, str]:
    for name in [n for n in os.environ if n.startswith("EVALPORT_JUDGE_")]:
        monkeypatch.delenv(name)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "status_eval.py").write_text(textwrap.dedent(SUITE))
    table = f"\n[tool.evalport.judge]\n{judge}" if judge else ""
    (tmp_path / "pyproject.toml").write_text(f"[tool.evalport]\nrepeat = {repeat}\n{table}")
    monkeypatch.chdir(tmp_path)
    code = main(["run", "evals", "--local", AGENT, "--concurrency", "1", *OUTPUTS])
    output = capsys.readouterr()
    summary = json.loads((tmp_path / "out.json").read_text())
    return code, summary, output.out + output.err


def assert_one_error(code: int, summary: dict, output: str) -> str:
    """The case is an error in the verdict and the counts; returns its judge message."""
    assert code == 1, output
    counts = summary["counts"]
    assert (counts["error"], counts["failed"], counts["skipped"], counts["passed"]) == (
        1,
        0,
        0,
        0,
    ), counts
    (case,) = summary["cases"]
    assert case["verdict"] == "error"
    lines = (Path("run") / "results.jsonl").read_text().splitlines()
    trials = json.loads(lines[0])["trials"]
    messages = {
        result["message"]
        for trial in trials
        for result in trial["assertions"]
        if result["name"].startswith("judge.")
    }
    assert all(trial["verdict"] == "error" for trial in trials)
    (message,) = messages
    assert message.startswith("judge could not run: ")
    assert message in output  # the console shows why
    assert "api_key_env=None" not in output and "skipped" not in message
    return message


def test_no_judge_configured(tmp_path, monkeypatch, capsys) -> None:
    message = assert_one_error(*run_suite(tmp_path, monkeypatch, capsys, ""))
    assert "EVALPORT_JUDGE_MODEL" in message and "[tool.evalport.judge]" in message


def test_the_key_variable_is_not_set(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("EVX_JUDGE_KEY", raising=False)
    with refusing_port() as url:
        judge = f'model = "m"\nbase-url = "{url}"\napi-key-env = "EVX_JUDGE_KEY"\n'
        message = assert_one_error(*run_suite(tmp_path, monkeypatch, capsys, judge))
    assert "EVX_JUDGE_KEY is not set" in message
    assert "api-key-env" in message and "EVALPORT_JUDGE_API_KEY_ENV" in message


@pytest.mark.e2e
def test_a_refusing_server_stops_costing_retries(tmp_path, monkeypatch, capsys) -> None:
    with refusing_port() as url:
        judge = f'model = "m"\nbase-url = "{url}"\napi-key-env = ""\n'
        started = time.monotonic()
        message = assert_one_error(*run_suite(tmp_path, monkeypatch, capsys, judge, repeat=4))
        elapsed = time.monotonic() - started
    # Without the breaker: 4 trials x 5 attempts with backoff 0.5, 1, 2, 4 s: over 30 s.
    assert elapsed < 10, f"{elapsed:.1f} s"
    assert "is down" in message and "base-url" in message and "EVALPORT_JUDGE_BASE_URL" in message


@pytest.mark.e2e
def test_a_closing_server_is_asked_only_until_the_breaker_opens(
    tmp_path, monkeypatch, capsys
) -> None:
    with closing_server() as (url, accepted):
        judge = f'model = "m"\nbase-url = "{url}"\napi-key-env = ""\n'
        message = assert_one_error(*run_suite(tmp_path, monkeypatch, capsys, judge, repeat=4))
    assert len(accepted) == BREAKER_FAILURES  # not 4 trials x 5 attempts
    assert "is down" in message
