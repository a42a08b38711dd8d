"""`evalport run` on an eval file with faulted cases against `evalport serve` on real uvicorn:
with --allow-faults the cases pass; without it every case errors, naming the option."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from evalport.protocol._cli import main
from support.servers import free_port, running_process

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
EVALS = ROOT / "examples" / "evals" / "_faults" / "support_faults_eval.py"


def serve(*extra: str) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "evalport.protocol._cli", "serve", "support_agent.py:agent"]
    args += ["--port", str(port), "--insecure-no-auth", "--log-level", "warning", *extra]
    with running_process(args, health_url=f"{base}/health", cwd=str(ROOT / "examples")):
        yield base


@pytest.fixture
def allowing() -> Iterator[str]:
    yield from serve("--allow-faults")


@pytest.fixture
def refusing() -> Iterator[str]:
    yield from serve()


def test_faulted_cases_pass_against_a_server_that_allows_faults(
    allowing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(EVALS), "--target", allowing, "--json", "out.json"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 passed, 0 failed, 0 error" in out


def test_a_server_without_faults_errors_every_faulted_case_naming_the_option(
    refusing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(EVALS), "--target", refusing, "--json", "out.json"])
    out = capsys.readouterr().out
    assert code != 0
    assert "0 passed, 0 failed, 2 error" in out
    assert "--allow-faults" in out and "FaultsUnsupported" in out
