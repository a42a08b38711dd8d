"""Messages carry their tool calls in the form Instructor's ``Message`` reads, beside
evalport's own, without breaking an evalport client of protocol 1.0 or 1.1.

``instructor_message`` follows Instructor PHP's ``MessageInput::fromArray`` (commit
05e240cd, as ../shared/reference/instructor-wire.md records it): tool calls come from
``tool_calls`` (``{id, name, arguments}``), a tool result from ``tool_result``
(``{content, call_id, tool_name, is_error}``, ``content`` a string or the decode throws);
``toolCalls`` and ``toolCallId`` are not read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from evalport.protocol import (
    AgentRun,
    Message,
    RunEnvelope,
    Step,
    ToolCall,
    TracePolicy,
    decode_run,
    encode,
    is_digest,
)
from evalport.protocol.runtime import AgentSession, SessionInfo, TurnContext

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi.yaml").read_text())


def instructor_message(data: dict[str, Any]) -> dict[str, Any]:
    """The tool data Instructor's decoder keeps of one wire message."""
    metadata = data.get("_metadata") or data.get("metadata") or {}
    calls = data.get("tool_calls") or metadata.get("tool_calls") or []
    result = data.get("tool_result") or metadata.get("tool_result")
    if result is not None and not isinstance(result.get("content", ""), str):
        raise TypeError("ToolResult content must be a string.")
    return {
        "tool_calls": [
            {
                "id": call.get("id"),
                "name": call.get("name", "(unnamed-tool)"),
                "arguments": call.get("arguments") or call.get("args") or {},
            }
            for call in calls
        ],
        "tool_result": result,
    }


def messages_of(body: bytes) -> list[dict[str, Any]]:
    data = json.loads(body)
    run = data.get("run", data)
    return [message for step in run["steps"] for message in step["outputMessages"]]


async def calling_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    ctx.model_step(
        content="checking",
        tool_calls=[ToolCall(id="call_7", name="lookup_order", arguments={"order_id": "A1049"})],
    )
    ctx.model_step(content="A1049 shipped", finish_reason="stop")
    return "A1049 shipped"


async def recorded_body(policy: TracePolicy | None = None) -> bytes:
    session = await AgentSession.open(calling_agent, SessionInfo(session_id="s-1"))
    run = await session.send("where is A1049?")
    return encode(RunEnvelope(run=policy.apply(run) if policy else run))


async def test_a_recorded_tool_call_reads_in_instructor_form() -> None:
    [asking, answering] = messages_of(await recorded_body())
    expected = [{"id": "call_7", "name": "lookup_order", "arguments": {"order_id": "A1049"}}]
    assert instructor_message(asking)["tool_calls"] == expected
    assert asking["toolCalls"] == expected  # evalport's form stays as 1.0 wrote it
    assert instructor_message(answering) == {"tool_calls": [], "tool_result": None}
    assert "tool_calls" not in answering and "tool_result" not in answering


async def test_both_forms_carry_the_same_redacted_arguments() -> None:
    [asking, _] = messages_of(await recorded_body(TracePolicy.safe()))
    [call] = instructor_message(asking)["tool_calls"]
    assert is_digest(call["arguments"]["order_id"])
    assert asking["toolCalls"][0]["arguments"] == call["arguments"]


def test_a_tool_message_reads_as_a_tool_result() -> None:
    message = Message(role="tool", name="lookup_order", tool_call_id="call_7", content="found")
    read = instructor_message(msgspec.json.decode(encode(message)))
    assert read["tool_result"] == {
        "content": "found",
        "call_id": "call_7",
        "tool_name": "lookup_order",
        "is_error": False,
    }
    # Instructor throws on a result that is not text: a JSON value goes as its text.
    structured = Message(role="tool", tool_call_id="call_7", content={"total": 12.5})
    read = instructor_message(msgspec.json.decode(encode(structured)))
    assert json.loads(read["tool_result"]["content"]) == {"total": 12.5}


def test_a_redacted_tool_result_leaks_nothing_through_instructor_form() -> None:
    secret = "card 4111 1111 1111 1111"
    message = Message(role="tool", name="charge", tool_call_id="call_1", content=secret)
    run = AgentRun(steps=[Step(output_messages=[message])])
    body = encode(TracePolicy.safe().apply(run))
    assert secret not in body.decode()
    [sent] = messages_of(body)
    assert json.loads(instructor_message(sent)["tool_result"]["content"]) == sent["content"]


def _spec_messages() -> list[dict[str, Any]]:
    return [
        message
        for example in SPEC["components"]["examples"].values()
        if "run" in example["value"]
        for step in example["value"]["run"]["steps"]
        for message in step["outputMessages"]
    ]


def test_the_spec_examples_carry_their_calls_in_instructor_form() -> None:
    calling = [message for message in _spec_messages() if message.get("toolCalls")]
    assert calling, "openapi.yaml's examples have no message with tool calls"
    for message in calling:
        assert instructor_message(message)["tool_calls"] == message["toolCalls"]


class MessageOf11(msgspec.Struct, kw_only=True, rename="camel"):
    """Message as an evalport 1.0 or 1.1 client declares it."""

    role: str = "assistant"
    content: Any = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


async def test_an_earlier_client_decodes_the_same_message() -> None:
    [asking, _] = messages_of(await recorded_body())
    old = msgspec.json.decode(json.dumps(asking).encode(), type=MessageOf11)
    assert old.tool_calls == [
        ToolCall(id="call_7", name="lookup_order", arguments={"order_id": "A1049"})
    ]


@pytest.mark.parametrize(
    "sent",
    [
        {"role": "assistant", "tool_calls": [{"id": "c1", "name": "f", "arguments": {"a": 1}}]},
        {
            "role": "tool",
            "content": "r",
            "tool_result": {"content": "r", "call_id": "c1", "tool_name": "f", "is_error": True},
        },
    ],
    ids=["tool_calls", "tool_result"],
)
def test_a_message_in_instructor_form_alone_is_read(sent: dict[str, Any]) -> None:
    body = {"reply": "", "status": "completed", "steps": [{"outputMessages": [sent]}]}
    [message] = decode_run(json.dumps(body).encode()).steps[0].output_messages
    if "tool_calls" in sent:
        assert message.tool_calls == [ToolCall(id="c1", name="f", arguments={"a": 1})]
    else:
        assert (message.tool_call_id, message.name, message.content) == ("c1", "f", "r")
        # Re-encoded, the flag only Instructor's form can carry is kept.
        assert msgspec.json.decode(encode(message))["tool_result"]["is_error"] is True
