"""Every kind of run the protocol layer produces decodes in Instructor PHP's HttpAgentTarget.

The rules live in ``instructor_rules.py`` (from ``reference/instructor-wire.md``): UUID ids
where they are read, strict stop-signal reasons, known statuses and step types, ``tools``
in sync with the steps, integers where integers are read, argument maps, and no PHP
exception class names. The runs checked here:

- the Struct defaults and hand-built runs (every run example of ``openapi.yaml``);
- runs recorded by the turn runtime: tools (succeeding, failing), usage, events, the LLM
  profile, several turns, a stop signal, an agent that raises, a timeout, an approval
  suspended, approved and rejected, a sync agent;
- each of those after ``TracePolicy.safe()`` digested its payloads;
- runs the client decoded leniently from a steps-only server, re-encoded.

The checker itself is tested against runs that break each rule, so it cannot pass
vacuously.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from evalport.protocol import (
    AgentRun,
    ErrorInfo,
    Message,
    RunEnvelope,
    Step,
    StopReason,
    ToolExecution,
    TracePolicy,
    decode_run,
    encode,
)
from evalport.protocol.runtime import AgentSession, SessionInfo, TurnContext, TurnTimedOut, tool
from instructor_rules import violations

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi.yaml").read_text())


def assert_instructor_decodes(run: AgentRun) -> None:
    for body in (encode(RunEnvelope(run=run)), encode(run)):
        assert violations(body) == []
    redacted = TracePolicy.safe().apply(run)
    assert violations(encode(RunEnvelope(run=redacted))) == []
    # What a client decodes and re-encodes still holds.
    assert violations(encode(decode_run(encode(run)))) == []


# ---------------------------------------------------------------- tools used by the agents


@tool
def lookup(order_id: str) -> dict[str, Any]:
    if order_id == "missing":
        raise LookupError(f"no order {order_id}")
    return {"id": order_id, "status": "shipped", "total": 12.5}


@tool(name="refund", approval=True)
async def refund(order_id: str, amount: int) -> str:
    return f"refunded {amount} on {order_id}"


async def tool_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    ctx.llm_profile(driver="openai", model="gpt-4o-mini", max_tokens=512, context_length=128000)
    ctx.model_step(content="checking", finish_reason="tool_calls")
    ctx.usage(120, 14, cache_read=32)
    lookup("A1049")
    try:
        lookup("missing")
    except LookupError:
        ctx.event("lookup.failed", {"order_id": "missing"})
    ctx.model_step(content="done", finish_reason="stop")
    ctx.usage(150, 9)
    return f"turn {len(history) // 2 + 1}: A1049 shipped"


async def refund_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    try:
        return await refund("A1049", 250)
    except Exception as error:  # ApprovalRejected
        return f"not refunded: {error}"


async def stopping_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    ctx.model_step(content="too long", finish_reason="length")
    ctx.stop(StopReason.TOKEN_LIMIT, "token budget spent", context={"limit": 100})
    return "partial"


async def raising_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    lookup("A1")
    raise ValueError("upstream model refused")  # a PHP Throwable name, too


async def slow_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    lookup("A2")
    await asyncio.sleep(5)
    return "late"


def sync_agent(message: str, history: list[Message], ctx: TurnContext) -> str:
    lookup("A3")
    return "sync reply"


def info() -> SessionInfo:
    return SessionInfo(session_id="5b0e7e1c-9a51-4f7e-8a43-3c1f9d2b6a10")


# ---------------------------------------------------------------- the kinds of runs


def test_defaults_and_minimal_runs() -> None:
    assert_instructor_decodes(AgentRun())
    assert_instructor_decodes(AgentRun(reply="verify first", status="completed", turns=1))


def _spec_runs() -> list[tuple[str, Any]]:
    return [
        (name, example["value"])
        for name, example in SPEC["components"]["examples"].items()
        if "run" in example["value"]
    ]


@pytest.mark.parametrize(("name", "body"), _spec_runs(), ids=[n for n, _ in _spec_runs()])
def test_spec_examples(name: str, body: dict[str, Any]) -> None:
    assert violations(json.dumps(body).encode()) == []
    assert_instructor_decodes(decode_run(json.dumps(body).encode()))


async def test_recorded_tools_usage_events_profile_over_turns() -> None:
    session = await AgentSession.open(tool_agent, info())
    await session.send("where is A1049?")
    run = await session.send("and again?")
    assert run.turns == 2 and len(run.tools) == 4
    assert any(record.error for record in run.tools)
    assert run.llm_profile is not None and run.events
    assert_instructor_decodes(run)


async def test_recorded_stop_signal() -> None:
    run = await (await AgentSession.open(stopping_agent, info())).send("go")
    assert run.status == "stopped"
    assert_instructor_decodes(run)


async def test_recorded_failure_has_no_php_class_name() -> None:
    run = await (await AgentSession.open(raising_agent, info())).send("go")
    assert run.status == "failed"
    assert run.error_details[0].type == "ValueError"
    assert_instructor_decodes(run)


async def test_recorded_timeout() -> None:
    session = await AgentSession.open(slow_agent, info())
    with pytest.raises(TurnTimedOut) as caught:
        await session.send("go", timeout=0.05)
    run = caught.value.run
    assert run.stop_signal is not None and run.stop_signal.reason == "time_limit"
    assert_instructor_decodes(run)
    await session.close()


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_recorded_approval_suspended_then_decided(decision: str) -> None:
    session = await AgentSession.open(refund_agent, info())
    suspended = await session.send("refund A1049")
    assert suspended.status == "in_progress" and suspended.pending_approvals
    assert_instructor_decodes(suspended)
    run = await session.decide({suspended.pending_approvals[0].call_id: decision})
    assert run.status == "completed" and not run.pending_approvals
    assert_instructor_decodes(run)


async def test_recorded_sync_agent() -> None:
    run = await (await AgentSession.open(sync_agent, info())).send("go")
    assert run.reply == "sync reply" and run.tools
    assert_instructor_decodes(run)


def test_client_decoded_steps_only_run() -> None:
    body = {
        "status": "completed",
        "turns": 1,
        "steps": [
            {
                "turn": 1,
                "type": "tool_execution",
                "requestedToolCalls": [{"id": "c1", "name": "t", "arguments": '{"a": 1}'}],
                "toolExecutions": [
                    {"name": "t", "toolCallId": "c1", "arguments": '{"a": 1}', "error": "x"}
                ],
            }
        ],
    }
    run = decode_run(json.dumps(body).encode())
    assert_instructor_decodes(run)


# ---------------------------------------------------------------- the checker can fail


def _good() -> dict[str, Any]:
    run = AgentRun(
        status="completed",
        turns=1,
        steps=[
            Step(
                id="6f1c0b2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e",
                turn=1,
                tool_executions=[
                    ToolExecution(id="0b6f1c2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e", name="t")
                ],
            )
        ],
    )
    run.sync_tools()
    document: dict[str, Any] = msgspec.to_builtins(RunEnvelope(run=run))
    return document


def _broken(edit: Any) -> list[str]:
    document = copy.deepcopy(_good())
    edit(document["run"])
    return violations(json.dumps(document).encode())


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        (lambda r: r["steps"][0].update(id="step-1"), "steps[0].id"),
        (lambda r: r["tools"][0].update(id=""), "tools[0].id"),
        (lambda r: r.update(stopSignal={"reason": "budget"}), "stopSignal.reason"),
        (lambda r: r.update(status="thinking"), "status"),
        (lambda r: r.update(turns=1.0), "turns"),
        (lambda r: r["steps"][0]["usage"].update(input=1.5), "usage.input"),
        (lambda r: r["steps"][0].update(type="reflection"), "steps[0].type"),
        (lambda r: r["tools"].clear(), "$.tools"),
        (lambda r: r["tools"][0].update(result=1), "$.tools"),
        (lambda r: r["steps"][0]["toolExecutions"][0].update(arguments="{}"), "arguments"),
        (lambda r: r.update(errors=["x"]), "errors"),
        (
            lambda r: r["steps"][0].update(
                errors=[msgspec.to_builtins(ErrorInfo(message="m", error_class="ValueError"))],
                hasErrors=True,
            ),
            "class",
        ),
        (lambda r: r["steps"][0].update(hasErrors=True), "hasErrors"),
        (lambda r: r["steps"][0].update(startedAt="yesterday"), "startedAt"),
        (lambda r: r.update(llmProfile={"maxTokens": "512"}), "maxTokens"),
    ],
)
def test_checker_catches_each_rule(edit: Any, rule: str) -> None:
    assert violations(json.dumps(_good()).encode()) == []
    problems = _broken(edit)
    assert problems and any(rule in problem for problem in problems), problems


def test_checker_rejects_non_object_bodies() -> None:
    assert violations(b"[]") and violations(b'{"run": 3}') and violations(b"nope")
