"""One support scenario for the three framework adapters, and the evaluations that check it.

Each framework test builds the same agent with its framework's own offline test double:
the double asks :func:`plan` what to answer given the conversation it was sent, so the
model's decisions depend on what the framework really passed it (history, tool results).

The agent has three tools: ``lookup`` (returns the order), ``track`` (always fails with
``TRACK_ERROR``) and ``refund`` (gated: it needs an approval). Every model response
reports :func:`usage_of` tokens, so the expected usage of a run is known exactly.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NamedTuple

import httpx
from evalport.client import (
    EvalContext,
    HttpTarget,
    Target,
    TrialResult,
    Verdict,
    cases_from,
    decide_by_tool,
    eval_case,
    run_trial,
)
from evalport.protocol import AgentRun, StepCompleted, StreamEvent, TextDelta, TracePolicy
from evalport.server import EvalAdapter

TOKEN = "h7-adapters-token-0123456789"
TRACK_ERROR = "tracking service down"
REJECTION = "refunds need a manager"
_ORDER = re.compile(r"\b([A-Z]\d+)\b")


class Call(NamedTuple):
    name: str
    arguments: dict[str, Any]


class Usage(NamedTuple):
    """Inclusive counts, as the frameworks report them."""

    input: int
    output: int
    cache_read: int = 0
    reasoning: int = 0


def plan(users: Sequence[str], results: Sequence[tuple[str, str]]) -> list[Call] | str:
    """The model: tool calls to make, or the text to answer.

    ``users`` are every user message the model was sent (oldest first); ``results`` the
    ``(tool name, output text)`` pairs that followed the last of them.
    """
    orders = [match for text in users for match in _ORDER.findall(text)]
    order = orders[-1] if orders else "?"
    if results:
        return f"Order {order}: " + "; ".join(f"{name} -> {text}" for name, text in results)
    last = users[-1].lower() if users else ""
    if "refund" in last:
        return [Call("refund", {"order_id": order})]
    if "where" in last:
        return [Call("lookup", {"order_id": order}), Call("track", {"order_id": order})]
    return "How can I help?"


def usage_of(action: list[Call] | str) -> Usage:
    """Tokens of one response: tool calls cost 50/10, answers 80/20 with cache and reasoning."""
    return Usage(50, 10) if isinstance(action, list) else Usage(80, 20, cache_read=30, reasoning=4)


def lookup_result(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped"}


def refund_result(order_id: str) -> str:
    return f"refunded {order_id}"


# The run's usage as evalport records it: disjoint buckets (input less cache, output less
# reasoning), summed over the steps.
CALL_STEP = {"input": 50, "output": 10, "cacheRead": 0, "reasoning": 0}
ANSWER_STEP = {"input": 50, "output": 16, "cacheRead": 30, "reasoning": 4}


def step_usages(run: dict[str, Any]) -> list[dict[str, int]]:
    return [
        {key: step["usage"][key] for key in ("input", "output", "cacheRead", "reasoning")}
        for step in run["steps"]
    ]


async def http_target(agent: Any, *, policy: TracePolicy | None = None) -> AsyncIterator[Target]:
    """An ``HttpTarget`` talking to ``EvalAdapter(agent)`` through ``httpx.ASGITransport``."""
    adapter = EvalAdapter(agent, token=TOKEN)
    target = HttpTarget(
        "http://agent.test/evals",
        token=TOKEN,
        policy=policy,
        transport=httpx.ASGITransport(app=adapter.app("/evals")),
    )
    try:
        yield target
    finally:
        await target.aclose()
        await adapter.aclose()


async def trial(target: Target, case: Callable[..., Any], **options: Any) -> TrialResult:
    return await run_trial(cases_from(eval_case(**options)(case))[0], target)


def passed(result: TrialResult) -> None:
    failing = [(a.label or a.name, a.message) for a in result.assertions if not a.passed]
    assert result.verdict == Verdict.PASSED, (result.error, failing)


class Listener:
    """A streaming host's listener (``AgentSession.start(..., listen=...)``): keeps the events
    it is told. A scripted model that awaits :meth:`first_delta_told` between two chunks
    proves the reply streams: the first chunk reached the host while the model still wrote
    (an adapter that sent the text once the model was done would never let it go on)."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self._first_delta = asyncio.Event()

    def __call__(self, event: StreamEvent) -> None:
        self.events.append(event)
        if isinstance(event, TextDelta):
            self._first_delta.set()

    async def first_delta_told(self) -> None:
        await asyncio.wait_for(self._first_delta.wait(), 5)

    def deltas(self) -> list[str]:
        return [event.text for event in self.events if isinstance(event, TextDelta)]

    def assert_streamed(self, run: AgentRun, chunks: list[str]) -> None:
        """The reply streamed as ``chunks``, in order, before the turn's last step ended."""
        assert self.deltas() == chunks and "".join(chunks) == run.reply
        assert {event.turn for event in self.events if isinstance(event, TextDelta)} == {run.turns}
        told = [index for index, event in enumerate(self.events) if isinstance(event, TextDelta)]
        ends = [
            index for index, event in enumerate(self.events) if isinstance(event, StepCompleted)
        ]
        assert told[0] < ends[-1] and ends[-1] == len(self.events) - 1


# -- the evaluations ------------------------------------------------------------------------


async def order_question(ctx: EvalContext) -> None:
    await ctx.send("Where is order A1?")
    ctx.contains_all(["lookup -> ", "track -> "])
    ctx.called_tool("lookup", {"order_id": "A1"}, result=lookup_result("A1"), is_error=False)
    ctx.called_tool("track", {"order_id": "A1"}, is_error=True)
    ctx.tool_order(["lookup", "track"], "unordered")
    ctx.not_called_tool("refund")
    ctx.step_count(2)
    ctx.succeeded()


async def refund_approved(ctx: EvalContext) -> None:
    await ctx.converse(["Where is order A2?", "Please refund it."])
    # the model found the order id in the first turn: the session kept the history
    ctx.called_tool("refund", {"order_id": "A2"}, result=refund_result("A2"))
    ctx.tool_was_approved("refund", {"order_id": "A2"})
    ctx.tool_order(["lookup", "refund"], "subset")
    ctx.tool_order(["refund", "lookup", "track"], "unordered")
    ctx.contains(refund_result("A2"))
    ctx.succeeded()


async def refund_rejected(ctx: EvalContext) -> None:
    await ctx.send("Please refund order B7.")
    ctx.tool_was_rejected("refund", {"order_id": "B7"})
    ctx.contains(REJECTION)
    ctx.not_called_tool("lookup")
    ctx.succeeded()


APPROVE = decide_by_tool({"refund": "approve"})
REJECT = decide_by_tool({"refund": ("reject", REJECTION)})


async def evaluate_all(agent_factory: Callable[[], Any]) -> None:
    """Run the three evaluations over HTTP against fresh adapted agents; assert the runs."""
    async for target in http_target(agent_factory()):
        first = await trial(target, order_question)
        passed(first)
        assert step_usages(first.run) == [CALL_STEP, ANSWER_STEP]
        usage = first.run["usage"]
        assert (usage["input"], usage["output"], usage["cacheRead"]) == (100, 26, 30)
        tools = first.run["tools"]
        assert {tool["tool_call"]["name"] for tool in tools} == {"lookup", "track"}
        assert all(tool["tool_call"]["id"] for tool in tools)
        # the model's calls ride in its message too, in Instructor's form beside evalport's
        messages = [message for step in first.run["steps"] for message in step["outputMessages"]]
        calling = [message for message in messages if message["toolCalls"]]
        assert [call["name"] for message in calling for call in message["tool_calls"]] == [
            "lookup",
            "track",
        ]
        assert all(message["tool_calls"] == message["toolCalls"] for message in calling)

    async for target in http_target(agent_factory(), policy=TracePolicy.verbatim()):
        approved = await trial(target, refund_approved, approval_policy=APPROVE)
        passed(approved)
        run = approved.run
        assert run["turns"] == 2 and [step["turn"] for step in run["steps"]] == [1, 1, 2, 2]
        assert step_usages(run) == [CALL_STEP, ANSWER_STEP, CALL_STEP, ANSWER_STEP]
        by_name = {tool["tool_call"]["name"]: tool for tool in run["tools"]}
        assert by_name["lookup"]["result"] == lookup_result("A2")
        assert TRACK_ERROR in by_name["track"]["error"]
        assert by_name["refund"]["approval"]["state"] == "approved"
        assert run["reply"] == f"Order A2: refund -> {refund_result('A2')}"

    async for target in http_target(agent_factory()):
        rejected = await trial(target, refund_rejected, approval_policy=REJECT)
        passed(rejected)
        refund = rejected.run["tools"][0]
        assert refund["approval"] == {
            "state": "rejected",
            "reason": REJECTION,
            "decidedAt": refund["approval"]["decidedAt"],
        }
