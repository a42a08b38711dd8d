"""The adapters' shared rules: usage arithmetic, argument and reply conversion, interrupts."""

from __future__ import annotations

import pytest
from evalport.protocol import AgentRun, ToolCall, Usage
from evalport.protocol.runtime import ApprovalResult, TurnContext
from evalport.server.adapters._interrupts import ToolCallInfo, plan_interrupt
from evalport.server.adapters._recording import (
    arguments_of,
    record_execution,
    reply_text,
    step_usage,
)


def test_inclusive_framework_counts_become_disjoint_usage() -> None:
    assert step_usage(80, 20, cache_read=30, cache_write=5, reasoning=4) == Usage(
        input=45, output=16, cache_read=30, cache_write=5, reasoning=4
    )
    assert step_usage(None, None, cache_read=None, reasoning=None) == Usage()
    # a provider that reports cache reads apart from input never goes negative
    assert step_usage(10, 0, cache_read=30) == Usage(input=0, cache_read=30)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"order_id": "A1"}', {"order_id": "A1"}),
        (b'{"n": 1}', {"n": 1}),
        ("", {}),
        (None, {}),
        ("[1, 2]", {"value": [1, 2]}),
        ("not json", {"value": "not json"}),
        ({"k": "v"}, {"k": "v"}),
        (7, {"value": 7}),
    ],
)
def test_arguments_are_a_dict(raw: object, expected: dict[str, object]) -> None:
    assert arguments_of(raw) == expected


def test_replies_are_text_or_compact_json() -> None:
    assert reply_text(None) == ""
    assert reply_text("hé") == "hé"
    assert reply_text({"order": "A1", "items": [1, 2]}) == '{"order":"A1","items":[1,2]}'
    assert reply_text(object()).startswith("<object object")


def test_a_finished_execution_records_result_error_or_rejection() -> None:
    ctx = TurnContext(run=AgentRun(), turn=1, message="m")
    ctx.model_step(tool_calls=[ToolCall(id="c1", name="a"), ToolCall(id="c2", name="b")])
    ok = record_execution(ctx, "a", {"x": 1}, call_id="c1", result={"y": 2}, started_at="T")
    failed = record_execution(ctx, "b", None, call_id="c2", error="boom")
    rejected = record_execution(
        ctx, "c", {}, call_id="c3", decision=ApprovalResult(approved=False, reason="no")
    )
    assert (ok.result, ok.has_error, ok.started_at, ok.tool_call_id) == ({"y": 2}, False, "T", "c1")
    assert (failed.has_error, failed.error) == (True, "boom")
    assert (rejected.has_error, rejected.error) == (True, "rejected by approver: no")
    assert rejected.approval is not None and rejected.approval.state == "rejected"
    (step,) = ctx.run.steps
    assert [e.name for e in step.tool_executions] == ["a", "b", "c"]
    assert [error.message for error in step.errors] == ["boom"]  # a rejection is no tool error


def test_interrupt_shapes_become_approvals_and_resume_values() -> None:
    approve, reject = ApprovalResult(approved=True), ApprovalResult(approved=False, reason="r")
    calls = [
        ToolCall(id="m1", name="send", arguments={"to": "a"}),
        ToolCall(id="m2", name="send", arguments={"to": "b"}),
    ]
    batched = plan_interrupt(
        "i1",
        {
            "action_requests": [
                {"name": "send", "args": {"to": "b"}, "description": "d"},
                {"name": "drop", "args": {}},
            ]
        },
        pending_calls=calls,
    )
    assert [(a.call_id, a.tool, a.arguments, a.reason) for a in batched.asks] == [
        ("m2", "send", {"to": "b"}, "d"),
        ("i1:1", "drop", {}, None),
    ]
    assert batched.skips_rejected
    assert batched.resume({"m2": approve, "i1:1": reject}) == {
        "decisions": [{"type": "approve"}, {"type": "reject", "message": "r"}]
    }
    per_call = plan_interrupt(
        "i2",
        {
            "type": "tool_approval",
            "tool_call_id": "m1",
            "name": "send",
            "args": {"to": "a"},
            "description": "",
        },
    )
    assert [(a.call_id, a.reason) for a in per_call.asks] == [("m1", None)]
    assert per_call.resume({"m1": ApprovalResult(approved=False)}) == {"type": "reject"}
    in_tool = plan_interrupt("i3", "ok?", raised_in=ToolCallInfo("refund", {"n": 1}, "t1"))
    assert [(a.call_id, a.tool, a.arguments) for a in in_tool.asks] == [("t1", "refund", {"n": 1})]
    assert not in_tool.skips_rejected
    assert in_tool.resume({"t1": reject}) == {"approved": False, "reason": "r"}
    named = plan_interrupt("i4", {"name": "mail", "args": '{"to": "x"}', "reason": "why"})
    assert [(a.call_id, a.tool, a.arguments, a.reason) for a in named.asks] == [
        ("i4", "mail", {"to": "x"}, "why")
    ]
    # anything else is a question (an evalport interrupt), answered by the resume value
    other = plan_interrupt("i5", ["anything"])
    assert (other.asks, other.question) == ([], ("interrupt", ["anything"]))
    assert other.resume({}, "the answer") == "the answer"
    form = plan_interrupt("i6", {"kind": "form", "fields": ["name"]})
    assert form.question == ("form", {"kind": "form", "fields": ["name"]})
    # reviews="interrupts": the middleware's request is one tool_review question
    review = plan_interrupt(
        "i7", {"type": "tool_approval", "tool_call_id": "m1", "name": "send"}, reviews="interrupts"
    )
    assert review.question is not None and review.question[0] == "tool_review"
    assert [a.call_id for a in review.asks] == ["m1"]
    answer = {"type": "respond", "message": "done"}
    assert review.resume({}, answer) == answer
    assert [(a.call_id, d) for a, d in review.reviewed(answer)] == [("m1", answer)]
