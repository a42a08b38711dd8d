"""A real ``redis-server`` for tests, on a free loopback port, with nothing persisted.

- :func:`running_redis` starts ``redis-server --port P --bind 127.0.0.1 --save ''
  --appendonly no``, waits until it answers ``PING`` and yields a :class:`RedisServer`;
  on exit it terminates the process (killing it only if it does not stop in time).
- :meth:`RedisServer.stop` and :meth:`RedisServer.start` restart it on the same port, for
  tests of a store outage (an empty Redis comes back: nothing was saved).
- Tests that need it skip with a clear reason when ``redis-server`` is not installed
  (``.ci/run`` installs the Debian package).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

from support.servers import free_port

__all__ = ["REDIS_SERVER", "RedisServer", "redis_fixture", "running_redis", "save_snapshot"]

REDIS_SERVER = shutil.which("redis-server")


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port``."""

    def __init__(self, port: int, folder: str) -> None:
        self.port = port
        self.folder = folder
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.folder,
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not _ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:  # pragma: no cover
                process.kill()
                process.wait(timeout)


@contextlib.contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A fresh ``redis-server`` on a free loopback port for the ``with`` block."""
    if REDIS_SERVER is None:
        import pytest

        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="evalport-redis-") as folder:
        server = RedisServer(free_port(), folder)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def redis_fixture() -> Iterator[RedisServer]:
    """Body of a session-scoped ``redis_server`` fixture (import it into a conftest)."""
    with running_redis() as server:
        yield server


def save_snapshot(server: RedisServer) -> None:
    """``SAVE`` now (automatic snapshots are off), so a restart comes back with this data."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"SAVE\r\n")
        assert sock.recv(64).startswith(b"+OK")
