"""A judge takes a run built from chat history like a live run: the reply, the last user
message and a transcript with the logged tool calls and their outcomes."""

from __future__ import annotations

import base64
import json

from evalport.client import TracePolicy, run_from_chat
from evalport.client.judges import FakeJudge, JudgeAssertions
from judge_host import Host

LOG = [
    {"role": "user", "content": "Where is order A1?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "order_status", "arguments": json.dumps({"order_id": "A1"})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "delayed in customs"},
    {"role": "assistant", "content": "A1 is held in customs."},
    {"role": "user", "content": "Thanks, cancel it then."},
    {"role": "assistant", "content": "I cannot cancel an order in customs."},
]
PNG = b"\x89PNG receipt pixels"
PDF = b"%PDF-1.7 the invoice"
WITH_PARTS = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What does this receipt say?"},
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64.b64encode(PNG).decode(),
                },
            },
            {
                "type": "document",
                "title": "invoice.pdf",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": base64.b64encode(PDF).decode(),
                },
            },
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "It says 12 EUR."}]},
]


async def test_a_judge_reads_a_run_built_from_chat_history() -> None:
    run = run_from_chat(LOG, policy=TracePolicy.verbatim())
    judge = FakeJudge([0.2])
    host = Host(judge)
    for number, message in enumerate(run.user_messages, start=1):
        host.add_turn(message, run)
        assert host.turns[-1].index == number
    expectation = JudgeAssertions(host).task_completion("cancel order A1").at_least(0.5)
    result = await expectation.resolve()
    assert not result.passed and result.evaluated
    request = judge.requests[0]
    assert request.output == "I cannot cancel an order in customs."
    assert request.input == "Thanks, cancel it then."
    assert request.run is not None and request.run.turns == 2
    transcript = request.transcript or ""
    assert "order_status" in transcript and "delayed in customs" in transcript
    assert "Where is order A1?" in transcript


async def test_a_judge_sees_the_logged_parts() -> None:
    run = run_from_chat(WITH_PARTS)
    judge = FakeJudge([0.9])
    host = Host(judge)
    host.add_turn("What does this receipt say?", run)
    await JudgeAssertions(host).task_completion("read the receipt").at_least(0.5).resolve()
    transcript = judge.requests[0].transcript or ""
    assert f"USER ATTACHED IMAGE: image/png, {len(PNG)} bytes" in transcript
    assert f"USER ATTACHED FILE: application/pdf, invoice.pdf, {len(PDF)} bytes" in transcript
    assert base64.b64encode(PNG).decode() not in transcript
