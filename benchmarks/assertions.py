"""Assertion benchmark: evaluate 30 assertions over a 200-step run, against decoding it.

The run has 200 steps over 10 turns: every step requests and executes one of five tools
(arguments, a result, every 25th call failing, every 10th gated and approved), every
fourth step carries assistant text, and the agent emits an event per step. The benchmark
times

- :func:`evalport.protocol.decode_run` of the run's JSON, the client's decoding path;
- 30 assertions of the catalogue (tools with argument and result matchers, order modes,
  counts, budgets, events, approvals, outcome, text) evaluated on that run, verbatim and
  redacted by ``TracePolicy.safe()``, with the trajectory view rebuilt every round (no
  memoised view from a previous round helps).

Target: the 30 assertions take less time than the decode. It prints the ratio
(decode time / assertion time; above 1 meets the target). It never fails a build.

Run: ``.venv/bin/python benchmarks/assertions.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from evalport.client import _trajectory as trajectory
from evalport.client.assertions import (
    Assertion,
    CalledTool,
    Contains,
    ContainsAll,
    EventSeen,
    EventsInOrder,
    Exact,
    MaxSteps,
    MaxToolCalls,
    NoFailedActions,
    NotCalledTool,
    StepCount,
    StopReasonIs,
    Succeeded,
    TokensAtMost,
    ToolOrder,
    ToolWasApproved,
    TotalTokensAtMost,
    UsedNoTools,
    at_least,
    between,
)
from evalport.protocol import AgentRun, TracePolicy, decode_run

STEPS = 200
TOOLS = ("search_orders", "order_status", "lookup_customer", "refund_order", "send_email")


def _timestamp(second: int) -> str:
    return f"2026-11-29T12:{second // 60 % 60:02d}:{second % 60:02d}.000Z"


def sample_run(steps: int = STEPS) -> bytes:
    """The JSON of a ``steps``-step run (deterministic)."""
    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for index in range(steps):
        tool = TOOLS[index % len(TOOLS)]
        call_id = f"call_{index:05d}"
        arguments = {"order_id": f"A{1000 + index}", "amount": index % 120, "note": "customer"}
        failed = index % 25 == 24
        execution: dict[str, Any] = {
            "id": str(uuid.UUID(int=2 * index + 1)),
            "name": tool,
            "toolCallId": call_id,
            "arguments": arguments,
            "hasError": failed,
            "error": "timeout talking to the shop" if failed else None,
            "result": None if failed else {"ok": True, "status": "shipped", "n": index},
            "startedAt": _timestamp(index),
            "completedAt": _timestamp(index + 1),
        }
        if index % 10 == 3:
            execution["approval"] = {"state": "approved", "reason": None}
        rows.append(
            {
                "id": str(uuid.UUID(int=2 * index + 2)),
                "turn": 1 + index // 20,
                "index": index,
                "type": "tool_execution",
                "outputMessages": [{"role": "assistant", "content": f"Working on step {index}."}]
                if index % 4 == 0
                else [],
                "requestedToolCalls": [{"id": call_id, "name": tool, "arguments": arguments}],
                "toolExecutions": [execution],
                "finishReason": "tool_calls",
                "usage": {"input": 900 + index, "output": 60, "cacheRead": 256, "reasoning": 12},
                "startedAt": _timestamp(index),
                "completedAt": _timestamp(index + 1),
                "duration": 0.52,
            }
        )
        events.append({"name": f"step.{tool}", "turn": 1 + index // 20, "data": {"i": index}})
    run = msgspec.convert(
        {
            "reply": "Refund A1049 issued; confirmation sent to ada@example.com.",
            "status": "completed",
            "turns": 10,
            "steps": rows,
            "events": events,
            "stopSignal": {"reason": "completed"},
            "userMessages": [f"message {turn}" for turn in range(10)],
        },
        AgentRun,
    )
    run.sync_tools()
    run.sync_usage()
    return msgspec.json.encode({"run": run})


def thirty() -> list[Assertion]:
    """The 30 assertions: a realistic mix over every family."""
    return [
        CalledTool("refund_order"),
        CalledTool("refund_order", {"order_id": "A1003"}),
        CalledTool("refund_order", Exact({"order_id": "A1003", "amount": 3, "note": "customer"})),
        CalledTool("search_orders", count=at_least(10)),
        CalledTool("order_status", count=between(30, 50)),
        CalledTool("send_email", {"note": "customer"}, is_error=False),
        CalledTool(
            "lookup_customer",
            {"order_id": "A1002"},
            result={"ok": True, "status": "shipped", "n": 2},
        ),
        CalledTool("send_email", is_error=True),
        NotCalledTool("delete_account"),
        NotCalledTool("refund_order", {"order_id": "Z9"}),
        UsedNoTools(),
        MaxToolCalls(250),
        MaxToolCalls(50, "refund_order"),
        NoFailedActions(),
        ToolOrder(["search_orders", "order_status", "refund_order"], "subset"),
        ToolOrder(list(TOOLS) * 40, "strict"),
        ToolOrder(list(TOOLS), "superset"),
        ToolOrder(list(reversed(TOOLS)) * 40, "unordered"),
        ToolWasApproved("refund_order"),
        StepCount(200),
        MaxSteps(250),
        TotalTokensAtMost(500_000),
        TokensAtMost("output", 20_000),
        TokensAtMost("reasoning", 5_000),
        EventSeen("step.refund_order", count=40),
        EventsInOrder(["step.search_orders", "step.refund_order", "step.send_email"]),
        Succeeded(),
        StopReasonIs("completed"),
        Contains("A1049"),
        ContainsAll(["Refund", "confirmation", "ada@example.com"]),
    ]


def best_of(function: Callable[[], object], rounds: int = 30) -> float:
    """The fastest of ``rounds`` timings of ``function``, in seconds."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def evaluate_all(assertions: list[Assertion], run: AgentRun) -> int:
    """Evaluate every assertion on a cold trajectory view; returns how many passed."""
    trajectory._cache.clear()
    return sum(assertion.evaluate(run).passed for assertion in assertions)


def main() -> None:
    data = sample_run()
    run = decode_run(data)
    redacted = TracePolicy.safe().apply(run)
    assertions = thirty()
    assert len(assertions) == 30
    decode = best_of(lambda: decode_run(data))
    verbatim = best_of(lambda: evaluate_all(assertions, run))
    safe = best_of(lambda: evaluate_all(assertions, redacted))
    print(f"run: {len(run.steps)} steps, {len(run.tools)} tool calls, {len(data) / 1000:.0f} KB")
    print(f"{'decode_run (the JSON)':38} {decode * 1e3:8.3f} ms")
    print(f"{'30 assertions, verbatim run':38} {verbatim * 1e3:8.3f} ms")
    print(f"{'30 assertions, redacted run (safe)':38} {safe * 1e3:8.3f} ms")
    print(
        f"passed on the verbatim run: {evaluate_all(assertions, run)} of 30; "
        f"on the redacted run: {evaluate_all(assertions, redacted)} of 30"
    )
    for name, seconds in (("verbatim", verbatim), ("redacted", safe)):
        ratio = decode / seconds
        verdict = "meets" if ratio > 1 else "misses"
        print(f"decode / assertions ({name}): {ratio:.2f}x ({verdict} the target: above 1)")


if __name__ == "__main__":
    main()
