"""Real runs for the ``evalport view`` tests, and the viewer as a real process.

``make_runs`` runs ``evalport run`` on the example suite twice, as ``make demo`` does:
against the example agent (``passing``) and against its regressed twin (``regressed``,
three cases fail), both in-process (``--local``) with two trials per case.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from support.servers import free_port, running_process

ROOT = Path(__file__).resolve().parents[3]
EVALPORT = str(Path(sys.executable).with_name("evalport"))
EVALS = str(ROOT / "examples" / "evals")
AGENTS = {
    "passing": str(ROOT / "examples" / "support_agent.py") + ":agent",
    "regressed": str(ROOT / "examples" / "support_agent_regressed.py") + ":agent",
}


def make_runs(folder: Path) -> dict[str, Path]:
    """The two run folders under ``folder`` (the regressed one is the newer)."""
    made = {}
    for name, agent in AGENTS.items():
        out = folder / name
        done = subprocess.run(
            [EVALPORT, "run", EVALS, "--local", agent, "--repeat", "2", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == (0 if name == "passing" else 1), done.stdout + done.stderr
        made[name] = out
    return made


@contextlib.contextmanager
def viewing(path: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``evalport view path`` on a free loopback port until the block ends; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [EVALPORT, "view", str(path), "--port", str(port), *extra]
    with running_process(command, health_url=url + "/", env=env, timeout=30):
        yield url


def files_and_times(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder`` with its size and modification time."""
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted([folder, *folder.rglob("*")])
    }
