"""Wire benchmark: decode a large accumulated run into typed Structs, and encode it back.

The run has 800 steps (about 850 KB of JSON): every step a requested tool call, its
execution with arguments and a result, usage and timestamps, every fourth one an assistant
message too, as an agent that loops over tools produces them. The benchmark times

- ``msgspec.json.decode`` of the bytes into plain builtins (dicts and lists): the baseline;
- the typed decode into :class:`evalport.protocol.AgentRun` (one ``msgspec`` decoder);
- :func:`evalport.protocol.decode_run`, the client's full lenient path (envelope, argument
  normalisation, ``tools`` and usage checks);
- :func:`evalport.protocol.encode` of the typed run back to bytes;

and prints each against the baseline. Target: the typed decode runs at least 1.5x as fast
as the builtins decode. It prints figures; it never fails a build.

Run: ``.venv/bin/python benchmarks/wire.py`` (or ``make bench``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from evalport.protocol import AgentRun, decode_run, encode

STEPS = 800
TARGET = 1.5


def _timestamp(second: int) -> str:
    return f"2026-11-29T12:{second // 60 % 60:02d}:{second % 60:02d}.{second % 1000:03d}Z"


def sample_run(steps: int = STEPS) -> bytes:
    """The JSON of a run of ``steps`` tool-using steps (deterministic ids)."""
    ids = uuid.UUID(int=1)
    rows: list[dict[str, Any]] = []
    for index in range(steps):
        call_id = f"call_{index:05d}"
        arguments = {"order_id": f"A{1000 + index}", "qty": 2}
        result = {"refunded": True, "amount": 19.99}
        rows.append(
            {
                "id": str(uuid.UUID(int=ids.int + 2 * index)),
                "turn": 1 + index // 100,
                "index": index,
                "type": "tool_execution",
                "outputMessages": [{"role": "assistant", "content": "Refunding."}]
                if index % 4 == 0
                else [],
                "requestedToolCalls": [{"id": call_id, "name": "refund", "arguments": arguments}],
                "toolExecutions": [
                    {
                        "id": str(uuid.UUID(int=ids.int + 2 * index + 1)),
                        "name": "refund",
                        "toolCallId": call_id,
                        "arguments": arguments,
                        "hasError": False,
                        "error": None,
                        "result": result,
                        "startedAt": _timestamp(index),
                        "completedAt": _timestamp(index + 1),
                    }
                ],
                "finishReason": "tool_calls",
                "usage": {
                    "input": 1200 + index,
                    "output": 85,
                    "cacheWrite": 0,
                    "cacheRead": 512,
                    "reasoning": 0,
                },
                "startedAt": _timestamp(index),
                "completedAt": _timestamp(index + 1),
                "duration": 0.734,
                "stopSignal": None,
                "errors": [],
                "hasErrors": False,
            }
        )
    run = msgspec.convert(
        {"reply": "All refunds are done.", "status": "completed", "turns": 8, "steps": rows},
        AgentRun,
    )
    run.sync_tools()
    run.sync_usage()
    return msgspec.json.encode({"run": run})


def best_of(function: Callable[[], object], rounds: int = 15) -> float:
    """The fastest of ``rounds`` timings of ``function``, in seconds."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    data = sample_run()
    run_only = msgspec.json.encode(msgspec.json.decode(data)["run"])
    typed = msgspec.json.Decoder(AgentRun)
    builtins = msgspec.json.Decoder()
    decoded = typed.decode(run_only)

    baseline = best_of(lambda: builtins.decode(run_only))
    rows = [
        ("typed decode (AgentRun)", best_of(lambda: typed.decode(run_only))),
        ("decode_run (lenient, normalised)", best_of(lambda: decode_run(data))),
        ("encode (AgentRun -> bytes)", best_of(lambda: encode(decoded))),
    ]
    print(f"run: {len(decoded.steps)} steps, {len(run_only) / 1000:.0f} KB")
    print(f"{'builtins decode (baseline)':34} {baseline * 1000:8.2f} ms")
    for name, seconds in rows:
        print(f"{name:34} {seconds * 1000:8.2f} ms   {baseline / seconds:5.2f}x baseline speed")
    ratio = baseline / rows[0][1]
    verdict = "meets" if ratio >= TARGET else "misses"
    print(f"typed decode is {ratio:.2f}x the builtins decode ({verdict} the {TARGET}x target)")


if __name__ == "__main__":
    main()
