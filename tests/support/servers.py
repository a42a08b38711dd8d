"""Real servers for tests: uvicorn in a thread, or any command in a subprocess.

- :func:`running_server` serves an ASGI app with real uvicorn on ``127.0.0.1`` (an
  OS-assigned port, so no race for a free port) in a background thread, yields its base
  URL, and stops it cleanly: no thread, socket or task outlives the ``with`` block.
- :func:`running_process` starts a command (``evalport serve ...``), waits until its
  ``/health`` answers (any HTTP status counts), yields the ``Popen`` and terminates it,
  killing it only if it does not stop in time.
- :func:`free_port` reserves nothing; use it only for subprocesses that must be told a port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import uvicorn

__all__ = ["free_port", "running_process", "running_server", "wait_for_http"]


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running_server(app: Any, *, timeout: float = 10.0, **config: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a loopback port; yields ``http://127.0.0.1:<port>``.

    Extra keyword arguments go to :class:`uvicorn.Config` (``lifespan="off"`` and
    ``log_level="warning"`` are the defaults here).
    """
    settings: dict[str, Any] = {"lifespan": "off", "log_level": "warning", "access_log": False}
    settings.update(config)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, **settings))
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            server.run()
        except BaseException as error:  # pragma: no cover - surfaced below
            failure.append(error)

    thread = threading.Thread(target=serve, name="uvicorn-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if failure or not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(timeout)
            raise RuntimeError(f"uvicorn did not start: {failure or 'timeout'}")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():  # pragma: no cover
            server.force_exit = True
            thread.join(timeout)


def wait_for_http(
    url: str, *, timeout: float = 15.0, process: subprocess.Popen[Any] | None = None
) -> None:
    """Poll ``url`` until any HTTP answer arrives (a 401 counts: the server is up)."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"the process exited with {process.returncode} before {url} answered"
            )
        try:
            with urllib.request.urlopen(url, timeout=1.0):
                return
        except urllib.error.HTTPError as error:
            error.close()
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout} s") from None
            time.sleep(0.05)


@contextlib.contextmanager
def running_process(
    args: Sequence[str],
    *,
    health_url: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float = 15.0,
) -> Iterator[subprocess.Popen[str]]:
    """Run ``args``; wait for ``health_url`` if given; yield the process; stop it (SIGTERM)."""
    environment = {**os.environ, **(env or {})}
    process = subprocess.Popen(
        list(args),
        env=environment,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if health_url is not None:
            wait_for_http(health_url, timeout=timeout, process=process)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:  # pragma: no cover
                process.kill()
                process.wait(timeout)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
