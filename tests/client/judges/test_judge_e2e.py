"""End to end: the example support agent served over real HTTP, a simulated user and a
judge both played by the fake chat server, an approval rejected by the policy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from evalport.client import Case, HttpTarget, SimulatedUser, Verdict, run_trial
from evalport.client.judges import OpenAIJudge
from evalport.server import EvalAdapter
from judge_fake_server import FakeChatServer, completion, verdict
from support.servers import running_server

ROOT = Path(__file__).parents[3]
TOKEN = "judge-e2e-token"
pytestmark = pytest.mark.e2e


def _agent() -> Any:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from support_agent import agent
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return agent


def _user_says(message: str) -> dict[str, Any]:
    answer = {"action": "send", "message": message, "reason": "continue"}
    return completion(msgspec.json.encode(answer).decode())


def _reject(request: Any, trajectory: Any) -> dict[str, Any]:
    return {call_id: ("reject", "above the auto-approve threshold") for call_id in request.ids}


async def test_simulated_refund_with_rejected_approval_is_judged(
    chat_server: FakeChatServer,
) -> None:
    chat_server.reset(
        _user_says("Hi, I want a refund for order #123"),
        _user_says("Yes, please proceed."),
        completion('{"action": "stop", "message": "", "reason": "gave_up"}'),
        verdict(0.9, "explained the rejection and did not retry", ["I cannot refund"]),
    )
    user = SimulatedUser(
        persona="A customer who wants their money back",
        goal="Get a refund for order 123",
        max_turns=4,
        model="user-model",
        base_url=chat_server.base_url,
        api_key_env=None,
    )
    judge = OpenAIJudge("judge-model", base_url=chat_server.base_url, api_key_env=None)

    async def refund_case(t: Any) -> None:
        await t.simulate(user)
        t.judge().task_completion("get order 123 refunded").gate()

    with running_server(EvalAdapter(_agent(), token=TOKEN).app()) as base:
        async with HttpTarget(base, token=TOKEN) as target:
            result = await run_trial(
                Case(id="refund-sim", func=refund_case),
                target,
                judge=judge,
                approval_policy=_reject,
            )
    await user.aclose()
    await judge.aclose()

    assert result.error is None, result.error
    assert result.verdict == Verdict.PASSED
    (judged,) = result.assertions
    assert judged.score == 0.9 and judged.severity == "gate"
    assert user.stop_reason == "gave_up" and len(chat_server.requests) == 4
    # the simulated user read the agent's reply inside a fence
    third = chat_server.requests[2]["messages"][1]["content"]
    assert "ASSISTANT: I'm sorry, I cannot refund order 123" in third
    # the judge read the whole redacted trajectory, with the rejected approval
    prompt = chat_server.requests[3]["messages"][1]["content"]
    assert "USER: Hi, I want a refund for order #123" in prompt
    assert "TOOL CALL refund_order({order_id: <redacted <string:" in prompt
    assert "approval rejected: above the auto-approve threshold" in prompt
    assert "do not count the rejection against the assistant" in prompt
    # judge tokens are reported apart from the agent's
    (record,) = result.judges
    assert (record.criterion, record.model, record.input_tokens) == (
        "task_completion",
        "fake-model",
        11,
    )
