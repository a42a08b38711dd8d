"""AG-UI benchmark: time to first token through AgUiTarget beside a raw SSE reader of the
same stream (issue 37: p95 within 2 ms at 100 concurrent streaming sessions).

An AG-UI agent runs in its own process on loopback: one Starlette route that answers a
``RunAgentInput`` with the events a streaming agent sends (``RUN_STARTED``, a text
message whose first delta comes after ``--think`` seconds, then ``--deltas`` more,
``RUN_FINISHED`` with usage), encoded by the AG-UI SDK's ``EventEncoder``.

Each round runs one reader, in a process of its own (so the raw reader imports neither
evalport nor the AG-UI SDK), against an agent process of its own; rounds alternate
between the readers (raw first, then the target first), so that drift of the machine hits
both alike. A reader drives ``--sessions`` concurrent sessions of ``--turns`` turns each,
each session starting at a random moment within the first ``--think`` seconds, out of
step as users are (the same moments for both readers):

- **AgUiTarget**: as ``evalport run`` drives it, each session a case of one ``Runner``
  run that sends its turns with ``ctx.send`` (decoding with the SDK's types, the run built
  and redacted) and asserts on the reply; its time to first token is the turn's
  ``TurnTiming.first_token``;
- **raw**: the same ``POST`` with the same conversation (the replies too) read with
  ``httpx-sse``, each event parsed with ``json.loads``; its time to first token runs from just before the
  ``POST`` to the first ``TEXT_MESSAGE_CONTENT``.

The raw reader has an ``httpx.AsyncClient`` per session (one pool of one connection, the
floor); the target its own clients, a few sessions each (``client/_core/_clients.py``).
Each session first sends one turn that is not counted, ten sessions at a time and retried
if its connect is lost: it opens the session's connection, and on a loaded machine a
burst of 100 connects can lose SYNs to the listen queue, whose retransmissions (a second
and more) would measure the kernel, not the reader. It prints p50, p95 and p99 of both,
and the difference of their p95s; and, to tell a reader's cost from the machine's noise,
each reader's CPU per counted turn (its process's, the turns' phase only) and the garbage
collector's pauses in that phase (a full collection holds every first token due in it).

Run: ``.venv/bin/python benchmarks/agui.py`` (about a minute and a half). It prints figures;
it never fails a build.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

TARGET_MS = 2.0


class _Phase:
    """The counted turns of a round: the CPU they took, the collector's pauses in them."""

    def __init__(self) -> None:
        self.cpu = 0.0  # seconds, once ended
        self._cpu_began = 0.0
        self.pauses: list[tuple[int, float]] = []  # (generation, seconds)
        self.found: list[float] = []  # each counted turn's time to first token
        self._collection_began = 0.0

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._collection_began = time.perf_counter()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._collection_began))

    def begin(self) -> None:
        gc.callbacks.append(self._collected)
        self._cpu_began = time.process_time()

    def end(self) -> None:
        self.cpu = time.process_time() - self._cpu_began
        gc.callbacks.remove(self._collected)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(port: int, think: float, deltas: int) -> None:
    import uvicorn
    from ag_ui.core import (
        EventType,
        RunAgentInput,
        RunFinishedEvent,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        TokenUsage,
    )
    from ag_ui.encoder import EventEncoder
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, StreamingResponse
    from starlette.routing import Route

    async def agent(request: Request) -> StreamingResponse:
        run = RunAgentInput.model_validate_json(await request.body())
        encoder = EventEncoder(accept=request.headers.get("accept"))

        async def events():  # type: ignore[no-untyped-def]
            yield encoder.encode(RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
            message = uuid.uuid4().hex
            yield encoder.encode(TextMessageStartEvent(message_id=message, role="assistant"))
            await asyncio.sleep(think)
            for index in range(deltas + 1):
                delta = TextMessageContentEvent(message_id=message, delta=f"word{index} ")
                yield encoder.encode(delta)
                await asyncio.sleep(0)
            yield encoder.encode(TextMessageEndEvent(message_id=message))
            usage = TokenUsage(input_tokens=40, output_tokens=deltas + 1)
            finished = RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id, usage=[usage])
            yield encoder.encode(finished)

        assert EventType.RUN_STARTED  # the SDK's events, not hand-written ones
        return StreamingResponse(events(), media_type=encoder.get_content_type())

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/agent", agent, methods=["POST"]), Route("/health", health)])
    # Connections stay open between turns (a client pool keeps them): the warm-up turns of
    # the first sessions would otherwise outlive uvicorn's 5 s keep-alive.
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=120,
    )


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the agent at {url} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer")


async def _warm(
    call: Callable[[], Awaitable[object]], gate: asyncio.Semaphore, lost: type[Exception]
) -> None:
    """One unmeasured call that opens a connection: ten at a time, retried when a connect
    is lost (see the module docstring)."""
    async with gate:
        for attempt in range(5):
            try:
                await call()
                return
            except lost:
                await asyncio.sleep(0.2 * (attempt + 1))
    raise SystemExit("could not open a connection to the agent in 5 attempts")


def _offsets(sessions: int, think: float) -> list[float]:
    """When each session starts, within the first ``think`` seconds: the same for both
    readers (one seed), so both meet the same schedule."""
    draw = random.Random(37)
    return [draw.uniform(0, think) for _ in range(sessions)]


async def _target_round(url: str, sessions: int, turns: int, think: float) -> _Phase:
    """The sessions as ``evalport run`` drives them: a case each, run by the ``Runner``."""
    from evalport.client import AgUiTarget, Case, EvalContext, Runner, RunOptions
    from evalport.protocol import TargetUnavailable

    phase = _Phase()
    gate = asyncio.Semaphore(10)
    warm: list[object] = []
    done: list[object] = []
    all_warm = asyncio.Event()

    def session(offset: float) -> Callable[[EvalContext], Awaitable[None]]:
        async def case(ctx: EvalContext) -> None:
            await _warm(lambda: ctx.send("hello"), gate, TargetUnavailable)
            warm.append(ctx)
            if len(warm) == sessions:
                phase.begin()
                all_warm.set()
            await all_warm.wait()
            await asyncio.sleep(offset)
            for _ in range(turns):
                timing = (await ctx.send("hello")).timing
                if timing is not None and timing.first_token is not None:
                    phase.found.append(timing.first_token)
            done.append(ctx)
            if len(done) == sessions:
                phase.end()  # the counted turns only, as the raw reader's phase
            ctx.contains("word0")  # a case asserts on its run, as a user's does

        return case

    cases = [
        Case(id=f"session{index}", func=session(offset))
        for index, offset in enumerate(_offsets(sessions, think))
    ]
    options = RunOptions(concurrency=sessions, timeout=600.0)
    async with AgUiTarget(url, timeout=60.0) as target:
        report = await Runner(target, options).run(cases)
    errors = {trial.error for result in report.results for trial in result.trials if trial.error}
    if errors:
        raise SystemExit(f"the target's round failed: {sorted(errors)[:3]}")
    return phase


async def _raw_round(url: str, sessions: int, turns: int, think: float) -> _Phase:
    from httpx_sse import EventSource

    phase = _Phase()
    headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
    gate = asyncio.Semaphore(10)
    clients = [httpx.AsyncClient(headers=headers, timeout=60.0) for _ in range(sessions)]
    try:

        async def turn(
            client: httpx.AsyncClient, thread: str, messages: list[dict[str, str]]
        ) -> float | None:
            messages.append({"id": uuid.uuid4().hex, "role": "user", "content": "hello"})
            body = json.dumps(
                {
                    "threadId": thread,
                    "runId": uuid.uuid4().hex,
                    "messages": messages,
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
            ).encode()
            sent = time.perf_counter()
            first = None
            reply: dict[str, str] = {}
            async with client.stream("POST", url, content=body) as response:
                async for event in EventSource(response).aiter_sse():
                    data = json.loads(event.data)
                    if data["type"] == "TEXT_MESSAGE_START":
                        reply = {"id": data["messageId"], "role": "assistant", "content": ""}
                    elif data["type"] == "TEXT_MESSAGE_CONTENT":
                        if first is None:
                            first = time.perf_counter() - sent
                        reply["content"] += data["delta"]
            if reply:  # the conversation the next run sends, as the target's
                messages.append(reply)
            return first

        threads = [(client, uuid.uuid4().hex, []) for client in clients]
        await asyncio.gather(
            *(_warm(lambda t=t: turn(*t), gate, httpx.TransportError) for t in threads)
        )

        async def session(
            offset: float, client: httpx.AsyncClient, thread: str, messages: list[dict[str, str]]
        ) -> None:
            await asyncio.sleep(offset)
            for _ in range(turns):
                first = await turn(client, thread, messages)
                if first is not None:
                    phase.found.append(first)

        phase.begin()
        offsets = _offsets(sessions, think)
        await asyncio.gather(*(session(o, *t) for o, t in zip(offsets, threads, strict=True)))
        phase.end()
    finally:
        for client in clients:
            await client.aclose()
    return phase


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[94] * 1000, cuts[98] * 1000


READERS: dict[str, Callable[[str, int, int, float], Awaitable[_Phase]]] = {
    "AgUiTarget": _target_round,
    "raw SSE": _raw_round,
}


def _read(reader: str, url: str, args: argparse.Namespace) -> None:
    """A round's reader, in a process of its own: it imports only what it needs (the raw
    reader neither evalport nor the AG-UI SDK, whose objects a full collection walks)."""
    phase = asyncio.run(READERS[reader](url, args.sessions, args.turns, args.think))
    print(json.dumps({"cpu": phase.cpu, "pauses": phase.pauses, "found": phase.found}))


def _round(reader: str, args: argparse.Namespace) -> dict[str, Any]:
    """One round of ``reader`` against an agent of its own, on a port of its own (a round
    after another on the same agent met connects refused for seconds on loopback)."""
    port = _free_port()
    here = [sys.executable, str(Path(__file__).resolve())]
    shape = ["--think", str(args.think), "--deltas", str(args.deltas)]
    agent = subprocess.Popen([*here, "--serve", str(port), *shape])
    try:
        _wait(f"http://127.0.0.1:{port}/health", agent)
        url = f"http://127.0.0.1:{port}/agent"
        counts = ["--sessions", str(args.sessions), "--turns", str(args.turns)]
        done = subprocess.run(
            [*here, "--reader", reader, "--url", url, *shape, *counts],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"the {reader} round failed:\n{done.stderr}")
        result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return result
    finally:
        agent.terminate()
        agent.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5, help="turns per session and round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each reader")
    parser.add_argument("--think", type=float, default=1.0, help="seconds to the first token")
    parser.add_argument("--deltas", type=int, default=5, help="text deltas after the first")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reader", choices=READERS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        _serve(args.serve, args.think, args.deltas)
        return
    if args.reader is not None:
        _read(args.reader, args.url, args)
        return
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in READERS}
    for index in range(args.rounds):  # raw first, then the target first: drift cancels
        order = ("raw SSE", "AgUiTarget") if index % 2 == 0 else ("AgUiTarget", "raw SSE")
        for name in order:
            rounds[name].append(_round(name, args))
    found = {name: [t for r in done for t in r["found"]] for name, done in rounds.items()}
    print(
        f"time to first token, {args.sessions} concurrent AG-UI sessions, "
        f"{len(found['AgUiTarget'])} and {len(found['raw SSE'])} turns, "
        f"agent thinks {args.think * 1000:.0f} ms"
    )
    print(f"{'':>12} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'CPU/turn':>9} {'GC pauses':>24}")
    for name, done in rounds.items():
        p50, p95, p99 = _quantiles(found[name])
        pauses = [pause for r in done for pause in r["pauses"]]
        full = [seconds for generation, seconds in pauses if generation == 2]
        longest = max((seconds for _, seconds in pauses), default=0.0)
        collector = f"{len(full)} full, longest {longest * 1000:.1f} ms"
        cpu = sum(r["cpu"] for r in done) / len(found[name]) * 1000
        print(f"{name:>12} {p50:9.2f} {p95:9.2f} {p99:9.2f} {cpu:6.2f} ms {collector:>24}")
    difference = _quantiles(found["AgUiTarget"])[1] - _quantiles(found["raw SSE"])[1]
    verdict = "within" if difference <= TARGET_MS else "over"
    print(f"p95 difference: {difference:+.2f} ms ({verdict} the {TARGET_MS:g} ms target)")


if __name__ == "__main__":
    main()
