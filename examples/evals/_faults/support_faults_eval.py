"""Evals of the example support agent when its order service misbehaves (tool faults).

The faults are injected into the agent's ``order_status`` tool, in-process with
``--local`` or by a server started with ``evalport serve ... --allow-faults``. The folder
starts with ``_`` so that ``evalport run examples/evals`` (the demo, against a server
without that option) leaves these cases out; run the file itself:

    evalport run examples/evals/_faults/support_faults_eval.py \
        --local examples/support_agent.py:agent
"""

from evalport.client import eval_case
from evalport.protocol import ToolFault

LOST = {"order_id": "A1049", "status": "lost in transit", "carrier": None}


@eval_case(
    "a canned lookup: the reply says what the tool said",
    tags=["faults"],
    faults=[ToolFault(tool="order_status", result=LOST)],
)
async def status_from_a_canned_lookup(ctx):
    await ctx.send("Hi, where is my order A1049?")
    ctx.contains("Order A1049 is lost in transit.")
    ctx.tool_was_injected("order_status", {"order_id": "A1049"})


@eval_case(
    "the order service times out once: no invented status, then recovery",
    tags=["faults", "multi-turn"],
    faults=[ToolFault(tool="order_status", error="order service timed out", times=1)],
)
async def order_service_times_out_once(ctx):
    first = await ctx.send("Hi, where is my order A1049?")
    ctx.tool_was_injected("order_status")
    ctx.called_tool("order_status", is_error=True, count=1)
    ctx.check(
        "no status invented",
        not any(word in first.reply for word in ("shipped", "delivered", "processing")),
    )
    ctx.check("says it cannot check now", "try again" in first.reply)
    await ctx.send("Where is my order A1049 now?")
    ctx.contains("Order A1049 is shipped")
