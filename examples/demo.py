"""``make demo``: serve the example agent, evaluate it over HTTP, write every report.

Steps: start ``evalport serve examples/support_agent.py:agent`` on a free loopback port
with a fresh random token; wait for ``/health``; run ``evalport check`` (protocol
conformance); run ``evalport run examples/evals`` over HTTP with repetition, writing the
run folder, JSON, JUnit, Markdown and HTML reports under ``.evalport/demo/`` (or
``$EVALPORT_DEMO_OUT``); stop the
server (SIGTERM, a clean drain); exit with the run's exit code.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
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


def main() -> int:
    os.chdir(ROOT)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    os.environ["EVALPORT_TOKEN"] = secrets.token_urlsafe(24)
    command = [
        EVALPORT,
        "serve",
        "examples/support_agent.py:agent",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    print(f"$ EVALPORT_TOKEN=... evalport serve examples/support_agent.py:agent --port {port}")
    server = subprocess.Popen(command, env=os.environ.copy())
    try:
        wait_until_up(f"{url}/health", server)
        checked = evalport("check", url, "--token-env", "EVALPORT_TOKEN")
        code = evalport(
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
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print(f"\nreports in {OUT}: run/ results.json junit.xml summary.md report.html")
    # uvicorn drains, then re-raises SIGTERM: -SIGTERM is its clean exit
    clean = server.returncode in (0, -signal.SIGTERM)
    print("server stopped" + ("" if clean else f" with exit code {server.returncode}"))
    return code or (1 if checked else 0)


if __name__ == "__main__":
    raise SystemExit(main())
