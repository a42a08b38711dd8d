"""End to end: discovered cases, approval policies and the verdicts over real uvicorn."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from evalport.client import (
    ApprovalRequest,
    HttpTarget,
    Verdict,
    cases_from,
    discover,
    eval_case,
    run_trial,
)
from evalport.server import EvalAdapter
from support.servers import running_server

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "h4-e2e-token-0123456789"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from support_agent import agent
    finally:
        sys.path.remove(str(ROOT / "examples"))
    adapter = EvalAdapter(agent, token=TOKEN)
    with running_server(adapter.app("/support")) as url:
        yield f"{url}/support"


async def test_the_example_suite_passes_over_the_network(base_url: str) -> None:
    cases, errors = discover(ROOT / "examples" / "evals")
    assert errors == [] and len(cases) >= 5
    async with HttpTarget(base_url, token=TOKEN) as target:
        results = [await run_trial(case, target) for case in cases]
    failures = [(r.case_id, r.error, r.assertions) for r in results if r.verdict != Verdict.PASSED]
    assert failures == []


async def test_approval_decisions_cross_the_wire_per_call_id(base_url: str) -> None:
    asked: list[list[str]] = []

    async def manager(request: ApprovalRequest, so_far) -> dict:
        asked.append([item.tool for item in request.pending])
        return {call_id: ("reject", "needs a manager") for call_id in request.ids}

    @eval_case(approval_policy=manager)
    async def rejected(ctx) -> None:
        await ctx.converse(["refund order A1049", "yes"])
        ctx.tool_was_rejected("refund_order", {"order_id": "A1049", "amount": 349.0})
        ctx.contains("needs a manager")

    @eval_case
    async def unanswered(ctx) -> None:
        await ctx.converse(["refund order A1049", "yes"])

    async with HttpTarget(base_url, token=TOKEN) as target:
        ok = await run_trial(cases_from(rejected)[0], target)
        loud = await run_trial(cases_from(unanswered)[0], target)
    assert ok.verdict == Verdict.PASSED, (ok.error, ok.assertions)
    assert asked == [["refund_order"]]
    assert loud.verdict == Verdict.ERROR and "(refund_order)" in (loud.error or "")
