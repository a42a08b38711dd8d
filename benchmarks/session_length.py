"""Benchmark: one long session, whole runs against delta responses (``?since=N``).

Two sessions of the same agent run side by side on one adapter, turn by turn: one read
as whole runs (protocol 1.0), one read as deltas. Each turn makes one small tool call.
Per turn it records

- **bytes**: the response body on the wire;
- **server CPU**: the CPU time of the adapter's ASGI app for the turn (the agent, the
  session's bookkeeping, the store, the response's encoding), measured with
  ``time.thread_time`` around the app in this one-threaded process;
- **client CPU**: what HttpTarget does with the body: decode and ``TracePolicy.safe()``
  redaction (whole: of the whole run; delta: of the new items, then
  :func:`~evalport.protocol.apply_delta` growing the run the client holds), and the
  turn cut from it (``next_turn``: the turn's steps, its run kept as of the turn), with
  the same functions ``client/_http.py`` and ``client/_turns.py`` call. Every turn is
  kept, as ``ctx.turns`` keeps them.

It prints, at turns 10, 100 and 1,000 (each the median of the five turns ending there),
the figures of both modes, the ratio turn N / turn 10 in delta mode (target: turn
1,000 within 2x turn 10) and the total bytes, whole / delta (target: at least 20x). It
also replays the delta answers through a fresh client with no server in the process (the
server's work on a long run, in the same process, slows what runs after it). It checks
that the delta session's reassembled run equals its whole run, and that turn 10's run,
read at the end, is the run as of turn 10. Then it plays a delta session alone (no
whole-run session beside it, whose garbage and megabyte bodies land in the delta
session's turns too) and prints its server CPU per turn, as the median of 50 turns at
each point, and the same traced (each turn drawn as spans through the SDK, then
dropped: what drawing costs as the session grows). It never gates a build.

Run: ``.venv/bin/python benchmarks/session_length.py [--turns 1000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from evalport.client._core._target import RunAt, Turn
from evalport.client._core._turns import next_turn
from evalport.protocol import (
    AgentRun,
    Message,
    RunDelta,
    TracePolicy,
    apply_delta,
    decode_answer,
    decode_run,
)
from evalport.protocol.runtime import TurnContext, tool
from evalport.server import EvalAdapter, Limits
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

TOKEN = "bench-token-0123456789"
POINTS = (10, 100, 1000)
WINDOW = 5


@tool
def lookup_order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped", "eta": "2 days"}


async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    order = lookup_order(message)
    return f"order {order['order_id']} is {order['status']}"


class Timed:
    """The adapter's ASGI app, with the CPU time of each call recorded."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.last = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = time.thread_time()
        await self.app(scope, receive, send)
        self.last = time.thread_time() - started


class Reader:
    """One session's client side: its copy of the run and the cost of each answer."""

    def __init__(self, session_id: str, delta: bool) -> None:
        self.delta = delta
        self.session_id = session_id
        first = AgentRun(session_id=session_id)
        self.at = RunAt.growing(first) if delta else RunAt(first)  # as HttpSession holds it
        self.turns: list[Turn] = []
        self.policy = TracePolicy.safe()
        self.bytes: list[int] = []
        self.bodies: list[bytes] = []
        self.server: list[float] = []
        self.client: list[float] = []

    def query(self) -> str:
        return f"?since={self.at.head.turns}" if self.delta else ""

    def receive(self, body: bytes, server: float, message: str) -> None:
        started = time.thread_time()
        if self.delta:
            answer = decode_answer(body)
            assert isinstance(answer, RunDelta)
            answer.run = self.policy.apply(answer.run, in_place=True)
            now = RunAt.growing(apply_delta(self.at.head, answer, grow=True))
        else:
            now = RunAt(self.policy.apply(decode_run(body), in_place=True))
        self.turns.append(next_turn(self.at, now, message))
        self.at = now
        self.client.append(time.thread_time() - started)
        self.server.append(server)
        self.bytes.append(len(body))
        self.bodies.append(body)


class _Dropped(SpanExporter):
    """Ends every span's way in the server: drawing and the SDK's work, no sending."""

    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def play(
    turns: int, modes: tuple[bool, ...] = (False, True), *, traced: bool = False
) -> tuple[list[Reader], bool]:
    limits = Limits(max_run_bytes=1 << 30, idempotency_keys=16)
    provider: Any = False
    if traced:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_Dropped()))
    adapter = EvalAdapter(agent, token=TOKEN, limits=limits, tracing=provider)
    app = Timed(adapter.app())
    headers = {"Authorization": f"Bearer {TOKEN}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x", headers=headers) as http:
        readers, early = [], AgentRun()
        for delta in modes:
            created = await http.post("/evals/sessions", json={})
            readers.append(Reader(created.json()["sessionId"], delta))
        for number in range(1, turns + 1):
            for reader in readers:
                response = await http.post(
                    f"/evals/sessions/{reader.session_id}/turns{reader.query()}",
                    json={"message": f"A{number}"},
                    headers={"Idempotency-Key": f"k{number}"},
                )
                assert response.status_code == 200, response.text
                reader.receive(response.content, app.last, f"A{number}")
            if number == min(10, turns):  # the run as of turn 10, for the check below
                read = await http.get(f"/evals/sessions/{readers[-1].session_id}")
                early = TracePolicy.safe().apply(decode_run(read.content), in_place=True)
        delta = readers[-1]
        final = await http.get(f"/evals/sessions/{delta.session_id}")
        same = TracePolicy.safe().apply(decode_run(final.content), in_place=True) == delta.at.run
        # turn 10's run, read after the later turns grew the run, is still as of turn 10
        same = same and delta.turns[min(10, turns) - 1].run == early
    await adapter.aclose()
    return readers, same


def at(values: list[float], turn: int) -> float:
    return statistics.median(values[max(turn - WINDOW, 0) : turn])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    turns = parser.parse_args().turns
    points = [point for point in POINTS if point <= turns]
    (whole, delta), same = asyncio.run(play(turns))
    print(
        f"one session per mode, {turns} turns, one tool call each; the delta session's "
        f"reassembled run equals its whole run, and turn 10's run as of turn 10: {same}"
    )
    assert same, "the delta mode reassembled another run"
    rows = [
        ("bytes", "bytes", 1.0, "{:,.0f}"),
        ("server CPU", "server", 1e3, "{:.3f} ms"),
        ("client CPU", "client", 1e3, "{:.3f} ms"),
    ]
    header = "".join(f"{f'turn {p}':>26}" for p in points)
    print(f"\n{'per turn':<22}{header}")
    for label, attribute, scale, shape in rows:
        for reader in (whole, delta):
            values = getattr(reader, attribute)
            cells = "".join(f"{shape.format(at(values, p) * scale):>26}" for p in points)
            print(f"{label + (' delta' if reader.delta else ' whole'):<22}{cells}")
    print("\ndelta mode, turn N / turn 10 (target at 1,000: 2x at most)")
    for label, attribute, *_ in rows:
        values = getattr(delta, attribute)
        ratios = "  ".join(f"turn {p}: {at(values, p) / at(values, 10):.2f}x" for p in points[1:])
        print(f"  {label:<12} {ratios}")
    replayed = Reader(delta.session_id, delta=True)
    for number, body in enumerate(delta.bodies, 1):
        replayed.receive(body, 0.0, f"A{number}")
    ratios = "  ".join(
        f"turn {p}: {at(replayed.client, p) / at(replayed.client, 10):.2f}x" for p in points[1:]
    )
    print(f"  client CPU, the delta answers replayed alone (no server in the process): {ratios}")
    print("\nwhole / delta at the same turn")
    for label, attribute, *_ in rows:
        cells = "  ".join(
            f"turn {p}: {at(getattr(whole, attribute), p) / at(getattr(delta, attribute), p):.1f}x"
            for p in points
        )
        print(f"  {label:<12} {cells}")
    total_whole, total_delta = sum(whole.bytes), sum(delta.bytes)
    print(
        f"\ntotal bytes: whole {total_whole:,}, delta {total_delta:,}: "
        f"{total_whole / total_delta:.1f}x less with delta (target: 20x)"
    )
    for label, attribute in (("server CPU", "server"), ("client CPU", "client")):
        spent_whole, spent_delta = sum(getattr(whole, attribute)), sum(getattr(delta, attribute))
        print(
            f"total {label}: whole {spent_whole:.2f} s, delta {spent_delta:.2f} s: "
            f"{spent_whole / spent_delta:.1f}x"
        )

    spans = [(max(point - 50, 0), point) for point in points]
    for traced in (False, True):
        ([alone], _) = asyncio.run(play(turns, modes=(True,), traced=traced))
        medians = [statistics.median(alone.server[lo:hi]) for lo, hi in spans]
        cells = "  ".join(
            f"turns {lo + 1}-{hi}: {median * 1e3:.3f} ms"
            for (lo, hi), median in zip(spans, medians, strict=True)
        )
        what = "traced (spans drawn, then dropped)" if traced else "alone"
        print(f"\nserver CPU, a delta session {what} (median of 50 turns): {cells}")
        print(f"  last / first: {medians[-1] / medians[0]:.2f}x")


if __name__ == "__main__":
    main()
