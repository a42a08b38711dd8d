"""LangGraph interrupts as approval requests or evalport interrupts, and decisions and
answers as the values that resume them (the shapes: :func:`plan_interrupt`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from evalport.protocol import ToolCall
from evalport.protocol.runtime import ApprovalResult

from ._recording import ApprovalAsk, arguments_of

_BATCHED: Final = "batched"
_PER_CALL: Final = "per_call"
_PLAIN: Final = "plain"
_QUESTION: Final = "question"
_REVIEW: Final = "review"
REVIEW_KIND: Final = "tool_review"


class ToolCallInfo(NamedTuple):
    """The tool run that raised an interrupt: its name, arguments and call id."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None


class InterruptPlan(NamedTuple):
    """The approvals one interrupt asks for, and how to answer it."""

    interrupt_id: str
    asks: list[ApprovalAsk]
    kind: str
    question: tuple[str, Any] | None = None
    """For an evalport interrupt: its kind and payload."""

    @property
    def skips_rejected(self) -> bool:
        """The framework skips a rejected tool: the adapter records the rejection."""
        return self.kind in (_BATCHED, _PER_CALL)

    def reviewed(self, answer: Any) -> list[tuple[ApprovalAsk, dict[str, Any]]]:
        """For a ``tool_review`` interrupt: each asked call with the middleware decision
        its ``answer`` gave it (answers of another shape give none)."""
        if self.kind != _REVIEW:
            return []
        decisions: Any = answer.get("decisions") if isinstance(answer, Mapping) else None
        if decisions is None:
            decisions = [answer]
        if not isinstance(decisions, list):
            return []
        return [
            (ask, dict(decision))
            for ask, decision in zip(self.asks, decisions, strict=False)
            if isinstance(decision, Mapping)
        ]

    def resume(self, decisions: Mapping[str, ApprovalResult], answer: Any = None) -> Any:
        """The value this interrupt resumes with, given the decisions by call id (and,
        for an evalport interrupt, its ``answer``)."""
        if self.kind in (_QUESTION, _REVIEW):
            return answer
        answers = [decisions[ask.call_id] for ask in self.asks]
        if self.kind == _BATCHED:
            return {"decisions": [_middleware_decision(answer) for answer in answers]}
        if self.kind == _PER_CALL:
            return _middleware_decision(answers[0])
        return {"approved": answers[0].approved, "reason": answers[0].reason}


def _middleware_decision(answer: ApprovalResult) -> dict[str, str]:
    if answer.approved:
        return {"type": "approve"}
    if answer.reason:
        return {"type": "reject", "message": answer.reason}
    return {"type": "reject"}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def plan_interrupt(
    interrupt_id: str,
    value: Any,
    *,
    raised_in: ToolCallInfo | None = None,
    pending_calls: Sequence[ToolCall] = (),
    reviews: str = "approvals",
) -> InterruptPlan:
    """The approvals for one interrupt; ``pending_calls`` are the model's latest tool calls,
    ``reviews`` how the middleware's requests are asked (``approvals`` or ``interrupts``).

    Four shapes of interrupt value are understood:

    - **LangChain's** ``HumanInTheLoopMiddleware``, batched: ``{"action_requests": [{"name",
      "args", "description"?}, ...], "review_configs": [...]}`` asks one approval per action
      (under the call id of the model's matching tool call) and resumes with ``{"decisions":
      [...]}`` in the same order;
    - the middleware **per call**: ``{"type": "tool_approval", "tool_call_id", "name",
      "args", "description"}`` asks one approval and resumes with one decision. A decision is
      ``{"type": "approve"}`` or ``{"type": "reject", "message": reason}``. With
      ``reviews="interrupts"`` either middleware shape is instead one evalport interrupt of
      kind ``tool_review`` whose payload is the request and whose answer is the resume value
      as given, so that all four of the middleware's decisions can be answered (``approve``,
      ``edit`` with an ``edited_action``, ``reject``, ``respond`` with the tool's stand-in
      result); a ``reject`` or ``respond`` answer is recorded as the call's execution (a
      rejection, or a result), since the middleware does not run the tool;
    - an interrupt raised **in a tool**, or whose value is a mapping with a ``tool`` (or
      ``name``) and ``args`` (or ``arguments``), is one approval of that call. It resumes
      with ``{"approved": bool, "reason": str | None}``, which ``interrupt()`` returns;
    - **anything else** (a question, a choice, a form) is an evalport interrupt
      (``ctx.interrupt``): its kind is the value's ``kind`` (or ``type``) when it is a mapping
      holding one as text, else ``interrupt``; its payload is the value; it resumes with the
      answer as it was given, which ``interrupt()`` returns.

    The middleware does not run a rejected tool, so :attr:`InterruptPlan.skips_rejected` tells
    the adapter to record the rejection itself; any other interrupt leaves a rejection to the
    code that called ``interrupt()``.
    """
    plan = _plan(interrupt_id, value, raised_in, pending_calls)
    if reviews == "interrupts" and plan.kind in (_BATCHED, _PER_CALL):
        return InterruptPlan(interrupt_id, plan.asks, _REVIEW, (REVIEW_KIND, value))
    return plan


def _plan(
    interrupt_id: str,
    value: Any,
    raised_in: ToolCallInfo | None,
    pending_calls: Sequence[ToolCall],
) -> InterruptPlan:
    if isinstance(value, Mapping) and isinstance(value.get("action_requests"), list):
        asks: list[ApprovalAsk] = []
        unmatched = list(pending_calls)
        for index, action in enumerate(value["action_requests"]):
            name = str(action.get("name", "tool"))
            arguments = arguments_of(action.get("args"))
            call = next((c for c in unmatched if c.name == name and c.arguments == arguments), None)
            if call is not None:
                unmatched.remove(call)
            call_id = call.id if call is not None and call.id else f"{interrupt_id}:{index}"
            asks.append(ApprovalAsk(call_id, name, arguments, _text(action.get("description"))))
        return InterruptPlan(interrupt_id, asks, _BATCHED)
    if isinstance(value, Mapping) and value.get("type") == "tool_approval":
        ask = ApprovalAsk(
            str(value.get("tool_call_id") or interrupt_id),
            str(value.get("name", "tool")),
            arguments_of(value.get("args")),
            _text(value.get("description")),
        )
        return InterruptPlan(interrupt_id, [ask], _PER_CALL)
    if raised_in is not None:
        ask = ApprovalAsk(raised_in.call_id or interrupt_id, raised_in.name, raised_in.arguments)
        return InterruptPlan(interrupt_id, [ask], _PLAIN)
    if isinstance(value, Mapping):
        tool = value.get("tool", value.get("name"))
        if isinstance(tool, str):
            args = value.get("args", value.get("arguments"))
            reason = _text(value.get("reason", value.get("description")))
            ask = ApprovalAsk(interrupt_id, tool, arguments_of(args), reason)
            return InterruptPlan(interrupt_id, [ask], _PLAIN)
    kind = "interrupt"
    if isinstance(value, Mapping):
        named = value.get("kind", value.get("type"))
        kind = named if isinstance(named, str) and named else kind
    return InterruptPlan(interrupt_id, [], _QUESTION, (kind, value))
