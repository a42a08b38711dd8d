"""Benchmark: the runner's overhead, against the ideal and against pydantic-evals.

Workloads (all in one process, one after the other):

1. ``N`` single-turn cases (2,000) against an in-process agent that answers after 50 ms,
   at concurrency 50. The ideal wall time is ``N / concurrency x latency`` (2.0 s); the
   benchmark prints evalport's wall time over the ideal (target: at most 1.05x) and the
   same workload through pydantic-evals' ``Dataset.evaluate`` (its task calls the same
   agent function, one ``Contains`` evaluator per case).
2. The same cases against an instant agent: cases per second for both (target: evalport
   at least 2x pydantic-evals).
3. Over HTTP: ``evalport serve`` in a subprocess on a loopback port (the real server),
   the instant agent; a case is create a session, one turn, delete (three requests).
   At concurrency 8 and 50, ``--http-cases`` cases (1,000) through evalport's runner
   with ``HttpTarget`` and, side by side as the reference floor, a raw
   ``httpx.AsyncClient`` with the same limits sending the same calls, headers and bodies
   (it decodes only the session id); each over httpx's own transport and, when the
   ``httpx-aiohttp`` package is installed, over its ``AiohttpTransport`` too. Printed per
   side: this process's CPU ms per case at 8 and at 50 (medians of ``--rounds``
   interleaved rounds), their ratio as cases per CPU second at 50 over 8, cases/s and the
   server's CPU per case (``/proc``, Linux). Targets: the runner at most 1.5 ms of
   client CPU per case at both, and c50/c8 at least 0.9x. ``--http-only`` runs only this
   one.
4. Workload 2 with every trial exported as an OpenTelemetry trace, as ``evalport run
   --otlp`` does (``traced_trials`` over the SDK provider ``otlp_provider`` builds, to
   ``_otlp_sink.py`` in another process), against a bare SDK pipeline emitting the same
   spans (the same provider; the spans evalport drew for one trial, captured once and
   emitted again through the API under each trial's span: ``_otel_sdk.py``), and the
   same without tracing, for context; interleaved. Printed: CPU per trial of each side
   (the SDK's processor thread runs in this process, so it is the whole cost),
   evalport-traced over bare-SDK (the whole trial's CPU, and what tracing adds to an
   untraced trial), and wall time over untraced. ``--tracing-only`` runs only this one.

evalport's side is the whole product path: ``LocalTarget`` (the turn runtime, encode,
lenient decode, safe redaction) or ``HttpTarget``, a fresh session per trial, a
``contains`` assertion, trial and case verdicts, statistics. pydantic-evals is optional:
``.venv/bin/pip install pydantic-evals``; without it its rows are skipped with a message.
Workload 1 keeps each side's best of ``--rounds`` (3), the run least disturbed by other
processes; workload 2 alternates the sides for ``2 x --rounds + 1`` rounds (who goes
first alternates too) and reports the median of the per-round ratios, so both sides see
the same machine load, with the same ratio on process CPU time (what other processes
on a shared machine disturb least). Every measured run starts after ``gc.collect()``:
neither side pays for collecting the other's garbage. Run:
``python benchmarks/runner.py`` (``--cases``, ``--concurrency``, ``--latency``,
``--rounds``, ``--http-cases``, ``--http-only``, ``--tracing-only``; ``--overhead``
prints only the runner's own CPU per case, ``HttpTarget`` over an in-memory
``httpx.MockTransport``). Workload 3's ``HttpTarget`` sends its turns unstreamed, as the
raw client does; ``--stream`` streams them (protocol 1.2, what ``HttpTarget`` does by
default against an evalport server), for the cost of reading the events. Machines here are noisy and shared; compare ratios, and it never
gates CI.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import _otel_sdk
import httpx
import msgspec
from evalport.client import Case, HttpTarget, LocalTarget, Runner, RunOptions
from evalport.protocol.tracing import otlp_provider

LATENCY = 0.05
AGENT_FILE = Path(__file__).resolve()


async def slow_agent(message: str, history: list[Any], ctx: Any) -> str:
    """The agent under test: answers after ``LATENCY`` seconds."""
    await asyncio.sleep(LATENCY)
    return f"echo: {message}"


async def instant_agent(message: str, history: list[Any], ctx: Any) -> str:
    return f"echo: {message}"


async def one_turn(ctx: Any) -> None:
    turn = await ctx.send(f"question {ctx.case_id}")
    ctx.contains(turn.reply[:6])


def make_cases(count: int) -> list[Case]:
    return [Case(id=f"bench::case[{index}]", func=one_turn) for index in range(count)]


async def evalport_wall(target: Any, cases: list[Case], concurrency: int) -> float:
    runner = Runner(target, RunOptions(concurrency=concurrency, timeout=60))
    started = time.perf_counter()
    report = await runner.run(cases)
    wall = time.perf_counter() - started
    passed = report.summary.counts["passed"]
    if passed != len(cases):
        raise SystemExit(f"benchmark: only {passed} of {len(cases)} cases passed")
    return wall


def pydantic_evals_wall(agent: Any, count: int, concurrency: int) -> float | None:
    if importlib.util.find_spec("pydantic_evals") is None:
        return None
    from pydantic_evals import Case as PECase
    from pydantic_evals import Dataset
    from pydantic_evals.evaluators import Contains

    async def task(question: str) -> str:
        return await agent(question, [], None)

    dataset = Dataset(
        name="bench",
        cases=[
            PECase(name=f"case-{index}", inputs=f"question {index}", evaluators=[Contains("echo:")])
            for index in range(count)
        ],
    )
    started = time.perf_counter()
    report = dataset.evaluate_sync(task, max_concurrency=concurrency, progress=False)
    wall = time.perf_counter() - started
    if len(report.cases) != count:
        raise SystemExit(f"benchmark: pydantic-evals ran {len(report.cases)} of {count} cases")
    return wall


def serve(port: int, token: str, agent: str = "", *options: str) -> subprocess.Popen[bytes]:
    """``evalport serve`` of ``agent`` (the instant one unless named) on ``port``."""
    command = [
        sys.executable,
        "-m",
        "evalport.protocol._cli",
        "serve",
        agent or f"{AGENT_FILE}:instant_agent",
        "--port",
        str(port),
        "--log-level",
        "warning",
        *options,
    ]
    process = subprocess.Popen(command, env={**os.environ, "EVALPORT_TOKEN": token})
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return process
        except urllib.error.HTTPError as error:
            error.close()
            return process
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise SystemExit("benchmark: evalport serve did not start") from None
            time.sleep(0.1)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # HttpTarget's default


def transport_of(wire: str) -> Any:
    """``None`` for httpx's own transport, else a fresh ``httpx-aiohttp`` transport."""
    if wire == "httpx":
        return None
    from httpx_aiohttp import AiohttpTransport

    return AiohttpTransport()


async def raw_cases(wire: str, base: str, token: str, count: int, concurrency: int) -> None:
    """``count`` cases (create a session, one turn, delete) straight through one
    ``httpx.AsyncClient``: the same calls, headers and bodies as ``HttpTarget`` sends;
    nothing is decoded but the session id."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    post = {**headers, "Content-Type": "application/json"}
    transport = transport_of(wire)
    async with httpx.AsyncClient(base_url=base, transport=transport, limits=LIMITS) as client:

        async def case(index: int) -> None:
            created = await client.post("/evals/sessions", content=b'{"caseId":"c"}', headers=post)
            session = msgspec.json.decode(created.content)["sessionId"]
            turn = f'{{"message":"question {index}"}}'.encode()
            key = {**post, "Idempotency-Key": uuid.uuid4().hex}
            answer = await client.post(
                f"/evals/sessions/{session}/turns", content=turn, headers=key
            )
            assert answer.status_code == 200, answer.status_code
            await client.delete(f"/evals/sessions/{session}", headers=headers)

        await _bounded(case, count, concurrency)


async def _bounded(case: Any, count: int, concurrency: int) -> None:
    """``concurrency`` workers take the next case until ``count`` ran (as the runner does)."""
    indices = iter(range(count))

    async def worker() -> None:
        for index in indices:
            await case(index)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def runner_cases(wire: str, base: str, token: str, count: int, concurrency: int) -> None:
    stream = "--stream" in sys.argv
    async with HttpTarget(base, token=token, transport=transport_of(wire), stream=stream) as target:
        await target.check()
        await evalport_wall(target, make_cases(count), concurrency)


def in_memory(request: httpx.Request) -> httpx.Response:
    """What ``evalport serve`` answers the runner's calls, without a server or a socket."""
    path = request.url.path
    if path.endswith("/health"):
        return httpx.Response(200, json={"protocol": "1.0", "capabilities": ["idempotency"]})
    if path.endswith("/evals/sessions"):
        return httpx.Response(201, json={"sessionId": "s1"})
    if path.endswith("/turns"):
        text = "echo: " + msgspec.json.decode(request.content)["message"]
        step = {"index": 0, "kind": "message", "text": text}
        run = {"sessionId": "s1", "status": "completed", "output": {"text": text}, "steps": [step]}
        return httpx.Response(200, json={"run": run})
    return httpx.Response(204)


def overhead(count: int, rounds: int) -> None:
    """The runner's own CPU per case: ``HttpTarget`` over ``httpx.MockTransport``."""

    async def run(concurrency: int) -> None:
        transport = httpx.MockTransport(in_memory)
        async with HttpTarget("http://agent.test", transport=transport) as target:
            await evalport_wall(target, make_cases(count), concurrency)

    print(f"runner overhead, {count} cases over an in-memory transport, best of {rounds}:")
    for concurrency in (8, 50):
        cpu = []
        for _ in range(rounds):
            gc.collect()
            started = time.process_time()
            asyncio.run(run(concurrency))
            cpu.append(time.process_time() - started)
        print(f"  concurrency {concurrency}: {min(cpu) / count * 1e6:,.0f} us CPU per case")


def server_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


HTTP_CLIENTS = {
    "httpx.AsyncClient (reference)": raw_cases,
    "evalport runner, HttpTarget": runner_cases,
}


def over_http(count: int, rounds: int) -> None:
    """Workload 3: each side at concurrency 8 and 50 against one ``evalport serve``."""
    token = secrets.token_urlsafe(24)
    port = free_port()
    process = serve(port, token)
    base = f"http://127.0.0.1:{port}"
    wires = ["httpx"]
    if importlib.util.find_spec("httpx_aiohttp"):
        wires.append("httpx-aiohttp")
    else:
        print(
            "httpx-aiohttp is not installed (.venv/bin/pip install httpx-aiohttp): its rows are skipped"
        )
    sides = [(client, wire) for wire in wires for client in HTTP_CLIENTS]
    results: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
    try:
        for concurrency in (8, 50):
            for round_ in range(rounds):  # interleaved: every side sees the same machine load
                for client, wire in sides if round_ % 2 == 0 else sides[::-1]:
                    work = HTTP_CLIENTS[client](wire, base, token, count, concurrency)
                    gc.collect()
                    served, cpu = server_cpu(process.pid), time.process_time()
                    started = time.perf_counter()
                    asyncio.run(work)
                    figures = (
                        time.perf_counter() - started,
                        time.process_time() - cpu,
                        server_cpu(process.pid) - served,
                    )
                    results.setdefault((client, wire, concurrency), []).append(figures)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    print(
        f"3. {count} cases over HTTP against evalport serve (instant agent; a case = create "
        f"a session, one turn, delete), medians of {rounds} interleaved rounds; client CPU "
        "per case at concurrency 8 and 50 and their ratio (cases per CPU second at 50 over 8):"
    )
    print(
        f"  {'client':<32}{'wire':<15}{'CPU c8':>9}{'CPU c50':>10}{'c50/c8':>8}"
        f"{'cases/s c8':>12}{'c50':>7}{'server CPU c50':>16}"
    )

    def median(client: str, wire: str, concurrency: int, index: int) -> float:
        values = sorted(figures[index] for figures in results[client, wire, concurrency])
        return values[len(values) // 2]

    for client, wire in sides:
        cpu8, cpu50 = (median(client, wire, c, 1) / count * 1e3 for c in (8, 50))
        speed8, speed50 = (count / median(client, wire, c, 0) for c in (8, 50))
        print(
            f"  {client:<32}{wire:<15}{cpu8:>6.2f} ms{cpu50:>7.2f} ms{cpu8 / cpu50:>7.2f}x"
            f"{speed8:>12,.0f}{speed50:>7,.0f}{median(client, wire, 50, 2) / count * 1e3:>13.2f} ms"
        )
    print(
        "  target: the evalport runner at most 1.5 ms of client CPU per case at 8 and at 50,"
        " c50/c8 at least 0.9x"
    )


def timed(measure: Any, *args: Any) -> tuple[float, float] | None:
    """``measure(*args)``'s wall time and this process's CPU time, after a collection."""
    gc.collect()
    cpu = time.process_time()
    wall = measure(*args)
    return None if wall is None else (wall, time.process_time() - cpu)


def best(rounds: int, measure: Any) -> float | None:
    """The shortest of ``rounds`` measurements (the least disturbed by other processes)."""
    walls = [timed(measure) for _ in range(rounds)]
    present = [wall[0] for wall in walls if wall is not None]
    return min(present) if present else None


TRACED_SIDES = ("untraced", "evalport", "sdk")


def tracing_overhead(cases: list[Case], concurrency: int, rounds: int) -> None:
    """4. The instant-agent workload traced by evalport (``evalport run --otlp``), by a
    bare SDK pipeline emitting the same spans, and untraced, interleaved; the wall time
    includes starting the provider and flushing the spans."""
    from _otlp_sink import running_sink
    from evalport.client import traced_trials

    provider, spans = _otel_sdk.in_memory()
    asyncio.run(_one_traced_trial(provider))
    template = _otel_sdk.captured(spans.get_finished_spans())

    def run(side: str, url: str) -> float:
        async def measure() -> float:
            started = time.perf_counter()
            provider = otlp_provider(url, "benchmark") if side != "untraced" else None
            trials = None
            if side == "evalport":
                trials = traced_trials(provider)
            elif side == "sdk":
                trials = bare_trials(provider, template)
            runner = Runner(
                LocalTarget(instant_agent),
                RunOptions(concurrency=concurrency, timeout=60),
                trial_function=trials,
            )
            await runner.run(cases)
            if provider is not None:
                await asyncio.to_thread(provider.shutdown)
            return time.perf_counter() - started

        return asyncio.run(measure())

    interleaved = 2 * rounds + 1
    print(f"4. {len(cases)} cases, instant agent, traced or not, {interleaved} rounds:")
    results: dict[str, list[tuple[float, float] | None]] = {side: [] for side in TRACED_SIDES}
    with running_sink() as url:
        otlp_provider(url, "benchmark").shutdown()  # importing the SDK is no round's work
        for round_ in range(interleaved):
            for side in TRACED_SIDES if round_ % 2 == 0 else TRACED_SIDES[::-1]:
                results[side].append(timed(run, side, url))
    per_trial = 1e6 / len(cases)
    cpu = {side: _median([r[1] * per_trial for r in rows if r]) for side, rows in results.items()}
    wall = {side: _median([r[0] for r in rows if r]) for side, rows in results.items()}
    plain = cpu["untraced"]
    print(
        f"  CPU per trial (medians, the SDK's thread included): untraced {plain:.0f} us,"
        f" bare SDK {cpu['sdk']:.0f} us (+{cpu['sdk'] - plain:.0f}), evalport-traced"
        f" {cpu['evalport']:.0f} us (+{cpu['evalport'] - plain:.0f})"
    )
    print(
        f"  evalport-traced / bare SDK: CPU per trial {cpu['evalport'] / cpu['sdk']:.2f}x,"
        f" added to a trial {(cpu['evalport'] - plain) / (cpu['sdk'] - plain):.2f}x;"
        f" wall over untraced: bare SDK {wall['sdk'] / wall['untraced']:.2f}x,"
        f" evalport-traced {wall['evalport'] / wall['untraced']:.2f}x"
    )


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def _one_traced_trial(provider: Any) -> None:
    """One trial of workload 4, traced by evalport (the spans the bare side emits)."""
    from evalport.client import traced_trials

    runner = Runner(LocalTarget(instant_agent), trial_function=traced_trials(provider))
    await runner.run(make_cases(1))


def bare_trials(provider: Any, template: Any) -> Any:
    """A trial function emitting ``template``'s spans for each trial through the SDK's API,
    nothing drawn: the trial span current while it runs, its spans under it after."""
    from evalport.client import run_trial
    from opentelemetry import trace

    tracer = provider.get_tracer("benchmark")

    async def traced(case: Any, target: Any, *, trial: int = 0, **options: Any) -> Any:
        attributes = {"evalport.case.id": case.id, "evalport.trial.index": trial}
        span = tracer.start_span(template.name, attributes=attributes)
        with trace.use_span(span):
            result = await run_trial(case, target, trial=trial, **options)
        _otel_sdk.finish(tracer, span, template)
        return result

    return traced


def main() -> None:
    global LATENCY
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--http-cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="best of this many runs per side")
    parser.add_argument("--http-only", action="store_true", help="workload 3 only")
    parser.add_argument("--tracing-only", action="store_true", help="workload 4 only")
    parser.add_argument(
        "--overhead", action="store_true", help="only the runner's CPU per case, no server"
    )
    parser.add_argument(
        "--stream", action="store_true", help="workload 3: the runner's turns streamed"
    )
    args = parser.parse_args()
    if args.overhead:
        overhead(args.http_cases, args.rounds)
        return
    if args.http_only:
        over_http(args.http_cases, args.rounds)
        return
    if args.tracing_only:
        tracing_overhead(make_cases(args.cases), args.concurrency, args.rounds)
        return
    LATENCY = args.latency
    n, c, rounds = args.cases, args.concurrency, args.rounds
    ideal = n / c * LATENCY
    cases = make_cases(n)
    if importlib.util.find_spec("pydantic_evals") is None:
        print(
            "pydantic-evals is not installed (.venv/bin/pip install pydantic-evals): its rows are skipped"
        )

    def ours(agent: Any) -> float:
        return asyncio.run(evalport_wall(LocalTarget(agent), cases, c))

    print(
        f"1. {n} single-turn cases, {LATENCY * 1000:.0f} ms agent, concurrency {c}, best of {rounds}:"
    )
    print(f"  ideal (N / concurrency x latency): {ideal:.3f} s")
    wall = best(rounds, lambda: ours(slow_agent))
    assert wall is not None
    print(f"  evalport runner:         {wall:.3f} s = {wall / ideal:.3f}x ideal (target <= 1.05x)")
    pe_wall = best(rounds, lambda: pydantic_evals_wall(slow_agent, n, c))
    if pe_wall is not None:
        print(f"  pydantic-evals evaluate: {pe_wall:.3f} s = {pe_wall / ideal:.3f}x ideal")

    interleaved = 2 * rounds + 1
    print(f"2. {n} cases, instant agent, concurrency {c}, {interleaved} interleaved rounds:")
    ours_times: list[tuple[float, float]] = []
    ratios, cpu_ratios = [], []
    for round_ in range(interleaved):  # alternate the sides so both see the same machine load
        mine = theirs = None
        for side in (0, 1) if round_ % 2 == 0 else (1, 0):
            if side == 0:
                mine = timed(ours, instant_agent)
            else:
                theirs = timed(pydantic_evals_wall, instant_agent, n, c)
        assert mine is not None
        ours_times.append(mine)
        if theirs is not None:
            ratios.append(theirs[0] / mine[0])
            cpu_ratios.append(theirs[1] / mine[1])
    walls = sorted(wall for wall, _ in ours_times)
    print(
        f"  evalport runner:         {n / walls[len(walls) // 2]:,.0f} cases/s median round "
        f"({n / walls[0]:,.0f} best; {min(cpu for _, cpu in ours_times) / n * 1e6:.0f} us CPU "
        "per case at best)"
    )
    if ratios:
        ratios.sort()
        cpu_ratios.sort()
        print(
            f"  evalport / pydantic-evals: {ratios[len(ratios) // 2]:.2f}x median of the rounds "
            f"({ratios[0]:.2f}-{ratios[-1]:.2f}x; target >= 2x); on CPU time "
            f"{cpu_ratios[len(cpu_ratios) // 2]:.2f}x ({cpu_ratios[0]:.2f}-{cpu_ratios[-1]:.2f}x)"
        )

    over_http(args.http_cases, args.rounds)
    tracing_overhead(cases, c, rounds)


if __name__ == "__main__":
    main()
