"""Runs from chat history: the same two-turn conversation (parallel calls with JSON-string
arguments, a tool error, usage) logged in OpenAI chat, Responses and Anthropic formats
builds one run, on which the trajectory assertions give the verdicts they give on the run
of a live agent that did the same; malformed logs name the message and the fault."""

from __future__ import annotations

import json
from typing import Any

import pytest
from evalport.client import ChatHistoryError, LocalTarget, TracePolicy, run_from_chat
from evalport.client.assertions import (
    CalledTool,
    Contains,
    MaxToolCalls,
    NoFailedActions,
    NotCalledTool,
    Succeeded,
    ToolOrder,
    TotalTokensAtMost,
)
from evalport.protocol import RunStatus, ToolCall, Usage, matches_digest

A1 = {"order_id": "A1"}
B2 = {"order_id": "B2"}
REFUND = {"order_id": "A1", "amount": 20}
SHIPPED = '{"status": "shipped"}'
MISSING = "order B2 not found"
ANSWER_1 = "A1 has shipped; I could not find B2."
ANSWER_2 = "Done: A1 is refunded."

OPENAI_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Where are orders A1 and B2?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "order_status", "arguments": json.dumps(A1)},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "order_status", "arguments": json.dumps(B2)},
            },
        ],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    },
    # parallel results answer in any order
    {"role": "tool", "tool_call_id": "call_2", "content": MISSING, "is_error": True},
    {"role": "tool", "tool_call_id": "call_1", "content": SHIPPED},
    {
        "role": "assistant",
        "content": ANSWER_1,
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    },
    {"role": "user", "content": [{"type": "text", "text": "Refund A1 please."}]},
    {
        "role": "assistant",
        "content": "Refunding A1.",
        "tool_calls": [
            {
                "id": "call_3",
                "type": "function",
                "function": {"name": "refund_order", "arguments": json.dumps(REFUND)},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_3", "content": '{"refunded": 20}'},
    {"role": "assistant", "content": ANSWER_2},
]

OPENAI_RESPONSES: list[dict[str, Any]] = [
    {"type": "message", "role": "developer", "content": "You are a support agent."},
    {"role": "user", "content": [{"type": "input_text", "text": "Where are orders A1 and B2?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "order_status",
        "arguments": json.dumps(A1),
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "input_tokens_details": {"cached_tokens": 100},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    },
    {
        "type": "function_call",
        "call_id": "call_2",
        "name": "order_status",
        "arguments": json.dumps(B2),
    },
    {"type": "function_call_output", "call_id": "call_2", "output": MISSING, "is_error": True},
    {"type": "function_call_output", "call_id": "call_1", "output": SHIPPED},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": ANSWER_1, "annotations": []}],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    },
    {"type": "message", "role": "user", "content": "Refund A1 please."},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Refunding A1."}],
    },
    {
        "type": "function_call",
        "call_id": "call_3",
        "name": "refund_order",
        "arguments": json.dumps(REFUND),
    },
    {"type": "function_call_output", "call_id": "call_3", "output": '{"refunded": 20}'},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": ANSWER_2}],
    },
]

ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "Where are orders A1 and B2?"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_1", "name": "order_status", "input": A1},
            {"type": "tool_use", "id": "call_2", "name": "order_status", "input": B2},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 20, "output_tokens": 30, "cache_read_input_tokens": 100},
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_2", "content": MISSING, "is_error": True},
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": [{"type": "text", "text": SHIPPED}],
            },
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "text", "text": ANSWER_1}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    },
    {"role": "user", "content": [{"type": "text", "text": "Refund A1 please."}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Refunding A1."},
            {"type": "tool_use", "id": "call_3", "name": "refund_order", "input": REFUND},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_3", "content": '{"refunded": 20}'}
        ],
    },
    {"role": "assistant", "content": ANSWER_2},
]

LOGS = {"openai-chat": OPENAI_CHAT, "openai-responses": OPENAI_RESPONSES, "anthropic": ANTHROPIC}


class SameConversationAgent:
    """A live agent that does what the logs record, through the runtime's recording API."""

    async def turn(self, message: str, ctx: Any) -> str:
        if ctx.turn == 1:
            calls = [
                ToolCall(id="call_1", name="order_status", arguments=A1),
                ToolCall(id="call_2", name="order_status", arguments=B2),
            ]
            ctx.model_step(tool_calls=calls, usage=Usage(input=20, output=30, cache_read=100))
            with ctx.tool_execution("order_status", A1, call_id="call_1") as run:
                run.result = SHIPPED
            try:
                with ctx.tool_execution("order_status", B2, call_id="call_2"):
                    raise LookupError(MISSING)
            except LookupError:
                pass
            ctx.model_step(content=ANSWER_1, usage=Usage(input=10, output=5))
            return ANSWER_1
        ctx.model_step(
            content="Refunding A1.",
            tool_calls=[ToolCall(id="call_3", name="refund_order", arguments=REFUND)],
        )
        with ctx.tool_execution("refund_order", REFUND, call_id="call_3") as run:
            run.result = '{"refunded": 20}'
        ctx.model_step(content=ANSWER_2)
        return ANSWER_2


ASSERTIONS = [
    CalledTool("order_status", count=2),
    CalledTool("order_status", args={"order_id": "B2"}, is_error=True),
    CalledTool("refund_order", args={"order_id": "A1", "amount": 20}),
    CalledTool("refund_order", args={"amount": 500}),  # fails
    NotCalledTool("delete_account"),
    NotCalledTool("refund_order"),  # fails
    ToolOrder(["order_status", "refund_order"]),
    ToolOrder(["refund_order", "order_status"], mode="strict"),  # fails
    ToolOrder(["order_status", "order_status", "refund_order"], mode="strict"),
    MaxToolCalls(2),  # fails
    NoFailedActions(),  # fails: B2's lookup failed
    Succeeded(),
    Contains("refunded"),
    TotalTokensAtMost(165),
    TotalTokensAtMost(164),  # fails
]


def verdicts(run: Any) -> list[bool]:
    return [assertion.evaluate(run).passed for assertion in ASSERTIONS]


@pytest.mark.parametrize("fmt", sorted(LOGS))
def test_each_format_builds_the_recorded_run(fmt: str) -> None:
    for given in (fmt, "auto"):
        run = run_from_chat(LOGS[fmt], format=given, policy=TracePolicy.verbatim())
        assert run.turns == 2
        assert run.user_messages == ["Where are orders A1 and B2?", "Refund A1 please."]
        assert run.reply == ANSWER_2
        assert run.status == RunStatus.COMPLETED
        assert [step.turn for step in run.steps] == [1, 1, 2, 2]
        assert [step.finish_reason for step in run.steps] == [
            "tool_calls",
            "stop",
            "tool_calls",
            "stop",
        ]
        first = run.steps[0]
        assert [(c.id, c.name, c.arguments) for c in first.requested_tool_calls] == [
            ("call_1", "order_status", A1),
            ("call_2", "order_status", B2),
        ]
        outcomes = [(e.tool_call_id, e.has_error, e.result, e.error) for e in first.tool_executions]
        assert outcomes == [("call_2", True, None, MISSING), ("call_1", False, SHIPPED, None)]
        assert first.has_errors
        assert run.steps[2].output_messages[0].content == "Refunding A1."
        assert [record.tool_call.name for record in run.tools] == [
            "order_status",
            "order_status",
            "refund_order",
        ]
        assert run.usage.total == 165
        assert run_from_chat(LOGS[fmt], format=given, policy=TracePolicy.verbatim()) == run


async def test_assertions_judge_a_built_run_as_they_judge_a_live_one() -> None:
    async with LocalTarget(SameConversationAgent(), policy=TracePolicy.verbatim()) as target:
        session = await target.open()
        await session.send("Where are orders A1 and B2?")
        await session.send("Refund A1 please.")
        live = session.run
    expected = verdicts(live)
    assert expected == [
        True,
        True,
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
        False,
        True,
        True,
        True,
        False,
    ]
    for fmt, log in LOGS.items():
        # The logs answer B2 before A1, the live agent A1 first: the verdicts do not care.
        assert verdicts(run_from_chat(log, policy=TracePolicy.verbatim())) == expected, fmt
        assert verdicts(run_from_chat(log)) == expected, fmt  # the safe policy digests payloads


def test_the_safe_policy_is_the_default() -> None:
    run = run_from_chat(OPENAI_CHAT)
    execution = run.steps[0].tool_executions[1]
    assert execution.result != SHIPPED and matches_digest(SHIPPED, execution.result)
    assert set(execution.arguments) == {"order_id"}  # keys stay in clear
    assert run.reply == ANSWER_2 and run.user_messages[1] == "Refund A1 please."
    allowed = run_from_chat(OPENAI_CHAT, policy=TracePolicy.safe(allow_tools=["order_status"]))
    assert allowed.steps[0].tool_executions[1].result == SHIPPED


def test_a_conversation_cut_off_mid_turn_is_in_progress() -> None:
    run = run_from_chat(ANTHROPIC[:2], policy=TracePolicy.verbatim())
    assert run.status == RunStatus.IN_PROGRESS
    assert [c.name for c in run.steps[0].requested_tool_calls] == ["order_status", "order_status"]
    assert run.tools == []
    assert not Succeeded().evaluate(run).passed


def test_arguments_that_are_not_a_json_object_stay_a_string() -> None:
    log = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "echo", "arguments": "{not json"}}],
        },
    ]
    run = run_from_chat(log, policy=TracePolicy.verbatim())
    assert run.steps[0].requested_tool_calls[0].arguments == "{not json"


@pytest.mark.parametrize(
    ("log", "fmt", "message"),
    [
        (
            [{"role": "user", "content": "hi"}, "oops"],
            "auto",
            "message 1: expected a JSON object, got str",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "wizard", "content": "x"}],
            "openai-chat",
            "message 1: unknown role 'wizard' (format openai-chat)",
        ),
        (
            [*OPENAI_CHAT[:3], {"role": "tool", "tool_call_id": "call_9", "content": "x"}],
            "auto",
            "message 3: tool result for call id 'call_9' matches no earlier call (format openai-chat)",
        ),
        (
            [*OPENAI_CHAT[:4], OPENAI_CHAT[3]],
            "auto",
            "message 4: call id 'call_2' is answered twice (format openai-chat)",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]}],
            "auto",
            "message 0: a tool call has no name (format openai-chat)",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "x", "input": {}}]}],
            "auto",
            "message 0: tool call 'x' has no id (format anthropic)",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 3}}],
                }
            ],
            "auto",
            "message 0: tool call arguments must be a JSON string or object, got int (format openai-chat)",
        ),
        ([{"type": "function_call_output"}], "auto", "message 0: a tool result has no call id"),
        (
            OPENAI_CHAT + ANTHROPIC,
            "auto",
            "the messages mix formats (anthropic, openai-chat); pass format=",
        ),
        ({"messages": []}, "auto", "expected a list of messages, got dict"),
        ([], "gemini", "unknown format 'gemini'"),
    ],
)
def test_malformed_logs_name_the_message_and_the_fault(log: Any, fmt: str, message: str) -> None:
    with pytest.raises(ChatHistoryError) as raised:
        run_from_chat(log, format=fmt)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError)
