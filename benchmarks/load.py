"""Load benchmark: many concurrent sessions against real ``evalport serve`` processes.

``SESSIONS`` sessions run at once; each opens, sends ``TURNS`` turns one after another
(with an ``Idempotency-Key``, as ``HttpTarget`` does), reads its run back and is deleted.
The agent is the small tool-using agent below (one recorded tool call per turn, a 2 ms
``await`` standing in for I/O), so the figures measure the adapter, not a model.
Configurations:

- ``memory``: one uvicorn worker, the in-process store;
- ``redis``: one uvicorn worker, a Redis store (a ``redis-server`` started here);
- ``two``: two workers over one Redis, each session pinned to one of them (sticky);
- ``two-alternating``: two workers over one Redis, a session's turns alternating between
  them, so every turn lands on a worker that must rebuild the session (the worst case).

For each it prints throughput (turns per second), p50 and p99 turn latency, errors (any
non-2xx answer or transport failure; must be 0) and the servers' RSS growth over the run
(every session deleted at its end), then runs the same load ``REPEATS`` more times and
prints the growth over the last two ("again"): the allocator keeps what the first runs
needed at their peak and reuses it, so only a leak keeps growing there. The client runs in this process on
the same machine, so on a small machine it competes with the servers for CPU: compare
configurations, not absolute numbers. It prints figures; it never fails a build.

Run: ``.venv/bin/python benchmarks/load.py`` (``--sessions 50`` for a quick look).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalport.protocol import AgentRun, Message
from evalport.protocol.runtime import SessionInfo, TurnContext, tool

SESSIONS = 500
TURNS = 5
REPEATS = 3
TOKEN = "load-benchmark-token-0123456789"
CONFIGS = ("memory", "redis", "two", "two-alternating")


# -- the agent the servers run (``evalport serve benchmarks/load.py:agent``) ----------------


@tool
def lookup(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped"}


class Agent:
    """Counts its session's turns in memory; ``restore`` rebuilds the count from history."""

    def __init__(self, info: SessionInfo) -> None:
        self.turns = 0

    def restore(self, history: list[Message], run: AgentRun) -> None:
        self.turns = sum(1 for message in history if message.role == "user")

    async def turn(self, message: str, ctx: TurnContext) -> str:
        self.turns += 1
        lookup(message)
        await asyncio.sleep(0.002)
        return f"order {message} is shipped (turn {self.turns})"


agent = Agent


# -- processes ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(port: int, process: subprocess.Popen[bytes], payload: bytes, expect: bytes) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(payload)
                if expect in sock.recv(256):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"nothing answered on port {port}")


@contextlib.contextmanager
def _process(args: list[str], port: int, payload: bytes, expect: bytes) -> Iterator[int]:
    env = {**os.environ, "EVALPORT_TOKEN": TOKEN}
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(port, process, payload, expect)
        yield process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    with tempfile.TemporaryDirectory() as folder:
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", folder, "--loglevel", "warning"]  # fmt: skip
        with _process(args, port, b"PING\r\n", b"+PONG"):
            yield f"redis://127.0.0.1:{port}/0"


@contextlib.contextmanager
def servers(count: int, store: str) -> Iterator[list[tuple[str, int]]]:
    target = f"{Path(__file__).resolve()}:agent"
    with contextlib.ExitStack() as stack:
        started = []
        for _ in range(count):
            port = _free_port()
            args = [sys.executable, "-m", "evalport.protocol._cli", "serve", target,
                    "--port", str(port), "--store", store, "--log-level", "warning",
                    "--max-sessions", "100000"]  # fmt: skip
            probe = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
            pid = stack.enter_context(_process(args, port, probe, b"HTTP/1.1"))
            started.append((f"http://127.0.0.1:{port}", pid))
        yield started


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the load --------------------------------------------------------------------------------
# A minimal HTTP/1.1 keep-alive client (one connection per session and server): httpx
# costs several times more CPU per request, and the client shares the machine's CPUs.


class Connection:
    """One keep-alive HTTP/1.1 connection to a server."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, method: str, path: str, body: bytes = b"", key: str | None = None
    ) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        )
        if key is not None:
            head += f"Idempotency-Key: {key}\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)
        header = await self.reader.readuntil(b"\r\n\r\n")
        lines = header.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length) if length else b""

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def _session(urls: list[str], index: int, turns: int, alternate: bool, tally: Tally) -> None:
    connections = [Connection(url) for url in urls]
    first = connections[index % len(connections)]
    try:
        status, body = await first.request(
            "POST", "/evals/sessions", json.dumps({"caseId": f"load-{index}"}).encode()
        )
        if status != 201:
            tally.errors.append(f"create {status}: {body[:120]!r}")
            return
        session = json.loads(body)["sessionId"]
        for turn in range(turns):
            http = connections[(index + turn) % len(connections)] if alternate else first
            message = json.dumps({"message": f"A{index}-{turn}"}).encode()
            started = time.perf_counter()
            status, body = await http.request(
                "POST", f"/evals/sessions/{session}/turns", message, key=str(uuid.uuid4())
            )
            tally.latencies.append(time.perf_counter() - started)
            if status != 200:
                tally.errors.append(f"turn {status}: {body[:120]!r}")
                return
        status, body = await first.request("GET", f"/evals/sessions/{session}")
        if status != 200 or json.loads(body)["run"]["turns"] != turns:
            tally.errors.append(f"attach {status}")
        status, body = await first.request("DELETE", f"/evals/sessions/{session}")
        if status != 204:
            tally.errors.append(f"delete {status}")
    except (OSError, asyncio.IncompleteReadError, ValueError) as error:
        tally.errors.append(f"{type(error).__name__}: {error}")
    finally:
        for connection in connections:
            await connection.close()


async def drive(urls: list[str], sessions: int, turns: int, alternate: bool) -> tuple[Tally, float]:
    await asyncio.gather(*(_session(urls, n, 1, False, Tally()) for n in range(20)))  # warm up
    tally = Tally()
    started = time.perf_counter()
    await asyncio.gather(*(_session(urls, n, turns, alternate, tally) for n in range(sessions)))
    return tally, time.perf_counter() - started


def _run(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run_config(name: str, sessions: int, turns: int) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        store = "memory" if name == "memory" else stack.enter_context(redis_server())
        count = 2 if name.startswith("two") else 1
        started = stack.enter_context(servers(count, store))
        urls = [url for url, _ in started]
        alternate = name == "two-alternating"
        before = sum(rss_mb(pid) for _, pid in started)
        tally, elapsed = _run(drive(urls, sessions, turns, alternate))
        after = sum(rss_mb(pid) for _, pid in started)
        again, plateau = Tally(), after
        for repeat in range(REPEATS):  # the same load again: a leak would keep growing
            if repeat == REPEATS - 2:
                plateau = sum(rss_mb(pid) for _, pid in started)
            more, _ = _run(drive(urls, sessions, turns, alternate))
            again.errors += more.errors
        final = sum(rss_mb(pid) for _, pid in started)
    return {
        "config": name,
        "turns_per_s": len(tally.latencies) / elapsed,
        "p50_ms": percentile(tally.latencies, 0.50) * 1000,
        "p99_ms": percentile(tally.latencies, 0.99) * 1000,
        "errors": len(tally.errors) + len(again.errors),
        "first_error": (tally.errors + again.errors or [""])[0],
        "rss_growth_mb": after - before,
        "rss_growth_again_mb": final - plateau,
        "elapsed_s": elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args(argv)
    print(f"{args.sessions} concurrent sessions x {args.turns} turns, {os.cpu_count()} CPUs")
    print(
        f"{'config':<16} {'turns/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} "
        f"{'RSS +MB':>8} {'again':>6}"
    )
    for name in args.configs.split(","):
        row = run_config(name.strip(), args.sessions, args.turns)
        print(
            f"{row['config']:<16} {row['turns_per_s']:>8.0f} {row['p50_ms']:>8.1f} "
            f"{row['p99_ms']:>8.1f} {row['errors']:>6} {row['rss_growth_mb']:>8.1f} "
            f"{row['rss_growth_again_mb']:>6.1f}"
        )
        if row["errors"]:
            print(f"  first error: {row['first_error']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
