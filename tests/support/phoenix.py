"""A real Arize Phoenix server for the tracing tests (as :mod:`tests.support.redis` starts
redis-server).

- Phoenix lives in a venv of its own (it pins its own OpenTelemetry and web stack):
  ``$EVALPORT_PHOENIX`` names its ``phoenix`` executable (or the venv's ``python``), else
  ``.venv-phoenix/`` in the repository root is used (``.ci/run`` prepares it). It runs
  through ``phoenix_loopback.py`` with the ``python`` next to that executable.
- Without it the tests skip, unless ``EVALPORT_REQUIRE_PHOENIX=1`` (CI) makes that a failure.
- :func:`running_phoenix` starts it on free ports with a temporary working directory and
  telemetry off, waits until it answers, and yields a :class:`Phoenix` (base URL, start-up
  time, process id). Every port binds 127.0.0.1 only: Phoenix honours ``PHOENIX_HOST`` for
  its HTTP port (OTLP/HTTP ingest, UI and REST API), but its gRPC receiver, which the tests
  do not use, binds ``[::]`` whatever ``PHOENIX_HOST`` says (Phoenix 20.26), so the
  launcher makes the servers of the public ``grpc.aio.server`` factory bind 127.0.0.1.
- :func:`listening_addresses` lists the addresses a process listens on (Linux ``/proc``),
  so the tests can check that none is outside loopback.
- :func:`spans` reads a project's spans back through Phoenix's REST API.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest

from .servers import free_port

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 300.0  # Phoenix migrates its database at start: 20-140 s on a busy machine
LAUNCHER = Path(__file__).with_name("phoenix_loopback.py")


class Phoenix(NamedTuple):
    url: str
    grpc_port: int
    startup: float  # seconds until it answered
    pid: int


def phoenix_command() -> list[str] | None:
    """The command that runs Phoenix, or ``None`` when it is not installed."""
    named = os.environ.get("EVALPORT_PHOENIX")
    candidates = [Path(named)] if named else [ROOT / ".venv-phoenix" / "bin" / "phoenix"]
    for path in candidates:
        python = path if path.name.startswith("python") else path.with_name("python")
        if path.exists() and python.exists():
            return [str(python), "-I", str(LAUNCHER)]  # -I: tests/support/phoenix.py is not phoenix
    return None


def require_phoenix() -> list[str]:
    command = phoenix_command()
    if command is not None:
        return command
    message = (
        "Arize Phoenix is not installed: set EVALPORT_PHOENIX=/path/to/venv/bin/phoenix or "
        "create .venv-phoenix (python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install "
        "arize-phoenix==20.26.1)"
    )
    if os.environ.get("EVALPORT_REQUIRE_PHOENIX") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def running_phoenix() -> Iterator[Phoenix]:
    """Start Phoenix on loopback; yield it once it answers."""
    command = require_phoenix()
    port, grpc_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="evalport-phoenix-") as work:
        env = {
            **os.environ,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(grpc_port),
            "PHOENIX_WORKING_DIR": work,
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        }
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "PHOENIX_COLLECTOR_ENDPOINT"):
            env.pop(name, None)
        log = Path(work) / "phoenix.log"
        started = time.monotonic()
        with log.open("w") as output:
            process = subprocess.Popen(
                command, env=env, stdout=output, stderr=subprocess.STDOUT, cwd=work
            )
        url = f"http://127.0.0.1:{port}"
        try:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"Phoenix exited at start-up:\n{log.read_text()[-3000:]}")
                try:
                    if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() - started > STARTUP_TIMEOUT:
                    raise RuntimeError(
                        f"Phoenix did not answer within {STARTUP_TIMEOUT:g} s:\n"
                        + log.read_text()[-3000:]
                    )
                time.sleep(0.25)
            yield Phoenix(url, grpc_port, time.monotonic() - started, process.pid)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:  # pragma: no cover
                process.kill()
                process.wait(10)


def listening_addresses(pid: int) -> set[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """The (address, port) of every TCP socket process ``pid`` listens on, from
    ``/proc/<pid>/net/tcp`` and ``tcp6`` narrowed to the sockets among its descriptors."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            hex_address, hex_port = fields[1].rsplit(":", 1)
            raw = bytes.fromhex(hex_address)  # 32-bit words in host (little-endian) order
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            address = ipaddress.ip_address(packed)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
                address = address.ipv4_mapped  # gRPC binds 127.0.0.1 as ::ffff:127.0.0.1
            found.add((address, int(hex_port, 16)))
    return found


def spans(url: str, project: str, *, expected: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Every span of ``project`` once at least ``expected`` arrived (Phoenix inserts in
    batches), through ``GET /v1/projects/{project}/spans``."""
    deadline = time.monotonic() + timeout
    found: list[dict[str, Any]] = []
    while True:
        found = []
        cursor: str | None = None
        response = httpx.get(f"{url}/v1/projects/{project}/spans", params={"limit": 1000})
        if response.status_code == 200:
            body = response.json()
            found = list(body["data"])
            cursor = body.get("next_cursor")
            while cursor:
                body = httpx.get(
                    f"{url}/v1/projects/{project}/spans", params={"limit": 1000, "cursor": cursor}
                ).json()
                found += body["data"]
                cursor = body.get("next_cursor")
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.25)
