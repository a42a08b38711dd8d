"""Benchmark: decoding and redacting one large turn response, as HttpTarget does.

The body is what evalport's own server sends for one long turn: an agent recorded by the
real turn runtime takes 800 model steps, every third one calling an order-lookup tool
(arguments and a JSON result, both digested by the safe policy), the others thinking
aloud; the accumulated run is encoded as the adapter encodes it (~760 KB).

On the same bytes, in one process, it times N interleaved rounds (each round runs every
path once, so a burst of load on a shared machine hits all of them alike):

- baseline: ``msgspec.json.decode(body)`` into builtins, no checks, no redaction;
- evalport: :func:`evalport.protocol.decode_run` (lenient typed decode) plus
  ``TracePolicy.safe().apply(run, in_place=True)``, exactly HttpTarget's path.

(``benchmarks/redaction.py`` compares the policy with a plain version of its own rules.)

It prints each path's median and best time and two ratios baseline / path: the median over
rounds of the ratio within a round (the figure to read; 1.0 would make validation and
redaction free; its former >= 0.5 target is retired with the other targets on agents that
take no time) and the ratio of the best times. It never gates CI. Run:
``python benchmarks/client.py``; ``--every 1`` makes every step a tool step (the densest
case).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec
from evalport.protocol import (
    AgentRun,
    RunEnvelope,
    ToolCall,
    TracePolicy,
    Usage,
    decode_run,
    encode,
)
from evalport.protocol.runtime import AgentSession, SessionInfo, TurnContext

STEPS = 800
EVERY = 3


def turn_response(steps: int = STEPS, every: int = EVERY) -> bytes:
    """The response body of one turn of ``steps`` model steps, recorded for real."""

    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        for index in range(steps):
            if index % every:
                ctx.model_step(
                    content=f"Order A{10_000 + index} shipped; checking the promised date "
                    "against the carrier's estimate before answering the customer.",
                    usage=Usage(input=900, output=60),
                )
                continue
            arguments = {"order_id": f"A{10_000 + index}", "fields": ["status", "eta"]}
            ctx.model_step(
                content="Looking the order up.",
                tool_calls=[ToolCall(name="orders_lookup", arguments=arguments)],
                usage=Usage(input=800, output=30, cache_read=500),
            )
            with ctx.tool_execution("orders_lookup", arguments) as run:
                run.result = {
                    "status": "shipped",
                    "eta": f"2026-12-0{index % 9 + 1}",
                    "carrier": "DHL",
                    "tracking": f"JD0{index:09d}",
                }
        return "All orders were looked up."

    async def record() -> bytes:
        session = await AgentSession.open(agent, SessionInfo(session_id="bench"))
        await session.send("look every order up")
        return encode(RunEnvelope(run=session.run))

    return asyncio.run(record())


def evalport_path(body: bytes, policy: TracePolicy) -> AgentRun:
    return policy.apply(decode_run(body), in_place=True)


def interleaved(paths: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each path, one call of every path per round."""
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, path in paths.items():
            started = time.perf_counter()
            path()
            times[name].append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=100, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--every", type=int, default=EVERY, help="one tool step in N")
    options = parser.parse_args()
    body = turn_response(options.steps, options.every)
    policy = TracePolicy.safe()
    ours = evalport_path(body, policy)
    times = interleaved(
        {
            "msgspec.json.decode into builtins": lambda: msgspec.json.decode(body),
            "evalport decode_run + safe policy": lambda: evalport_path(body, policy),
        },
        options.repeat,
    )
    base = times["msgspec.json.decode into builtins"]
    tools = sum(len(step.tool_executions) for step in ours.steps)
    print(f"body: {len(body) / 1000:.0f} KB, {len(ours.steps)} steps, {tools} tool executions")
    print(
        f"{f'{options.repeat} interleaved rounds':36s}   median      best   ratio: per round, best"
    )
    for name, spent in times.items():
        # The baseline and this path ran back to back in each round: their ratio there is
        # little moved by load that comes and goes; its median is the figure to read.
        per_round = statistics.median(b / s for b, s in zip(base, spent, strict=True))
        print(
            f"{name + ':':36s}{statistics.median(spent) * 1e3:7.2f} ms {min(spent) * 1e3:7.2f} ms"
            f"   {per_round:.2f}x  {min(base) / min(spent):.2f}x"
        )


if __name__ == "__main__":
    main()
