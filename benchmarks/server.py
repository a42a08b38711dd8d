"""Server benchmark: turns per second through the adapter against a bare Starlette route.

Two uvicorn servers run side by side with the same settings (one process each, uvicorn's
default loop and HTTP parser, no access log):

- **adapter**: ``EvalAdapter`` (bearer auth on) serving a no-op agent. Before it serves,
  it opens ``--sessions`` sessions in-process and writes their ids to a file;
- **bare**: one Starlette ``POST`` route returning fixed bytes: the adapter's response to
  a session's second turn, so both send the same payload size.

wrk (``apt install wrk``) drives both, alternating, ``--rounds`` times each; its Lua script
spreads the turns over the sessions round-robin, so that no two requests in flight share a
session (a 409 would be counted as an error). Before each adapter round the sessions are
replaced by fresh ones (a benchmark-only route of the adapter's process), so every session
takes only a few turns in a round (printed as turns/session): an accumulated run grows
with each turn, and the comparison is about the adapter's overhead, not about encoding
ever longer runs as the rounds go on. The best round of each is compared: throughput
ratio (target >= 0.85) and p99 latency difference (target <= 1 ms). Because the machine
may be shared, it also reads each server's CPU time from ``/proc`` and prints the CPU
spent per request: its ratio is the throughput ratio the two would reach on an otherwise
idle core, and it varies far less than requests per second.

``--freeze-gc`` (a diagnostic) moves every object alive after start-up (and, in the
adapter, after each renewal of its sessions) to the collector's permanent generation in
both servers, so full collections no longer walk the live sessions: the difference it
makes is what those pauses cost.

Memory: a separate process measures the RSS that 10,000 idle sessions of the example
support agent add (target < 50 MB).

Run: ``.venv/bin/python benchmarks/server.py`` (about 40 s). It prints figures; it never
fails a build.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "benchmark-token"
TARGET_RATIO = 0.85
TARGET_P99_MS = 1.0
TARGET_MB = 50.0
FREEZE_GC = "--freeze-gc" in sys.argv

LUA = """
local ids = {}
for line in io.lines("%(ids)s") do ids[#ids + 1] = line end
local n = 0
local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer %(token)s"}
local body = '{"message":"ping"}'
request = function()
  n = n + 1
  local id = ids[(n %% #ids) + 1]
  return wrk.format("POST", "%(prefix)s" .. id .. "/turns", headers, body)
end
"""


async def noop_agent(message: str, history: list[Any], ctx: Any) -> str:
    return "pong"


def _uvicorn_config(app: Any, port: int) -> Any:
    import uvicorn

    return uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off"
    )


async def _serve_adapter(port: int, sessions: int, workdir: Path, http_only: bool) -> None:
    import uvicorn
    from evalport.protocol import CreateSessionRequest
    from evalport.server import EvalAdapter, Limits
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    adapter = EvalAdapter(
        noop_agent, token=TOKEN, limits=Limits(max_sessions=sessions + 10, session_ttl=3600)
    )
    manager = adapter.sessions
    ids: list[str] = []

    async def renew() -> None:  # fresh sessions, so that the runs stay short
        for session_id in ids:
            await manager.delete(session_id)
        ids[:] = [(await manager.create(CreateSessionRequest()))[0] for _ in range(sessions)]
        if not http_only:
            (workdir / "ids.txt").write_text("\n".join(ids) + "\n")
        gc.collect()  # the renewal's own garbage is not the round's
        _freeze()

    async def renew_route(request: Request) -> Response:
        await renew()
        return Response(status_code=204)

    await renew()
    scratch, _ = await manager.create(CreateSessionRequest())
    await manager.turn(scratch, "ping", None)
    second = await manager.turn(scratch, "ping", None)
    if http_only:
        # Diagnostic (--layers): the adapter's HTTP layer (auth, strict decoding, problem
        # handling, routing) answering every turn with the fixed response, no session work.
        async def fixed_turn(session_id: str, message: str, key: str | None) -> Any:
            return second

        manager.turn = fixed_turn  # type: ignore[method-assign]
    else:
        (workdir / "body.json").write_bytes(second.body)
    served = adapter.app()
    renew_app = Route("/benchmark/renew", renew_route, methods=["POST"])

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the adapter, plus renew
        if scope["type"] == "http" and scope["path"] == "/benchmark/renew":
            await renew_app(scope, receive, send)
        else:
            await served(scope, receive, send)

    await uvicorn.Server(_uvicorn_config(app, port)).serve()


def _freeze() -> None:
    if FREEZE_GC:
        gc.collect()
        gc.freeze()


async def _serve_bare(port: int, workdir: Path) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    body = (workdir / "body.json").read_bytes()

    async def turn(request: Request) -> Response:
        await request.body()
        return Response(body, media_type="application/json")

    app = Starlette(routes=[Route("/evals/sessions/{session_id}/turns", turn, methods=["POST"])])
    _freeze()
    await uvicorn.Server(_uvicorn_config(app, port)).serve()


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


async def _measure_memory(count: int) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    from evalport.protocol import CreateSessionRequest
    from evalport.server import EvalAdapter, Limits
    from support_agent import agent

    adapter = EvalAdapter(agent, token=TOKEN, limits=Limits(max_sessions=count + 10))
    await adapter.sessions.create(CreateSessionRequest())  # warm every code path once
    gc.collect()
    before = _rss_mb()
    for index in range(count):
        await adapter.sessions.create(CreateSessionRequest(case_id=f"case-{index}"))
    gc.collect()
    after = _rss_mb()
    print(f"{after - before:.1f} {adapter.sessions.live_count}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Round(NamedTuple):
    rps: float
    p99_ms: float
    errors: int
    cpu_us: float  # server CPU time per request
    requests: int


def _wrk(url: str, script: Path, seconds: int, connections: int, pid: int) -> Round:
    cpu_before = _cpu_seconds(pid)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99_text = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    assert p99_text is not None, out
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99_text.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    cpu_us = (_cpu_seconds(pid) - cpu_before) / max(requests, 1) * 1e6
    return Round(
        rps,
        float(p99_text.group(1)) * scale,
        int(errors.group(1)) if errors else 0,
        cpu_us,
        requests,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=40_000)
    parser.add_argument(
        "--layers",
        action="store_true",
        help="also measure the adapter's HTTP layer alone (session work replaced by a fixed answer)",
    )
    parser.add_argument(
        "--freeze-gc",
        action="store_true",
        help="freeze the collector's generations after start-up in both servers (diagnostic)",
    )
    parser.add_argument(
        "--role", choices=["adapter", "http", "bare", "memory"], help=argparse.SUPPRESS
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role in ("adapter", "http"):
        asyncio.run(
            _serve_adapter(args.port, args.sessions, Path(args.workdir), args.role == "http")
        )
        return 0
    if args.role == "bare":
        asyncio.run(_serve_bare(args.port, Path(args.workdir)))
        return 0
    if args.role == "memory":
        asyncio.run(_measure_memory(10_000))
        return 0
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt install wrk)", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        me = [sys.executable, __file__, "--workdir", tmp, *(["--freeze-gc"] if FREEZE_GC else [])]
        adapter_port, bare_port = _free_port(), _free_port()
        adapter = subprocess.Popen(
            [
                *me,
                "--role",
                "adapter",
                "--port",
                str(adapter_port),
                "--sessions",
                str(args.sessions),
            ]
        )
        bare: subprocess.Popen[bytes] | None = None
        http: subprocess.Popen[bytes] | None = None
        try:
            _wait(f"http://127.0.0.1:{adapter_port}/health", adapter)
            bare = subprocess.Popen([*me, "--role", "bare", "--port", str(bare_port)])
            assert bare is not None
            _wait(f"http://127.0.0.1:{bare_port}/", bare)
            script = workdir / "turns.lua"
            script.write_text(
                LUA % {"ids": workdir / "ids.txt", "token": TOKEN, "prefix": "/evals/sessions/"}
            )
            size = len((workdir / "body.json").read_bytes())
            print(f"response: {size} bytes; {args.sessions} sessions; wrk -t1 -c{args.connections}")
            results: dict[str, list[Round]] = {"adapter": [], "bare": []}
            servers = {"bare": (bare_port, bare.pid), "adapter": (adapter_port, adapter.pid)}
            if args.layers:
                http_port = _free_port()
                http = subprocess.Popen(
                    [*me, "--role", "http", "--port", str(http_port), "--sessions", "10"]
                )
                _wait(f"http://127.0.0.1:{http_port}/health", http)
                servers["http"] = (http_port, http.pid)
                results["http"] = []
            for _ in range(args.rounds):
                for name, (port, pid) in servers.items():
                    if name == "adapter":
                        renew = f"http://127.0.0.1:{port}/benchmark/renew"
                        urllib.request.urlopen(urllib.request.Request(renew, method="POST")).close()
                    result = _wrk(
                        f"http://127.0.0.1:{port}", script, args.seconds, args.connections, pid
                    )
                    results[name].append(result)
                    turns = (
                        f"  {result.requests / args.sessions:.1f} turns/session"
                        if name == "adapter"
                        else ""
                    )
                    print(
                        f"  {name:8} {result.rps:9.0f} req/s  p99 {result.p99_ms:6.2f} ms  "
                        f"server CPU {result.cpu_us:6.1f} us/req  errors {result.errors}{turns}"
                    )
        finally:
            for process in (adapter, bare, http):
                if process is not None:
                    process.terminate()
                    process.wait(10)
    best = {name: max(rows, key=lambda row: row.rps) for name, rows in results.items()}
    cpu = {name: min(row.cpu_us for row in rows) for name, rows in results.items()}
    ratio = best["adapter"].rps / best["bare"].rps
    p99 = min(row.p99_ms for row in results["adapter"]) - min(row.p99_ms for row in results["bare"])
    print(
        f"turns/s (best round): adapter {best['adapter'].rps:.0f}, bare {best['bare'].rps:.0f}: "
        f"ratio {ratio:.2f} (target >= {TARGET_RATIO})"
    )
    print(
        f"server CPU per request (least): adapter {cpu['adapter']:.1f} us, bare {cpu['bare']:.1f} us:"
        f" throughput ratio at equal CPU {cpu['bare'] / cpu['adapter']:.2f}"
    )
    print(
        f"p99 latency (best round): adapter {p99:+.2f} ms vs bare (target <= +{TARGET_P99_MS} ms)"
    )
    if "http" in cpu:
        print(
            f"adapter HTTP layer alone: {cpu['http']:.1f} us per request "
            f"({cpu['bare'] / cpu['http']:.2f}x the bare route's throughput at equal CPU)"
        )
    memory = subprocess.run(
        [sys.executable, __file__, "--role", "memory"], capture_output=True, text=True, check=True
    ).stdout.split()
    print(
        f"memory: 10,000 idle sessions add {float(memory[0]):.1f} MB RSS (target < {TARGET_MB:g} MB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
