"""``make demo``: serve the example agent, evaluate it over HTTP, write every report, then
show what a regression looks like.

Steps: start ``evalport serve examples/support_agent.py:agent`` on a free loopback port
with a fresh random token; wait for ``/health``; run ``evalport check`` (protocol
conformance); run ``evalport run examples/evals`` over HTTP with repetition, writing the
run folder, JSON, JUnit, Markdown and HTML reports under ``.evalport/demo/`` (or
``$EVALPORT_DEMO_OUT``); stop the server (SIGTERM, a clean drain). Then serve
``examples/support_agent_regressed.py:agent`` (the same agent with a regression: its
status reply no longer calls the order service), run the same suite into
``regressed.json`` and print ``evalport compare results.json regressed.json``.

It exits ``0`` when everything behaved as the demo expects: the check and the first run
pass, the regressed run fails, and ``compare --fail-on-regression`` finds regressions.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("EVALPORT_DEMO_OUT") or ROOT / ".evalport" / "demo").resolve()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, server: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise SystemExit(f"demo: the server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1.0):
                return
        except urllib.error.HTTPError as error:  # 401 without the token: it is up
            error.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"demo: {url} did not answer within {timeout:g} s") from None
            time.sleep(0.1)


# The ``evalport`` command installed beside this interpreter (the venv's script).
EVALPORT = str(Path(sys.executable).with_name("evalport"))


def evalport(*args: str) -> int:
    """Run one ``evalport`` command; returns its exit code."""
    print(f"\n$ evalport {' '.join(args)}", flush=True)
    return subprocess.run([EVALPORT, *args], check=False).returncode


@contextlib.contextmanager
def serving(agent: str) -> Iterator[str]:
    """``evalport serve agent`` on a free loopback port until the block ends; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [EVALPORT, "serve", agent, "--port", str(port), "--log-level", "warning"]
    print(f"\n$ EVALPORT_TOKEN=... evalport serve {agent} --port {port}", flush=True)
    server = subprocess.Popen(command, env=os.environ.copy())
    try:
        wait_until_up(f"{url}/health", server)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        # uvicorn drains, then re-raises SIGTERM: -SIGTERM is its clean exit
        clean = server.returncode in (0, -signal.SIGTERM)
        print("server stopped" + ("" if clean else f" with exit code {server.returncode}"))


def run_suite(url: str, *reports: str) -> int:
    """``evalport run examples/evals`` against ``url`` with repetition."""
    return evalport(
        "run",
        "examples/evals",
        "--target",
        url,
        "--token-env",
        "EVALPORT_TOKEN",
        "--repeat",
        "3",
        "--pass-rate",
        "0.66",
        "--concurrency",
        "8",
        *reports,
    )


def main() -> int:
    os.chdir(ROOT)
    os.environ["EVALPORT_TOKEN"] = secrets.token_urlsafe(24)
    with serving("examples/support_agent.py:agent") as url:
        checked = evalport("check", url, "--token-env", "EVALPORT_TOKEN")
        passed = run_suite(
            url,
            "--out",
            str(OUT / "run"),
            "--json",
            str(OUT / "results.json"),
            "--junit",
            str(OUT / "junit.xml"),
            "--md",
            str(OUT / "summary.md"),
            "--html",
            str(OUT / "report.html"),
        )
    print(f"\nreports in {OUT}: run/ results.json junit.xml summary.md report.html")
    print("\nNow the same suite against a regressed agent (its status reply skips a tool):")
    with serving("examples/support_agent_regressed.py:agent") as url:
        regressed = run_suite(
            url, "--out", str(OUT / "regressed-run"), "--json", str(OUT / "regressed.json")
        )
    compared = evalport(
        "compare", str(OUT / "results.json"), str(OUT / "regressed.json"), "--fail-on-regression"
    )
    expected = {"check": (checked, 0), "run": (passed, 0), "regressed run": (regressed, 1)}
    expected["compare --fail-on-regression"] = (compared, 1)
    wrong = [
        f"{step} exited {got}, not {want}" for step, (got, want) in expected.items() if got != want
    ]
    if wrong:
        print("\ndemo: not as expected: " + "; ".join(wrong))
        return 1
    print(
        "\ndemo: as expected: the agent passed, the regressed agent failed, and compare "
        "named the regressions"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
