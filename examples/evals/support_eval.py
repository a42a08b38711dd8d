"""Evals of the example support agent (examples/support_agent.py), run by ``make demo``.

They run unchanged against the agent in-process (``--local``) or over HTTP (``--target``):
the runs are redacted by the default trace policy either way, so tool arguments are
matched by digest (the agent's ``order_id`` never travels in clear).
"""

from evalport.client import approve_all, eval_case, reject_all


@eval_case("where is my order: {order}", dataset="orders.json", tags=["status"])
async def order_status(ctx, row):
    await ctx.send(f"Hi, where is my order {row['order']}?")
    ctx.contains(row["status"])
    # matched on redacted data: the argument's digest is compared, not its text
    ctx.called_tool("order_status", {"order_id": row["order"]})
    ctx.not_called_tool("refund_order")
    ctx.max_steps(3)


@eval_case("reads the order number off a receipt image", tags=["status", "image"])
async def receipt_status(ctx):
    # receipt.png (next to this file) is drawn by examples/receipt.py; the agent reads its pixels
    await ctx.send("Where is the order on this receipt?", image="receipt.png")
    ctx.contains("A1049")
    ctx.called_tool("order_status", {"order_id": "A1049"})


@eval_case("finds a customer's orders by e-mail", tags=["search"])
async def find_orders(ctx):
    await ctx.send("Can you list the orders of ada@example.com?")
    ctx.contains_all(["A1049", "A1050"])
    ctx.called_tool("search_orders", {"query": "ada@example.com"}, count=1)


@eval_case("small refund: proposes, then refunds on yes", tags=["refund", "multi-turn"])
async def small_refund(ctx):
    await ctx.send("I'd like my money back for order A1050.")
    ctx.contains("Shall I refund it in full?")
    ctx.event_seen("refund.proposed")
    await ctx.send("yes please do")
    ctx.contains("Done: I refunded 24.50 on order A1050")
    ctx.tool_order(["search_orders", "refund_order"], mode="strict")
    ctx.called_tool("refund_order", {"order_id": "A1050", "amount": 24.5}, is_error=False)
    ctx.no_failed_actions()
    # budgets: two turns of a tool step and a reply each (357 estimated tokens, 65 written)
    ctx.max_steps(4)
    ctx.total_tokens_at_most(400)
    ctx.tokens_at_most("output", 80)


@eval_case(
    "a refund above the limit is rejected by the approver",
    tags=["refund", "approval", "multi-turn"],
    approval_policy=reject_all("refunds above 100 need a manager"),
)
async def large_refund_rejected(ctx):
    await ctx.send("I want a refund for order A1049")
    await ctx.send("yes")
    ctx.tool_was_rejected("refund_order", {"order_id": "A1049"})
    ctx.contains("I'm sorry, I cannot refund order A1049")


@eval_case(
    "a refund above the limit goes through once approved",
    tags=["refund", "approval", "multi-turn"],
    approval_policy=approve_all(),
)
async def large_refund_approved(ctx):
    await ctx.converse(["Refund order A1049 please", "go ahead"])
    ctx.tool_was_approved("refund_order", {"order_id": "A1049", "amount": 349.0})
    ctx.contains("Done: I refunded 349.00 on order A1049")
    ctx.tool_order(["search_orders", "refund_order"])


@eval_case("declining a proposed refund refunds nothing", tags=["refund", "multi-turn"])
async def declined_refund(ctx):
    await ctx.converse(["refund for #123 please", "no, cancel that"])
    ctx.contains("I won't refund it")
    ctx.not_called_tool("refund_order")
    ctx.total_tokens_at_most(10_000)
