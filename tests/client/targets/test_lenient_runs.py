"""Whatever a compatible server sends decodes into a usable, redacted run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
import respx
from evalport.client import HttpTarget
from evalport.protocol import TracePolicy, digest, is_digest, matches_digest
from target_fixtures import BASE, SECRET, health, wire_run


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.get("health").respond(json=health())
        router.post("evals/sessions").respond(201, json={"sessionId": "s1"})
        yield router


async def send(mock: respx.MockRouter, body: Any) -> Any:
    mock.post("evals/sessions/s1/turns").respond(json=body)
    async with HttpTarget(BASE) as target:
        session = await target.open()
        return await session.send("hi")


async def test_instructor_minimal_reply(mock: respx.MockRouter) -> None:
    turn = await send(
        mock,
        {
            "run": {
                "reply": "verify first",
                "status": "completed",
                "turns": 1,
                "tools": [],
                "errors": "",
            }
        },
    )
    assert (turn.index, turn.reply, turn.run.status, turn.steps) == (
        1,
        "verify first",
        "completed",
        [],
    )


async def test_a_bare_run(mock: respx.MockRouter) -> None:
    turn = await send(mock, wire_run(1))
    assert turn.reply == "reply 1" and len(turn.run.steps) == 2 and len(turn.run.tools) == 1


async def test_unknown_fields_are_ignored(mock: respx.MockRouter) -> None:
    run = wire_run(1)
    run["futureField"] = {"x": [1, 2]}
    run["steps"][0]["latencyBreakdown"] = {"model": 1.0}
    run["steps"][0]["toolExecutions"][0]["sandbox"] = "v8"
    turn = await send(mock, {"run": run, "server": {"region": "eu"}})
    assert turn.run.steps[0].tool_executions[0].name == "lookup"


async def test_unknown_enum_values_are_kept_as_text(mock: respx.MockRouter) -> None:
    run = wire_run(1)
    run["status"] = "paused_for_review"
    run["steps"][0]["type"] = "reflection"
    run["steps"][0]["finishReason"] = "safety_pause"
    run["stopSignal"] = {"reason": "budget_exhausted", "message": "", "context": {}}
    turn = await send(mock, {"run": run})
    assert turn.run.status == "paused_for_review"
    assert (turn.run.steps[0].type, turn.run.steps[0].finish_reason) == (
        "reflection",
        "safety_pause",
    )
    assert turn.run.stop_signal is not None and turn.run.stop_signal.reason == "budget_exhausted"


async def test_pre_digested_payloads_pass_through(mock: respx.MockRouter) -> None:
    """A server that redacts (evalport per key, Instructor per whole map) keeps its digests."""
    whole = digest({"card": SECRET, "n": 1})
    run = wire_run(1)
    step = run["steps"][0]
    step["requestedToolCalls"][0]["arguments"] = whole
    execution = step["toolExecutions"][0]
    execution["arguments"] = {"card": digest(SECRET), "n": digest(1)}
    execution["result"] = digest({"holder": SECRET})
    run["tools"] = [
        {"id": execution["id"], "tool_call": {"id": "c1", "name": "lookup", "arguments": whole}}
    ]
    turn = await send(mock, {"run": run})
    assert turn.run.steps[0].requested_tool_calls[0].arguments == whole
    assert turn.run.steps[0].tool_executions[0].arguments["card"] == digest(SECRET)
    assert turn.run.steps[0].tool_executions[0].result == digest({"holder": SECRET})
    assert turn.run.tools[0].tool_call.arguments == whole
    assert matches_digest(SECRET, turn.run.steps[0].tool_executions[0].arguments["card"])


async def test_steps_without_tools_and_tools_without_steps(mock: respx.MockRouter) -> None:
    run = wire_run(1)
    run["steps"] = [{"turn": 1, "type": "final_response", "usage": {"input": 4, "output": 2}}]
    turn = await send(mock, {"run": run})
    assert turn.run.tools == [] and turn.run.usage.total == 6
    assert len(turn.steps) == 1 and turn.steps[0].id == ""
    # Instructor's servers may send only the flat list, with arguments as a JSON string.
    flat = {
        "reply": "ok",
        "status": "completed",
        "turns": 1,
        "tools": [
            {
                "tool_call": {
                    "name": "lookup",
                    "arguments": msgspec.json.encode({"card": SECRET}).decode(),
                },
                "result": SECRET,
            }
        ],
    }
    mock.post("evals/sessions/s1/turns").respond(json={"run": flat})
    async with HttpTarget(BASE) as target:
        session = await target.open()
        record = (await session.send("hi")).run.tools[0]
    assert matches_digest(SECRET, record.tool_call.arguments["card"])
    assert is_digest(record.result)


async def test_output_messages_with_tool_payloads_are_digested(mock: respx.MockRouter) -> None:
    run = wire_run(1)
    run["steps"][0]["outputMessages"] = [
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "c1", "name": "lookup", "arguments": {"card": SECRET}}],
        },
        {"role": "tool", "toolCallId": "c1", "content": f"holder {SECRET}"},
    ]
    turn = await send(mock, {"run": run})
    assert SECRET not in msgspec.json.encode(turn.run).decode()
    assert matches_digest(f"holder {SECRET}", turn.run.steps[0].output_messages[1].content)


async def test_allow_lists_apply_to_http_runs(mock: respx.MockRouter) -> None:
    mock.post("evals/sessions/s1/turns").respond(json={"run": wire_run(1)})
    policy = TracePolicy.safe(allow_argument_keys=["n"])
    async with HttpTarget(BASE, policy=policy) as target:
        session = await target.open()
        execution = (await session.send("hi")).run.steps[0].tool_executions[0]
    assert execution.arguments["n"] == 1 and is_digest(execution.arguments["card"])


@pytest.mark.parametrize("status", [200, 201])
async def test_any_2xx_is_a_success(mock: respx.MockRouter, status: int) -> None:
    mock.post("evals/sessions/s1/turns").mock(
        return_value=httpx.Response(status, json={"run": wire_run(1)})
    )
    async with HttpTarget(BASE) as target:
        session = await target.open()
        assert (await session.send("hi")).index == 1
