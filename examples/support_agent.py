"""A customer-support agent for an online shop: deterministic rules, real tools, no LLM.

It is the agent the documentation (docs/get-started.md) serves and evaluates::

    EVALPORT_TOKEN=dev-token evalport serve examples/support_agent.py:agent

What it does, turn by turn (state carries across turns of a session):

- finds a customer's orders by e-mail or name (``search_orders``);
- tells where an order is (``order_status``);
- reads the order number off a receipt sent as an image (a PNG in the receipt font of
  ``receipt.py``: it decodes the pixels and matches glyphs, see that module), and then
  answers about that order as if the customer had typed its number;
- handles refunds in two steps: it looks the order up and proposes the refund, then on
  "yes" it calls ``refund_order``. Refunds above ``REFUND_LIMIT`` are **gated**: the turn
  suspends until a human approves or rejects the call; on a rejection the agent says it
  cannot refund and why.

Every session sees the order database as it was seeded and copies an order before it
changes it, so refunds in one evaluation never leak into another.

Served by several replicas over a shared store, a session may continue on a replica
that has not seen it: ``restore(history, run)`` rebuilds the conversation's state there
from the session's messages and events (refunds done, the order under discussion, a
refund waiting for its yes), so a refund is refused the second time on any replica.

Its patterns run in linear time, whatever the message: a pattern that backtracks
(an address pattern tried at every offset of a long word) would hold the event loop for
seconds on one large message, and every other session of the server with it.

It records what an LLM-backed agent would cost, deterministically: the run's llm profile
names the ``rules`` driver and model ``support-rules-1``, and every model step carries a
usage estimated at one token per four characters (at least one) of what the step reads
and writes. A turn that calls tools has two model steps: the first reads the system
prompt, the history and the message and writes the tool calls; the second reads all that
plus the tool results and writes the reply. A turn without tools has one step that reads
the prompt and writes the reply.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from evalport.protocol import AgentRun, ImagePart, Message, Usage
from evalport.protocol.runtime import ApprovalRejected, SessionInfo, TurnContext, tool
from receipt import read_lines

__all__ = ["MODEL", "ORDERS", "REFUND_LIMIT", "SYSTEM_PROMPT", "SupportAgent", "agent", "tokens"]

REFUND_LIMIT: Final = 100.0
"""Refunds above this amount need a human's approval."""

MODEL: Final = "support-rules-1"
"""The model named in the run's llm profile (driver ``rules``)."""

SYSTEM_PROMPT: Final = (
    "You are the support agent of an online coffee shop. Find a customer's orders, "
    "say where an order is, and refund orders; refunds above "
    f"{REFUND_LIMIT:.2f} need a manager's approval."
)
"""The prompt every model step reads first (counted in the estimated input tokens)."""


def tokens(text: str) -> int:
    """The estimated token count of ``text``: one per four characters, at least one."""
    return max(1, -(-len(text) // 4))


@dataclass
class Order:
    id: str
    customer: str
    email: str
    items: list[str]
    total: float
    status: str
    carrier: str | None = None
    refunded: float = 0.0
    history: list[str] = field(default_factory=list)


ORDERS: Final = {
    "A1049": Order(
        "A1049", "Ada Lovelace", "ada@example.com", ["espresso machine"], 349.0, "shipped", "DHL"
    ),
    "A1050": Order(
        "A1050", "Ada Lovelace", "ada@example.com", ["coffee beans 1kg"], 24.5, "delivered", "UPS"
    ),
    "A1051": Order(
        "A1051", "Alan Turing", "alan@example.com", ["milk frother"], 59.0, "processing"
    ),
    "123": Order(
        "123", "Grace Hopper", "grace@example.com", ["grinder", "scale"], 180.0, "delivered", "DPD"
    ),
}

_ORDER_ID = re.compile(r"#?\b([A-Z]\d{4}|\d{3,6})\b", re.IGNORECASE)
# A match starts only where a run of address characters starts (the lookbehind), so a
# long word without "@" is scanned once, not once per offset.
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.]+")
_YES = re.compile(r"^\s*(yes|yep|sure|ok(ay)?|please do|go ahead|do it)\b", re.IGNORECASE)
_REFUNDED: Final = "Done: I refunded"
_NO = re.compile(r"^\s*(no|nope|don't|do not|cancel that)\b", re.IGNORECASE)


class SupportAgent:
    """One conversation: its own order database and what it is in the middle of."""

    name = "support-agent"
    version = "1.0.0"

    def __init__(self, session: SessionInfo) -> None:
        self.session = session
        self.orders = dict(ORDERS)  # shared rows, copied on first write (see _own)
        self.current_order: str | None = None
        self.proposed_refund: tuple[str, float] | None = None

    def restore(self, history: list[Message], run: AgentRun) -> None:
        """Rebuild this conversation's state from the session so far (another replica
        ran its earlier turns): replay each turn's effect on the state, as ``_reply``
        made it, from the user's messages, the agent's replies and its events."""
        proposals = {e.turn: e.data for e in run.events if e.name == "refund.proposed"}
        turn = 0
        for index, message in enumerate(history):
            if message.role != "user":
                continue
            turn += 1
            text = str(message.content or "").strip()
            following = history[index + 1] if index + 1 < len(history) else None
            reply = (
                str(following.content or "") if following and following.role == "assistant" else ""
            )
            if self.proposed_refund is not None and (_YES.match(text) or _NO.match(text)):
                order_id, amount = self.proposed_refund
                self.proposed_refund = None
                if _YES.match(text) and reply.startswith(_REFUNDED):
                    order = self._own(order_id)
                    order.refunded += amount
                    order.history.append(f"refunded {amount:.2f}: customer request")
                continue
            order_id = self._mentioned_order(text)
            if order_id is not None:
                self.current_order = order_id
            proposed = proposals.get(turn)
            if isinstance(proposed, dict):
                self.proposed_refund = (str(proposed["order_id"]), float(proposed["amount"]))

    # -- tools (recorded in the run by @tool) ------------------------------------------------

    @tool
    def search_orders(self, query: str) -> list[dict[str, Any]]:
        """Orders whose id, customer e-mail or customer name matches ``query``."""
        needle = query.strip().lstrip("#").lower()
        return [
            {
                "order_id": order.id,
                "customer": order.customer,
                "total": order.total,
                "status": order.status,
            }
            for order in self.orders.values()
            if needle in (order.id.lower(), order.email.lower()) or needle in order.customer.lower()
        ]

    @tool
    def order_status(self, order_id: str) -> dict[str, Any]:
        """Status and carrier of one order."""
        order = self._order(order_id)
        return {"order_id": order.id, "status": order.status, "carrier": order.carrier}

    @tool(approval=lambda order_id, amount, reason: amount > REFUND_LIMIT)
    async def refund_order(self, order_id: str, amount: float, reason: str) -> dict[str, Any]:
        """Refund ``amount`` on an order (gated above ``REFUND_LIMIT``)."""
        order = self._own(order_id)
        if amount <= 0 or amount > order.total - order.refunded:
            raise ValueError(
                f"cannot refund {amount:.2f} on {order.id}: {order.total - order.refunded:.2f} is refundable"
            )
        order.refunded += amount
        order.history.append(f"refunded {amount:.2f}: {reason}")
        return {
            "order_id": order.id,
            "refunded": amount,
            "refundable_left": order.total - order.refunded,
        }

    def _own(self, order_id: str) -> Order:
        """The order, copied into this session before it changes (copy on write)."""
        order = self._order(order_id)
        if order is ORDERS.get(order.id):
            order = self.orders[order.id] = copy.deepcopy(order)
        return order

    def _order(self, order_id: str) -> Order:
        order = self.orders.get(order_id.lstrip("#").upper()) or self.orders.get(
            order_id.lstrip("#")
        )
        if order is None:
            raise LookupError(f"no order {order_id}")
        return order

    # -- the turn --------------------------------------------------------------------------------

    async def turn(self, message: str, ctx: TurnContext) -> str:
        ctx.llm_profile(driver="rules", model=MODEL, context_length=8192, max_output_length=1024)
        images = [
            p.data for p in ctx.parts if isinstance(p, ImagePart) and isinstance(p.data, bytes)
        ]
        for image in images:
            try:  # pure Python: in a thread, so the server answers others meanwhile
                lines = await asyncio.to_thread(read_lines, image)
            except ValueError:
                return "I could not read that image; please type the order number."
            message += "\n" + "\n".join(lines)  # what the receipt says, read off its pixels
        reply = await self._reply(message, ctx)
        self._record_usage(message, reply, ctx)
        return reply

    def _record_usage(self, message: str, reply: str, ctx: TurnContext) -> None:
        """Give the turn's model steps their estimated usage (see the module docstring)."""
        prompt = tokens(SYSTEM_PROMPT) + tokens(message)
        prompt += sum(tokens(str(earlier.content or "")) for earlier in ctx.history)
        tool_steps = [s for s in ctx.run.steps if s.turn == ctx.turn and s.tool_executions]
        if tool_steps:  # the open tool step: it read the prompt and wrote the tool calls
            calls = [c for s in tool_steps for c in s.requested_tool_calls]
            results = [e.result for s in tool_steps for e in s.tool_executions]
            ctx.usage(
                input=prompt,
                output=sum(tokens(c.name + json.dumps(c.arguments, default=str)) for c in calls),
            )
            prompt += tokens(json.dumps(results, default=str))
        ctx.model_step(content=reply, usage=Usage(input=prompt, output=tokens(reply)))

    async def _reply(self, message: str, ctx: TurnContext) -> str:
        text = message.strip()
        lowered = text.lower()
        if self.proposed_refund is not None:
            if _YES.match(text):
                return await self._refund(ctx)
            if _NO.match(text):
                self.proposed_refund = None
                return "Alright, I won't refund it. Anything else?"
        order_id = self._mentioned_order(text)
        if order_id is not None:
            self.current_order = order_id
        if "refund" in lowered or "money back" in lowered:
            return self._propose_refund(ctx)
        if any(word in lowered for word in ("where", "status", "track", "shipped", "arrive")):
            return self._status()
        email = _EMAIL.search(text)
        if email or "my orders" in lowered:
            query = email.group(0) if email else self.session.metadata.get("email", "")
            return self._list_orders(str(query))
        if any(word in lowered for word in ("hi", "hello", "hey")):
            return "Hi! I can find your orders, tell you where they are, and handle refunds."
        return "I can help with order status and refunds. What is your order number?"

    def _mentioned_order(self, text: str) -> str | None:
        for match in _ORDER_ID.finditer(text):
            candidate = match.group(1).upper()
            if candidate in self.orders:
                return candidate
        return None

    def _status(self) -> str:
        if self.current_order is None:
            return "Which order do you mean? Please give me its number."
        try:
            status = self.order_status(self.current_order)
        except Exception:  # the order service failed: say so, invent nothing
            return (
                f"I'm sorry, I can't reach the order service to check {self.current_order} "
                "right now. Please try again in a moment."
            )
        carrier = f" with {status['carrier']}" if status["carrier"] else ""
        return f"Order {status['order_id']} is {status['status']}{carrier}."

    def _list_orders(self, query: str) -> str:
        if not query:
            return "Please tell me the e-mail address you ordered with."
        found = self.search_orders(query)
        if not found:
            return f"I found no orders for {query}."
        listed = ", ".join(f"{o['order_id']} ({o['status']}, {o['total']:.2f})" for o in found)
        return f"I found {len(found)} order(s): {listed}."

    def _propose_refund(self, ctx: TurnContext) -> str:
        if self.current_order is None:
            return "I can help with a refund. What is the order number?"
        found = self.search_orders(self.current_order)
        if not found:
            return f"I could not find order {self.current_order}."
        order = self.orders[found[0]["order_id"]]
        amount = order.total - order.refunded
        if amount <= 0:
            return f"Order {order.id} has already been refunded in full."
        self.proposed_refund = (order.id, amount)
        ctx.event("refund.proposed", {"order_id": order.id, "amount": amount})
        return f"Order {order.id} ({', '.join(order.items)}) came to {amount:.2f}. Shall I refund it in full?"

    async def _refund(self, ctx: TurnContext) -> str:
        assert self.proposed_refund is not None
        order_id, amount = self.proposed_refund
        self.proposed_refund = None
        try:
            await self.refund_order(order_id, amount, reason="customer request")
        except ApprovalRejected as rejected:
            why = f": {rejected.reason}" if rejected.reason else "."
            return f"I'm sorry, I cannot refund order {order_id}{why}"
        except (LookupError, ValueError) as error:
            return f"I'm sorry, I cannot refund order {order_id}: {error}"
        return f"{_REFUNDED} {amount:.2f} on order {order_id}. It reaches your account in 3-5 days."


agent = SupportAgent
"""The agent to serve: a session factory (one :class:`SupportAgent` per session)."""
