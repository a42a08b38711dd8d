"""A real run for looking at the reports: the example support agent in-process, a case that
passes on every trial, one whose trials differ, one that fails on a long digested argument, one on a long unbroken value,
one where the agent itself fails, and a judged case with evidence."""

from __future__ import annotations

import sys
from pathlib import Path

from evalport.client import LocalTarget, Runner, RunOptions
from evalport.client._core._cases import Case
from evalport.client.judges import FakeJudge, JudgeVerdict
from evalport.protocol import TracePolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from support_agent import SupportAgent

LONG = "sha256:" + "3023b9" * 22  # one long word, as a digest's hash is
SECRET = "inventory database at 10.0.0.7 refused the connection"


class ReviewAgent(SupportAgent):
    """The support agent, which fails on "crash" and answers "coin" by alternating."""

    flips = 0

    async def turn(self, message, ctx):
        if "crash" in message:
            self.order_status("A1049")
            raise ConnectionError(SECRET)
        if "coin" in message:
            ReviewAgent.flips += 1
            return "heads" if ReviewAgent.flips % 2 else "tails"
        return await super().turn(message, ctx)


async def status(ctx):
    await ctx.send("where is order A1049?")
    ctx.contains("shipped")
    ctx.called_tool("order_status", {"order_id": "A1049"})


async def wrong_argument(ctx):
    await ctx.send("where is order A1049?")
    ctx.called_tool("order_status", {"order_id": "A1049-" + "x" * 120})


async def long_value(ctx):
    await ctx.send("where is order A1049?")
    ctx.contains(LONG)


async def crash(ctx):
    await ctx.send("please crash now")
    ctx.succeeded()


async def coin(ctx):
    await ctx.send("toss a coin")
    ctx.contains("heads")


async def judged(ctx):
    await ctx.send("where is order A1049?")
    ctx.judge().helpfulness()


CASES = [
    Case(id="review_eval::status", func=status, description="status of A1049"),
    Case(id="review_eval::wrong_argument", func=wrong_argument, description="argument check"),
    Case(id="review_eval::long_value", func=long_value, description="a long unbroken value"),
    Case(id="review_eval::crash", func=crash, description="the agent fails"),
    Case(id="review_eval::coin", func=coin, description="trials differ"),
    Case(id="review_eval::judged", func=judged, description="judged with evidence"),
]

EVIDENCE = ["Your order A1049 has shipped", "carrier"]


def judge() -> FakeJudge:
    verdict = JudgeVerdict(
        score=0.8,
        reason="It answers the question and names the carrier.",
        evidence=EVIDENCE,
        model="fake-judge",
    )
    return FakeJudge(default=verdict)


async def review_run(
    reporters, *, repeat: int = 3, policy: TracePolicy | None = None, concurrency: int = 8
):
    ReviewAgent.flips = 0
    target = LocalTarget(ReviewAgent, policy=policy, location="examples/review_agent.py:agent")
    options = RunOptions(repeat=repeat, concurrency=concurrency)
    return await Runner(target, options, judge=judge(), reporters=reporters).run(CASES)
