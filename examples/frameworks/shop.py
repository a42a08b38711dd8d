"""The shop behind the framework examples: orders and the two operations their tools wrap.

Plain functions, so that the pydantic-ai, Agents SDK and LangGraph examples share one
behaviour and differ only in how each framework declares its tools.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["INSTRUCTIONS", "ORDERS", "order_status", "refund_order"]

INSTRUCTIONS: Final = (
    "You are the support assistant of an online shop. Look orders up with order_status "
    "before answering; refund only when the customer asks for it, with refund_order "
    "(a person approves every refund)."
)

ORDERS: Final[dict[str, dict[str, Any]]] = {
    "A1049": {"status": "shipped", "carrier": "DHL", "total": 349.0},
    "A1050": {"status": "delivered", "carrier": "UPS", "total": 24.5},
}


def order_status(order_id: str) -> dict[str, Any]:
    """Where an order is; an unknown order id raises ``LookupError``."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise LookupError(f"no order {order_id!r}")
    return {
        "order_id": order_id.strip().upper(),
        "status": order["status"],
        "carrier": order["carrier"],
    }


def refund_order(order_id: str, amount: float) -> str:
    """Refund ``amount`` of an order (the frameworks gate this behind an approval)."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise LookupError(f"no order {order_id!r}")
    if amount > order["total"]:
        raise ValueError(f"cannot refund {amount:.2f}: the order totals {order['total']:.2f}")
    return f"refunded {amount:.2f} for order {order_id.strip().upper()}"
