"""Server benchmark: turns per second through the adapter against a bare Starlette route.

uvicorn servers run side by side with the same settings (one process each, uvicorn's
default event loop and HTTP parser, which are uvloop and httptools with ``uvicorn[standard]``
as ``evalport serve`` runs them, no access log; ``--loop asyncio`` compares on the standard
library's loop):

- **adapter**: ``EvalAdapter.app()`` (what ``evalport serve`` runs; bearer auth on)
  serving a no-op agent. Before it serves, it opens ``--sessions`` sessions in-process
  and writes their ids to a file;
- **mounted**: the same adapter's ``routes()`` in a Starlette app, as a host mounts them;
- **streamed**: ``app()`` again, its turns asked with ``Accept: text/event-stream`` (protocol
  1.2): the no-op agent's events, then the same body as the last event. Printed: its
  server CPU per request over the adapter's (target <= 1.5, issue 31);
- **traced**: ``app()`` with tracing on, as ``evalport serve --otlp`` runs it (the SDK
  provider of :func:`evalport.protocol.tracing.otlp_provider`: a ``BatchSpanProcessor``
  over the OTLP/HTTP exporter), exporting every turn to ``_otlp_sink.py`` in another
  process;
- **traced-sdk** (the reference): ``app()`` untraced, each turn request wrapped in a
  bare SDK pipeline emitting the same spans (the same provider; a server span that
  continues the ``traceparent``, current while the turn runs, then the spans evalport drew
  for one turn, captured once at start-up and emitted again: ``_otel_sdk.py``). Printed:
  traced over traced-sdk server CPU per request (the SDK's thread runs in the server, so
  it is the whole cost), the whole request's and what tracing adds to it, with the
  untraced adapter for context;
- **bare**: one Starlette ``POST`` route returning fixed bytes: the adapter's response to
  a session's second turn, so all send the same payload size.

wrk (``apt install wrk``) drives them in turn, ``--rounds`` times each; its Lua script
spreads the turns over the sessions round-robin, so that no two requests in flight share a
session (a 409 would be counted as an error). Before each adapter round the sessions are
replaced by fresh ones (a benchmark-only route of the adapter's process), so every session
takes only a few turns in a round (printed as turns/session): an accumulated run grows
with each turn, and the comparison is about the adapter's overhead, not about encoding
ever longer runs as the rounds go on. The best round of each is compared: throughput
ratio (target >= 0.5, issue 14) and p99 latency difference (target <= 1 ms). Because the machine
may be shared, it also reads each server's CPU time from ``/proc`` and prints the CPU
spent per request: its ratio is the throughput ratio the two would reach on an otherwise
idle core, and it varies far less than requests per second.

``--layers`` (a diagnostic) adds two servers that split the adapter's cost:

- **http**: ``app()`` answering every turn with the fixed response: the HTTP layer alone
  (routing, auth, strict decoding, problem handling), no session work;
- **floor**: ``app()`` whose turns do only what any turn must: start the turn's task,
  decode the parked run, record one step (a UUID and two timestamps) and the user
  message, encode the run. No session lookup, lease, store or turn context: the least a
  turn can cost with this design, and what the target leaves for it.

``--freeze-gc`` (a diagnostic) moves every object alive after start-up (and, in the
adapter, after each renewal of its sessions) to the collector's permanent generation in
every server, so full collections no longer walk the live sessions: the difference it
makes is what those pauses cost.

Memory: a separate process measures the RSS that 10,000 idle sessions of the example
support agent add (target < 50 MB).

Run: ``.venv/bin/python benchmarks/server.py`` (about a minute; two with ``--layers``).
It prints figures; it never fails a build.
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

import _otel_sdk
from _otlp_sink import running_sink

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "benchmark-token"
TARGET_RATIO = 0.5
TARGET_P99_MS = 1.0
TARGET_MB = 50.0
TARGET_STREAMED = 1.5
FREEZE_GC = "--freeze-gc" in sys.argv
LOOP = sys.argv[sys.argv.index("--loop") + 1] if "--loop" in sys.argv else "auto"
RENEWED = ("adapter", "mounted", "streamed", "traced", "traced-sdk")
"""The roles serving ``--sessions`` sessions, replaced by fresh ones before each round."""

LUA = """
local ids = {}
for line in io.lines("%(ids)s") do ids[#ids + 1] = line end
local n = 0
local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer %(token)s"%(accept)s}
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
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        loop=LOOP,
    )


def _run_server(main: Any) -> None:
    """Run a server's coroutine on the event loop uvicorn would pick for ``--loop``."""
    with asyncio.Runner(loop_factory=_uvicorn_config(None, 0).get_loop_factory()) as runner:
        runner.run(main)


async def _serve_adapter(port: int, sessions: int, workdir: Path, role: str) -> None:
    import uvicorn
    from evalport.protocol import CreateSessionRequest
    from evalport.server import EvalAdapter, Limits
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    tracing: Any = False
    if role in ("traced", "traced-sdk"):  # as `evalport serve --otlp` exports
        from evalport.protocol.tracing import otlp_provider

        tracing = otlp_provider(os.environ["BENCHMARK_OTLP"], "benchmark")
    bare_sdk = tracing if role == "traced-sdk" else None
    if bare_sdk is not None:
        tracing = False
    adapter = EvalAdapter(
        noop_agent,
        token=TOKEN,
        limits=Limits(max_sessions=sessions + 10, session_ttl=3600),
        tracing=tracing,
    )
    manager = adapter.sessions
    ids: list[str] = []

    async def renew() -> None:  # fresh sessions, so that the runs stay short
        for session_id in ids:
            await manager.delete(session_id)
        ids[:] = [(await manager.create(CreateSessionRequest()))[0] for _ in range(sessions)]
        (workdir / f"ids-{role}.txt").write_text("\n".join(ids) + "\n")
        gc.collect()  # the renewal's own garbage is not the round's
        _freeze()

    async def renew_route(request: Request) -> Response:
        await renew()
        return Response(status_code=204)

    await renew()
    scratch, _ = await manager.create(CreateSessionRequest())
    await manager.turns.turn(scratch, "ping", None)
    second = await manager.turns.turn(scratch, "ping", None)
    if role == "http":
        manager.turns.turn = _fixed_turn(second)  # type: ignore[method-assign]
    elif role == "floor":
        manager.turns.turn = _floor_turn(second)  # type: ignore[method-assign]
    elif role == "adapter":
        (workdir / "body.json").write_bytes(second.body)
    renew_app = Route("/benchmark/renew", renew_route, methods=["POST"])
    if role == "mounted":
        app: Any = Starlette(routes=[*adapter.routes(), renew_app])
    else:
        served = adapter.app()
        if bare_sdk is not None:
            template = await _turn_template()
            served = _bare_traced(served, bare_sdk.get_tracer("benchmark"), template)

        async def app(scope: Any, receive: Any, send: Any) -> None:  # app(), plus renew
            if scope["type"] == "http" and scope["path"] == "/benchmark/renew":
                await renew_app(scope, receive, send)
            else:
                await served(scope, receive, send)

    await uvicorn.Server(_uvicorn_config(app, port)).serve()


async def _turn_template() -> Any:
    """The spans evalport draws for one turn of the no-op agent (``_otel_sdk.captured``)."""
    import httpx
    from evalport.server import EvalAdapter

    provider, spans = _otel_sdk.in_memory()
    app = EvalAdapter(noop_agent, token=None, tracing=provider).app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        session = (await http.post("/evals/sessions", json={})).json()["sessionId"]
        for _ in range(2):  # a second turn, as most of a round's are
            await http.post(f"/evals/sessions/{session}/turns", json={"message": "ping"})
    spans.clear()
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        await http.post(f"/evals/sessions/{session}/turns", json={"message": "ping"})
    return _otel_sdk.captured(spans.get_finished_spans())


def _bare_traced(app: Any, tracer: Any, template: Any) -> Any:
    """``app`` with each turn request a server span of the bare SDK pipeline: it continues
    the ``traceparent``, is current while the turn runs, then gets ``template``'s spans."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    w3c = TraceContextTextMapPropagator()

    async def traced(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/turns"):
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        context = w3c.extract(headers) if "traceparent" in headers else None
        span = tracer.start_span(template.name, context, template.kind)
        with trace.use_span(span):
            await app(scope, receive, send)
        _otel_sdk.finish(tracer, span, template)

    return traced


def _fixed_turn(second: Any) -> Any:
    """--layers "http": every turn answered with the fixed response."""

    async def fixed_turn(session_id: str, message: str, key: str | None, *rest: Any) -> Any:
        return second

    return fixed_turn


def _floor_turn(second: Any) -> Any:
    """--layers "floor": the work any turn must do, and nothing else (see the docstring)."""
    import uuid

    import msgspec
    from evalport.protocol import Message, RunEnvelope, Step
    from evalport.protocol.runtime import utc_now
    from evalport.server._records import Outcome

    encode = msgspec.json.Encoder().encode
    decode = msgspec.json.Decoder(RunEnvelope).decode
    parked = second.body

    async def record(message: str) -> bytes:
        run = decode(parked).run
        run.turns += 1
        run.user_messages.append(message)
        step = Step(
            id=str(uuid.uuid4()),
            turn=run.turns,
            index=len(run.steps),
            started_at=utc_now(),
            output_messages=[Message(role="assistant", content="pong")],
        )
        step.completed_at = utc_now()
        run.steps.append(step)
        run.reply = "pong"
        del run.steps[:-2], run.user_messages[:-2]  # the same size as the adapter's runs
        return encode(RunEnvelope(run=run))

    async def floor_turn(session_id: str, message: str, key: str | None, *rest: Any) -> Any:
        body = await asyncio.get_running_loop().create_task(record(message))  # the turn's task
        return Outcome(status=200, body=body)

    return floor_turn


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


def _print_tracing(best: dict[str, Round], cpu: dict[str, float]) -> None:
    """evalport-traced against the bare SDK pipeline, the untraced adapter for context."""
    plain, bare, ours = cpu["adapter"], cpu["traced-sdk"], cpu["traced"]
    print(
        f"tracing (--otlp to a sink), server CPU per request (least): untraced {plain:.1f} us,"
        f" bare SDK {bare:.1f} us (+{bare - plain:.1f}), evalport-traced {ours:.1f} us"
        f" (+{ours - plain:.1f}); evalport-traced / bare SDK {ours / bare:.2f}x, added to a"
        f" turn {(ours - plain) / (bare - plain):.2f}x; turns/s (best round) untraced"
        f" {best['adapter'].rps:.0f}, bare SDK {best['traced-sdk'].rps:.0f}, evalport-traced"
        f" {best['traced'].rps:.0f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=40_000)
    parser.add_argument(
        "--loop",
        choices=["auto", "asyncio", "uvloop"],
        default="auto",
        help="uvicorn's event loop for every server (auto: uvloop when installed, as uvicorn"
        " and evalport serve pick it)",
    )
    parser.add_argument(
        "--layers",
        action="store_true",
        help="also measure the HTTP layer alone and a floor turn (see the docstring)",
    )
    parser.add_argument(
        "--freeze-gc",
        action="store_true",
        help="freeze the collector's generations after start-up in every server (diagnostic)",
    )
    parser.add_argument(
        "--role",
        choices=[*RENEWED, "http", "floor", "bare", "memory"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role in (*RENEWED, "http", "floor"):
        _run_server(_serve_adapter(args.port, args.sessions, Path(args.workdir), args.role))
        return 0
    if args.role == "bare":
        _run_server(_serve_bare(args.port, Path(args.workdir)))
        return 0
    if args.role == "memory":
        asyncio.run(_measure_memory(10_000))
        return 0
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt install wrk)", file=sys.stderr)
        return 2

    roles = ["bare", *RENEWED]
    roles += ["http", "floor"] if args.layers else []
    sessions = {role: args.sessions for role in RENEWED} | {"http": 10, "floor": 10}
    results: dict[str, list[Round]] = {role: [] for role in roles}
    with tempfile.TemporaryDirectory() as tmp, running_sink() as sink:
        os.environ["BENCHMARK_OTLP"] = sink  # the traced adapters export there
        workdir = Path(tmp)
        me = [sys.executable, __file__, "--workdir", tmp, "--loop", args.loop]
        me += ["--freeze-gc"] if FREEZE_GC else []
        servers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
        try:
            for role in ["adapter", *roles[2:], "bare"]:  # bare reads the adapter's body
                port = _free_port()
                extra = ["--sessions", str(sessions[role])] if role in sessions else []
                process = subprocess.Popen([*me, "--role", role, "--port", str(port), *extra])
                servers[role] = (port, process)
                _wait(f"http://127.0.0.1:{port}/health", process)
            scripts = {}
            for role in roles:
                ids = workdir / f"ids-{role if role in sessions else 'adapter'}.txt"
                scripts[role] = workdir / f"turns-{role}.lua"
                accept = ', ["Accept"] = "text/event-stream"' if role == "streamed" else ""
                scripts[role].write_text(
                    LUA
                    % {"ids": ids, "token": TOKEN, "prefix": "/evals/sessions/", "accept": accept}
                )
            size = len((workdir / "body.json").read_bytes())
            print(
                f"response: {size} bytes; {args.sessions} sessions; wrk -t1 -c{args.connections};"
                f" uvicorn loop {args.loop}"
            )
            for _ in range(args.rounds):
                for role in roles:
                    port, process = servers[role]
                    if role in RENEWED:
                        renew = f"http://127.0.0.1:{port}/benchmark/renew"
                        urllib.request.urlopen(urllib.request.Request(renew, method="POST")).close()
                    result = _wrk(
                        f"http://127.0.0.1:{port}",
                        scripts[role],
                        args.seconds,
                        args.connections,
                        process.pid,
                    )
                    results[role].append(result)
                    turns = (
                        f"  {result.requests / args.sessions:.1f} turns/session"
                        if role in RENEWED
                        else ""
                    )
                    print(
                        f"  {role:10} {result.rps:9.0f} req/s  p99 {result.p99_ms:6.2f} ms  "
                        f"server CPU {result.cpu_us:6.1f} us/req  errors {result.errors}{turns}"
                    )
        finally:
            for _, process in servers.values():
                process.terminate()
                process.wait(10)
    best = {role: max(rows, key=lambda row: row.rps) for role, rows in results.items()}
    cpu = {role: min(row.cpu_us for row in rows) for role, rows in results.items()}
    bare_p99 = min(row.p99_ms for row in results["bare"])
    for role, label in (("adapter", "app()"), ("mounted", "routes() in Starlette")):
        ratio = best[role].rps / best["bare"].rps
        p99 = min(row.p99_ms for row in results[role]) - bare_p99
        print(
            f"{label}: turns/s (best round) {best[role].rps:.0f} vs bare {best['bare'].rps:.0f}:"
            f" ratio {ratio:.2f} (target >= {TARGET_RATIO}); server CPU per request (least)"
            f" {cpu[role]:.1f} vs {cpu['bare']:.1f} us: ratio at equal CPU"
            f" {cpu['bare'] / cpu[role]:.2f}; p99 {p99:+.2f} ms (target <= +{TARGET_P99_MS} ms)"
        )
    print(
        f"streamed turns: server CPU per request {cpu['streamed']:.1f} vs {cpu['adapter']:.1f} us"
        f" unstreamed: ratio {cpu['streamed'] / cpu['adapter']:.2f} (target <="
        f" {TARGET_STREAMED}); turns/s (best round) {best['streamed'].rps:.0f} vs"
        f" {best['adapter'].rps:.0f}"
    )
    _print_tracing(best, cpu)
    if args.layers:
        http, floor = cpu["http"], cpu["floor"]
        print(
            f"layers (server CPU per request): HTTP layer alone {http:.1f} us; a floor turn"
            f" {floor:.1f} us (+{floor - http:.1f} us of turn work, ratio at equal CPU"
            f" {cpu['bare'] / floor:.2f}); the full adapter {cpu['adapter']:.1f} us"
            f" (+{cpu['adapter'] - http:.1f} us); the target allows"
            f" {cpu['bare'] / TARGET_RATIO:.1f} us"
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
