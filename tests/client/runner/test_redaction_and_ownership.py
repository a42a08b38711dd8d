"""Redaction and ownership rules the runner, the run cache and the value assertions keep
(regressions found in review), on the example support agent."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.client import (
    Case,
    EvalContext,
    HttpTarget,
    LocalTarget,
    RunCache,
    Runner,
    RunOptions,
    Verdict,
    run_trial,
)
from evalport.protocol import TracePolicy, is_digest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from support_agent import agent

MESSAGE = "show my orders for ana@example.com"


async def send_once(ctx: EvalContext) -> None:
    await ctx.send(MESSAGE)
    ctx.called_tool("search_orders")


def search_arguments(run: Any) -> Any:
    (tool,) = [t for t in run["tools"] if t["tool_call"]["name"] == "search_orders"]
    return tool["tool_call"]["arguments"]


async def test_a_recording_made_verbatim_never_answers_a_safe_target(tmp_path: Path) -> None:
    case = Case(id="orders", func=send_once)
    seen = []
    for policy in (TracePolicy.verbatim(), TracePolicy.safe()):
        target = LocalTarget(agent, policy=policy)
        wrapped = RunCache(tmp_path).wrap(target, case_id=case.id, row=None, trial=0)
        result = await run_trial(case, wrapped)
        for session in wrapped.sessions:
            await session.close()
        await target.aclose()
        assert result.verdict == Verdict.PASSED, result.error
        seen.append((wrapped.cached, search_arguments(result.run)))
    (verbatim_cached, verbatim_args), (safe_cached, safe_args) = seen
    assert not verbatim_cached and not is_digest(next(iter(verbatim_args.values())))
    assert not safe_cached, "a verbatim recording replayed to a safe() target"
    assert all(is_digest(value) for value in safe_args.values())


async def test_attach_is_never_answered_from_the_cache(tmp_path: Path) -> None:
    async def inspect(ctx: EvalContext) -> None:
        ctx.not_called_tool("search_orders")

    async with LocalTarget(agent) as target:
        session = await target.open()
        await session.send(MESSAGE)
        for cache in (None, RunCache(tmp_path)):
            runner = Runner(target, RunOptions(attach=session.id), cache=cache)
            report = await runner.run([Case(id="inspect", func=inspect)])
            (trial,) = report.results[0].trials
            assert trial.verdict == Verdict.FAILED, "the attached run did call search_orders"
            assert not trial.cached


async def test_the_runner_leaves_sessions_a_case_attached_to_alone() -> None:
    async with LocalTarget(agent) as target:
        foreign = await target.open()
        await foreign.send(MESSAGE)

        async def look(ctx: EvalContext) -> None:
            attached = await ctx.attach(foreign.id)
            assert attached.turns == 1

        report = await Runner(target, RunOptions()).run([Case(id="look", func=look)])
        assert report.results[0].trials[0].verdict == Verdict.PASSED
        refreshed = await foreign.refresh()  # still there: not deleted by the runner
        assert refreshed.turns == 1
        await foreign.close()


async def test_predicates_and_includes_on_redacted_values_are_not_evaluable() -> None:
    async def grade(ctx: EvalContext) -> None:
        await ctx.send(MESSAGE)
        arguments = search_arguments({"tools": [_plain(t) for t in ctx.run.tools]})
        ctx.expect(arguments).satisfies(lambda args: len(args["query"]) < 50)
        ctx.expect(next(iter(arguments.values()))).includes("hash")

    async with LocalTarget(agent) as target:  # safe() by default
        result = await run_trial(Case(id="grade", func=grade), target)
    assert result.verdict == Verdict.FAILED
    assert [a.evaluated for a in result.assertions] == [False, False]
    assert all("verbatim" in a.message for a in result.assertions)


def _plain(tool: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(tool)


async def test_a_target_without_health_runs_when_the_check_is_off() -> None:
    from evalport.server import EvalAdapter

    adapter = EvalAdapter(agent, token=None)
    inner = httpx.ASGITransport(app=adapter.app())

    async def no_health(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/health"):
            return httpx.Response(404)
        return await inner.handle_async_request(request)

    target = HttpTarget(
        "http://agent.test", transport=httpx.MockTransport(no_health), health_check=False
    )
    async with target:
        report = await Runner(target, RunOptions()).run([Case(id="orders", func=send_once)])
    assert report.results[0].trials[0].verdict == Verdict.PASSED
    await adapter.aclose()


@pytest.mark.parametrize("limit", [None, 5.0])
async def test_a_timeout_error_raised_by_the_case_is_its_own_error(limit: float | None) -> None:
    async def raises(ctx: EvalContext) -> None:
        raise TimeoutError("the upstream lookup timed out")

    async with LocalTarget(agent) as target:
        report = await Runner(target, RunOptions(timeout=limit)).run(
            [Case(id="raises", func=raises)]
        )
    (trial,) = report.results[0].trials
    assert trial.verdict == Verdict.ERROR
    assert trial.error is not None and "upstream lookup timed out" in trial.error
    assert "timed out after" not in trial.error


async def test_a_case_that_outlives_its_limit_says_so() -> None:
    import asyncio

    async def slow(ctx: EvalContext) -> None:
        await asyncio.sleep(5)

    async with LocalTarget(agent) as target:
        result = await run_trial(Case(id="slow", func=slow, timeout=0.05), target)
    assert result.verdict == Verdict.ERROR
    assert result.error is not None and "timed out after 0.05s" in result.error
