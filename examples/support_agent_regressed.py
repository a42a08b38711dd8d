"""The example support agent with a regression, for ``make demo`` to show what one looks like.

A "faster" status reply: it answers from the order list the session already holds
instead of calling the ``order_status`` tool. The reply reads the same, so a check on the
text alone would miss it; the suite's ``called_tool("order_status", ...)`` catches it in
every ``order_status`` case, and ``evalport compare`` lists those cases as regressions.
Everything else is the agent of ``support_agent.py``, unchanged::

    evalport serve examples/support_agent_regressed.py:agent
"""

from __future__ import annotations

from support_agent import SupportAgent


class RegressedSupportAgent(SupportAgent):
    """:class:`SupportAgent` whose status reply skips the order service."""

    def _status(self) -> str:
        if self.current_order is None:
            return "Which order do you mean? Please give me its number."
        order = self.orders[self.current_order]
        carrier = f" with {order.carrier}" if order.carrier else ""
        return f"Order {order.id} is {order.status}{carrier}."


agent = RegressedSupportAgent
