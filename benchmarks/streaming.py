"""Streaming benchmark: how soon a streamed turn's first chunk reaches the client, and what
an open stream costs the server (issue 31).

Two servers run side by side, each in its own process, on loopback:

- **evalport**: ``evalport serve benchmarks/_streaming_agent.py:agent`` (uvicorn as
  ``serve`` runs it). The agent yields its first chunk stamped with the monotonic clock
  (``time.perf_counter_ns``, one clock for every process of the machine), waits
  ``--think`` seconds, then yields the rest;
- **bare**: one Starlette route that streams the same two chunks as Server-Sent Events
  with the same wait, and nothing else: no session, no turn, no recording.

A client process drives ``--sessions`` concurrent streaming sessions, each sending
``--turns`` turns one after another (``Accept: text/event-stream``; each session starts
at a random moment within the first ``--think`` seconds, so that they are out of step as
users are, not a burst every ``--think`` seconds), and notes, for each
turn, how long after the agent stamped its first chunk that chunk arrived: the delivery
delay (the target: p95 within 5 ms of the agent's chunk at 100 sessions). It prints the
p50, p95 and p99 of both servers and the ratio of their p95s.

Memory: the evalport server's RSS before and while ``--open`` streams are held open
(their agents wait after their first chunk), per open stream; each stream's buffer is
bounded by ``--stream-buffer-bytes`` whatever its reader does.

Run: ``.venv/bin/python benchmarks/streaming.py`` (about half a minute; ``--think 0.5``
doubles the turns per second). It prints
figures; it never fails a build.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENT = str(Path(__file__).with_name("_streaming_agent.py")) + ":agent"
EVALPORT = str(Path(sys.executable).parent / "evalport")
TARGET_MS = 5.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server at {url} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _serve_bare(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def turn(request):  # type: ignore[no-untyped-def]
        think = float((await request.json())["message"])

        async def frames():  # type: ignore[no-untyped-def]
            stamp = time.perf_counter_ns()
            yield b'event: text-delta\ndata: {"text":"%d "}\n\n' % stamp
            await asyncio.sleep(think)
            yield b'event: result\ndata: {"run":{"reply":"done"}}\n\n'

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def health(request):  # type: ignore[no-untyped-def]
        return JSONResponse({"status": "ok"})

    async def create(request):  # type: ignore[no-untyped-def]
        return JSONResponse({"sessionId": "bare"}, status_code=201)

    app = Starlette(
        routes=[
            Route("/health", health),
            Route("/evals/sessions", create, methods=["POST"]),
            Route("/evals/sessions/{id}/turns", turn, methods=["POST"]),
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _drive(url: str, sessions: int, turns: int, think: float) -> list[float]:
    """Delivery delays (ms) of every turn's first chunk."""
    import httpx
    import msgspec

    delays: list[float] = []

    async def session() -> None:
        # a client of its own: httpx's pool looks at each of its connections on every
        # request, and one pool of 100 would make the client the bottleneck measured
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            created = await client.post("/evals/sessions", json={})
            assert created.status_code == 201, created.text
            path = f"/evals/sessions/{created.json()['sessionId']}/turns"
            headers = {"Accept": "text/event-stream"}
            await asyncio.sleep(random.uniform(0, think))  # sessions out of step, as users are
            for _ in range(turns):
                body = {"message": str(think)}
                async with client.stream("POST", path, json=body, headers=headers) as response:
                    first = True
                    async for line in response.aiter_lines():
                        if first and line.startswith("data: ") and '"text":"' in line:
                            arrived = time.perf_counter_ns()
                            text = msgspec.json.decode(line[6:])["text"]
                            delays.append((arrived - int(text.split()[0])) / 1e6)
                            first = False

    await asyncio.gather(*(session() for _ in range(sessions)))
    return delays


async def _hold_open(url: str, count: int, pid: int) -> tuple[int, int]:
    """The server's RSS (KB) before and while ``count`` streams are open."""
    import httpx

    limits = httpx.Limits(max_connections=count + 10)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        ids = [
            (await client.post("/evals/sessions", json={})).json()["sessionId"]
            for _ in range(count)
        ]
        before = _rss_kb(pid)
        started = asyncio.Event()
        opened: list[int] = []

        async def hold(session_id: str) -> None:
            path = f"/evals/sessions/{session_id}/turns"
            body, headers = {"message": "3"}, {"Accept": "text/event-stream"}
            async with client.stream("POST", path, json=body, headers=headers) as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: text-delta"):
                        opened.append(1)
                        if len(opened) == count:
                            started.set()
                        await started.wait()

        holders = [asyncio.create_task(hold(session_id)) for session_id in ids]
        await asyncio.wait_for(started.wait(), 60)
        during = _rss_kb(pid)
        await asyncio.gather(*holders)
    return before, during


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[94], cuts[98]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--think", type=float, default=1.0, help="seconds between chunks")
    parser.add_argument("--open", type=int, default=1000, help="streams held open for memory")
    parser.add_argument("--stream-buffer-bytes", type=int, default=1_048_576)
    parser.add_argument("--role", choices=["bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bare":
        _serve_bare(args.port)
        return 0
    ports = {"evalport": _free_port(), "bare": _free_port()}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "benchmarks")}
    commands = {
        "evalport": [
            EVALPORT, "serve", AGENT, "--insecure-no-auth", "--log-level", "warning",
            "--port", str(ports["evalport"]), "--max-sessions", str(4 * args.sessions + args.open + 10),
            "--stream-buffer-bytes", str(args.stream_buffer_bytes),
        ],
        "bare": [sys.executable, __file__, "--role", "bare", "--port", str(ports["bare"])],
    }  # fmt: skip
    servers = {name: subprocess.Popen(command, env=env) for name, command in commands.items()}
    try:
        for name, process in servers.items():
            _wait(f"http://127.0.0.1:{ports[name]}/health", process)
        print(
            f"{args.sessions} concurrent streaming sessions x {args.turns} turns, "
            f"{args.think * 1000:.0f} ms between the two chunks"
        )
        p95 = {}
        for name in ("bare", "evalport", "bare", "evalport"):  # twice each, alternating
            url = f"http://127.0.0.1:{ports[name]}"
            delays = asyncio.run(_drive(url, args.sessions, args.turns, args.think))
            p50, p95[name], p99 = _percentiles(delays)
            print(
                f"  {name:8} first chunk delivered after p50 {p50:.2f} ms, p95 {p95[name]:.2f} ms,"
                f" p99 {p99:.2f} ms ({len(delays)} turns)"
            )
        print(
            f"time to first chunk, p95 (last rounds): evalport {p95['evalport']:.2f} ms vs bare"
            f" {p95['bare']:.2f} ms: ratio {p95['evalport'] / p95['bare']:.2f}; target: within"
            f" {TARGET_MS:g} ms of the agent's chunk"
        )
        url = f"http://127.0.0.1:{ports['evalport']}"
        before, during = asyncio.run(_hold_open(url, args.open, servers["evalport"].pid))
        print(
            f"memory: {args.open} open streams add {(during - before) / 1024:.1f} MB RSS,"
            f" {(during - before) / args.open:.1f} KB per stream (each buffer bounded by"
            f" {args.stream_buffer_bytes} bytes)"
        )
    finally:
        for process in servers.values():
            process.terminate()
            process.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
