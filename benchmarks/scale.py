"""Benchmark: suites at the concurrency real use needs (issue 36).

``evalport run`` of N one-turn cases (a dataset of N rows, one ``contains`` each), through
the CLI as a user runs it, at concurrency 20, 100 and 400:

- against ``evalport serve`` of an agent that answers after one second, and beside it a
  raw ``httpx.AsyncClient`` (one client, its pool sized to the concurrency) sending the
  same three requests per case (create a session, one turn, delete);
- with ``--target agui+http://...`` against ``agui.py``'s AG-UI agent, whose first token
  comes after one second;
- then with ``--local`` at concurrency 2,000 (50,000 cases).

Printed per row: wall time over the ideal (cases / concurrency x 1 s); the client's CPU
per case (the ``evalport run`` process less what a one-case run costs to start, or this
process for the raw client); the server's CPU per turn (``/proc``, Linux); each CPU over
the same side's at the lowest concurrency.

Targets: the client's CPU per case flat from 20 to 400 (within 1.5x); 2,000 cases at 400
at most 1.3x ideal, over HTTP and AG-UI alike; ``--local`` at 2,000 at most 1.10x; the
server's CPU per turn at 400 within 1.5x of that at 20. Machines here are noisy and
shared: compare the ratios side by side; it never gates CI. Run: ``python
benchmarks/scale.py`` (``--sizes 20:400,100:1000,400:2000``, ``--local-cases``,
``--local-concurrency``, ``--skip-local``, ``--skip-raw``, ``--skip-agui``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from runner import free_port, serve

LATENCY = 1.0
HERE = Path(__file__).resolve().parent

EVAL_FILE = """
from evalport.client import eval_case

ROWS = [{{"id": f"row{{index}}", "n": index}} for index in range({count})]


@eval_case("one turn", dataset=ROWS)
async def one_turn(ctx, row):
    turn = await ctx.send(f"question {{row['n']}}")
    ctx.contains({expect})
"""
EXPECT_ECHO = "f\"echo: question {row['n']}\""
EXPECT_AGUI = '"word0"'  # the first word agui.py's agent streams


async def sleepy_agent(message: str, history: list[Any], ctx: Any) -> str:
    """The agent under test: one model call's worth of waiting, then an answer."""
    await asyncio.sleep(LATENCY)
    return f"echo: {message}"


def server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_run(
    folder: Path,
    count: int,
    concurrency: int,
    target: list[str],
    token: str,
    expect: str = EXPECT_ECHO,
) -> tuple[float, float]:
    """``evalport run`` of ``count`` cases: wall seconds and the process's CPU seconds."""
    (folder / "evals").mkdir(exist_ok=True)
    (folder / "evals" / "eval_scale.py").write_text(EVAL_FILE.format(count=count, expect=expect))
    command = [
        sys.executable,
        "-m",
        "evalport.protocol._cli",
        "run",
        str(folder / "evals"),
        *target,
        "--concurrency",
        str(concurrency),
        "--out",
        str(folder / "runs" / f"{count}-{concurrency}-{time.monotonic_ns()}"),
    ]
    env = {**os.environ, "EVALPORT_TOKEN": token, "PYTHONPATH": str(HERE)}
    cpu, started = children_cpu(), time.perf_counter()
    done = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
        raise SystemExit("benchmark: evalport run failed:\n" + "\n".join(tail))
    return wall, cpu


async def raw_client(base: str, token: str, count: int, concurrency: int) -> None:
    """The same three requests per case through one plain ``httpx.AsyncClient`` (a
    transport error fails that case alone, counted)."""
    failures: list[str] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        base_url=base, headers=headers, limits=limits, timeout=60
    ) as client:
        gate = asyncio.Semaphore(concurrency)

        async def case(index: int) -> None:
            async with gate:
                try:
                    created = await client.post("evals/sessions", json={})
                    session = created.json()["sessionId"]
                    turn = await client.post(
                        f"evals/sessions/{session}/turns", json={"message": f"question {index}"}
                    )
                    if f"echo: question {index}" not in turn.json()["run"]["reply"]:
                        raise SystemExit("benchmark: the raw client got a wrong reply")
                    await client.delete(f"evals/sessions/{session}")
                except httpx.TransportError as error:  # counted: the row says how many
                    failures.append(type(error).__name__)

        await asyncio.gather(*(case(index) for index in range(count)))
    if failures:
        print(f"  the raw client: {len(failures)} case(s) failed: {sorted(set(failures))}")


def raw_run(base: str, token: str, count: int, concurrency: int) -> tuple[float, float]:
    cpu, started = time.process_time(), time.perf_counter()
    asyncio.run(raw_client(base, token, count, concurrency))
    return time.perf_counter() - started, time.process_time() - cpu


def agui_rows(
    folder: Path, sizes: list[tuple[int, ...]], token: str
) -> list[tuple[str, int, int, float, float, float]]:
    """``evalport run --target agui+...`` against ``agui.py``'s AG-UI agent (its first
    token after one second), at each size."""
    port = free_port()
    command = [sys.executable, str(HERE / "agui.py"), "--serve", str(port), "--think", "1.0"]
    agent = subprocess.Popen(command)
    rows = []
    try:
        wait_for(f"http://127.0.0.1:{port}/health")
        target = ["--target", f"agui+http://127.0.0.1:{port}/agent"]
        for concurrency, count in sizes:
            served = server_cpu(agent.pid)
            wall, cpu = cli_run(folder, count, concurrency, target, token, EXPECT_AGUI)
            turn_cpu = (server_cpu(agent.pid) - served) / count
            rows.append(("evalport run agui+", concurrency, count, wall, cpu, turn_cpu))
            print(f"  evalport run agui+ c{concurrency} n{count}: {wall:.1f} s", flush=True)
    finally:
        agent.terminate()
        agent.wait(timeout=30)
    return rows


def wait_for(url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise SystemExit(f"benchmark: {url} did not answer") from None
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20:400,100:1000,400:2000", help="CONC:CASES,...")
    parser.add_argument("--local-cases", type=int, default=50_000)
    parser.add_argument("--local-concurrency", type=int, default=2_000)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-raw", action="store_true")
    parser.add_argument("--skip-agui", action="store_true", help="no AgUiTarget rows")
    args = parser.parse_args()
    sizes = [tuple(int(part) for part in size.split(":")) for size in args.sizes.split(",")]

    token = secrets.token_urlsafe(24)
    port = free_port()
    server = serve(port, token, f"{Path(__file__)}:sleepy_agent", "--max-sessions", "100000")
    base = f"http://127.0.0.1:{port}/"
    rows: list[tuple[str, int, int, float, float, float]] = []
    startup = 0.0
    try:
        with tempfile.TemporaryDirectory() as folder:
            # What a run costs before its first case (the interpreter, imports, discovery),
            # taken off each CLI row's CPU: a row's CPU per case is its cases' alone.
            startup = cli_run(Path(folder), 1, 1, ["--target", base], token)[1]
            for concurrency, count in sizes:
                sides = [
                    (
                        "evalport run --target",
                        lambda c=count, n=concurrency: cli_run(
                            Path(folder), c, n, ["--target", base], token
                        ),
                    )
                ]
                if not args.skip_raw:
                    sides.append(
                        (
                            "raw httpx.AsyncClient",
                            lambda c=count, n=concurrency: raw_run(base, token, c, n),
                        )
                    )
                for name, measure in sides:
                    served = server_cpu(server.pid)
                    wall, cpu = measure()
                    turn_cpu = (server_cpu(server.pid) - served) / count
                    rows.append((name, concurrency, count, wall, cpu, turn_cpu))
                    print(f"  {name} c{concurrency} n{count}: {wall:.1f} s", flush=True)
            if not args.skip_agui:
                rows += agui_rows(Path(folder), sizes, token)
            if not args.skip_local:
                agent = f"{Path(__file__)}:sleepy_agent"
                count, concurrency = args.local_cases, args.local_concurrency
                wall, cpu = cli_run(Path(folder), count, concurrency, ["--local", agent], token)
                rows.append(("evalport run --local", concurrency, count, wall, cpu, 0.0))
    finally:
        server.terminate()
        server.wait(timeout=30)

    print(f"\nstart-up of evalport run: {startup:.2f} s of CPU, taken off each of its rows")
    print(
        f"{'side':24}{'conc':>6}{'cases':>7}{'wall/ideal':>12}{'client CPU/case':>17}"
        f"{'vs lowest':>11}{'server CPU/turn':>17}{'vs lowest':>11}"
    )
    lowest: dict[str, tuple[float, float]] = {}
    for name, concurrency, count, wall, cpu, turn_cpu in rows:
        ideal = count / concurrency * LATENCY
        per_case = (cpu - (startup if name.startswith("evalport run") else 0.0)) / count * 1000
        base_case, base_turn = lowest.setdefault(name, (per_case, turn_cpu * 1000))
        turn_ms = turn_cpu * 1000
        print(
            f"{name:24}{concurrency:>6}{count:>7}{wall / ideal:>11.2f}x{per_case:>14.2f} ms"
            f"{per_case / base_case:>10.2f}x"
            + (f"{turn_ms:>14.2f} ms{turn_ms / base_turn:>10.2f}x" if turn_ms else "")
        )


if __name__ == "__main__":
    main()
