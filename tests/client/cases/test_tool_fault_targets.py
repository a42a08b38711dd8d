"""Tool faults end to end in one process: LocalTarget, HttpTarget against the real adapter
(httpx.ASGITransport), the server's opt-in, @eval_case(faults=...) and tool_was_injected."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
from evalport.client import (
    Case,
    FaultsUnsupported,
    HttpTarget,
    LocalTarget,
    Target,
    ToolFault,
    Verdict,
    cases_from,
    eval_case,
    run_trial,
)
from evalport.client.assertions import CalledTool, ToolWasInjected
from evalport.protocol import AgentRun, TracePolicy
from evalport.protocol.runtime._agent import history_of
from evalport.server import EvalAdapter
from support.tool_faults import (
    AUTH,
    EXAMPLES,
    TOKEN,
    CountingApp,
)
from support_agent import agent

PROBLEM = "urn:evalport:problem:"
FLAKY = [ToolFault(tool="order_status", error="order service timed out", rate=0.5, seed=11)]


def http_target(adapter: EvalAdapter, **options: Any) -> tuple[HttpTarget, CountingApp]:
    app = CountingApp(adapter.app())
    target = HttpTarget(
        "http://support.test", token=TOKEN, transport=httpx.ASGITransport(app=app), **options
    )
    return target, app


@pytest.fixture
async def adapters() -> AsyncIterator[list[EvalAdapter]]:
    made: list[EvalAdapter] = []
    yield made
    for adapter in made:
        await adapter.aclose()


def shape(run: AgentRun) -> list[Any]:
    """What a run says, ids and timings aside."""
    return [
        run.status,
        run.reply,
        run.user_messages,
        [
            (
                step.turn,
                step.type,
                [
                    (e.name, e.arguments, e.has_error, e.error, e.result, e.injected)
                    for e in step.tool_executions
                ],
            )
            for step in run.steps
        ],
    ]


# -- the server's opt-in ---------------------------------------------------------------------


async def test_health_lists_faults_only_when_the_server_enables_them(adapters) -> None:
    for enabled in (False, True):
        adapter = EvalAdapter(agent, token=TOKEN, faults=enabled)
        adapters.append(adapter)
        target, _ = http_target(adapter)
        async with target:
            health = await target.check()
        assert ("faults" in health.capabilities) is enabled


async def test_faults_on_a_server_without_them_are_a_422_saying_how_to_enable_them(
    adapters,
) -> None:
    adapter = EvalAdapter(agent, token=TOKEN)
    adapters.append(adapter)
    transport = httpx.ASGITransport(app=adapter.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://x", headers=AUTH) as http:
        refused = await http.post("/evals/sessions", json={"faults": [FAULT_JSON]})
        assert refused.status_code == 422
        assert refused.headers["content-type"] == "application/problem+json"
        body = refused.json()
        assert body["type"] == PROBLEM + "faults-disabled"
        assert "--allow-faults" in body["detail"] and "faults=True" in body["detail"]
        assert body["errors"] == [
            {"path": "$.faults", "message": "tool faults are disabled on this server"}
        ]
        # an empty list asks for nothing: accepted, like no field at all
        assert (await http.post("/evals/sessions", json={"faults": []})).status_code == 201
        bad = await http.post("/evals/sessions", json={"faults": [{**FAULT_JSON, "rate": 2}]})
        assert bad.status_code == 422 and bad.json()["type"] == PROBLEM + "invalid-body"
        assert bad.json()["errors"][0]["path"] == "$.faults[0].rate"


FAULT_JSON = {"tool": "order_status", "error": "down"}


@pytest.mark.parametrize("health_check", [True, False])
async def test_http_target_refuses_faults_before_creating_a_session(
    adapters, health_check: bool
) -> None:
    adapter = EvalAdapter(agent, token=TOKEN)
    adapters.append(adapter)
    target, app = http_target(adapter, health_check=health_check)
    async with target:
        with pytest.raises(FaultsUnsupported, match="--allow-faults") as caught:
            await target.open(faults=FLAKY)
        assert "EvalAdapter(..., faults=True)" in str(caught.value)
        assert ("POST", "/evals/sessions") not in app.seen
        session = await target.open()  # without faults nothing is asked of the server
        await session.close()


async def test_bad_faults_are_refused_by_the_client_naming_the_entry() -> None:
    async with LocalTarget(agent) as target:
        with pytest.raises(ValueError, match=r"faults\[1\]: .*rate"):
            await target.open(faults=[FAULT_JSON, {"tool": "x", "error": "e", "rate": 7}])
        with pytest.raises(TypeError, match="list of ToolFault"):
            await target.open(faults=FLAKY[0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one of error and result"):
        eval_case(faults=[{"tool": "order_status"}])


# -- the same faults, the same runs ----------------------------------------------------------


async def faulted_run(target: Target, turns: int = 8) -> AgentRun:
    session = await target.open(faults=FLAKY)
    for _ in range(turns):
        await session.send("Where is my order A1049?")
    run = session.run
    await session.close()
    return run


async def test_local_target_injects_seeded_faults_in_process() -> None:
    async with LocalTarget(agent, policy=TracePolicy.verbatim()) as target:
        first, again = await faulted_run(target), await faulted_run(target)
    assert shape(first) == shape(again)  # another session, the same seeded faults
    injected = [e for step in first.steps for e in step.tool_executions if e.injected]
    assert 0 < len(injected) < 8
    assert {e.error for e in injected} == {"order service timed out"}
    replies = [m.content for m in history_of(first) if m.role == "assistant"]
    sorry = [reply for reply in replies if "try again" in str(reply)]
    assert len(sorry) == len(injected)  # the agent says so on each failed lookup
    ok = [r for r in first.tools if not r.error]
    assert ok and all(r.result["status"] == "shipped" for r in ok)


async def test_local_and_http_targets_give_identical_runs(adapters) -> None:
    adapter = EvalAdapter(agent, token=TOKEN, faults=True)
    adapters.append(adapter)
    target, _ = http_target(adapter, policy=TracePolicy.verbatim())
    async with target, LocalTarget(agent, policy=TracePolicy.verbatim()) as local:
        remote_run = await faulted_run(target)
        local_run = await faulted_run(local)
    assert shape(remote_run) == shape(local_run)
    assert any(e.injected for step in remote_run.steps for e in step.tool_executions)


# -- cases and assertions --------------------------------------------------------------------


def example_cases() -> list[Case]:
    spec = importlib.util.spec_from_file_location(
        "support_faults_eval", EXAMPLES / "evals" / "_faults" / "support_faults_eval.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [
        *cases_from(module.status_from_a_canned_lookup),
        *cases_from(module.order_service_times_out_once),
    ]


async def test_the_example_fault_cases_pass_in_process() -> None:
    cases = example_cases()
    assert all(case.faults for case in cases)
    async with LocalTarget(agent) as target:
        results = [await run_trial(case, target) for case in cases]
    assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.PASSED], [
        (r.error, [a for a in r.assertions if not a.passed]) for r in results
    ]


async def test_the_example_fault_cases_pass_over_http(adapters) -> None:
    adapter = EvalAdapter(agent, token=TOKEN, faults=True)
    adapters.append(adapter)
    target, _ = http_target(adapter)
    async with target:
        results = [await run_trial(case, target) for case in example_cases()]
    assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.PASSED]


async def test_a_case_without_its_faults_fails_its_injection_assertions() -> None:
    (case,) = example_cases()[:1]
    plain = cases_from(eval_case(case.description)(case.func))[0]
    async with LocalTarget(agent) as target:
        result = await run_trial(plain, target)
    assert result.verdict == Verdict.FAILED
    failed = {a.name.split("(")[0]: a.message for a in result.assertions if not a.passed}
    assert set(failed) == {"contains", "tool_was_injected"}
    assert failed["tool_was_injected"].startswith("1 call(s) of 'order_status', none injected")


async def test_tool_was_injected_on_redacted_runs_and_its_messages() -> None:
    faults = [ToolFault(tool="order_status", error="down", times=1)]
    async with LocalTarget(agent) as target:  # the default policy digests arguments
        session = await target.open(faults=faults)
        await session.send("Where is my order A1049?")
        await session.send("Where is my order A1050?")
        run = session.run
    assert ToolWasInjected("order_status").evaluate(run).passed
    assert ToolWasInjected("order_status", {"order_id": "A1049"}).evaluate(run).passed
    missed = ToolWasInjected("order_status", {"order_id": "A1050"}).evaluate(run)
    assert not missed.passed and "none injected" in missed.message
    never = ToolWasInjected("refund_order").evaluate(run)
    assert not never.passed and never.message == "'refund_order' was never called"
    unmatched = ToolWasInjected("order_status", {"order_id": "Z9"}).evaluate(run)
    assert unmatched.message == "no call of 'order_status' matched the arguments"
    # a failed call is not an injected one: called_tool(is_error=True) covers both
    assert CalledTool("order_status", is_error=True, count=1).evaluate(run).passed


async def test_the_html_transcript_marks_injected_calls() -> None:
    from evalport.client.reports._html_trial import _transcript
    from evalport.protocol import RunEnvelope, encode

    faults = [ToolFault(tool="order_status", error="down", times=1)]
    async with LocalTarget(agent) as target:
        session = await target.open(faults=faults)
        await session.send("Where is my order A1049?")
        await session.send("Where is my order A1049?")
        run = msgspec.json.decode(encode(RunEnvelope(run=session.run)))["run"]
    page = _transcript(run)
    assert page.count("[injected fault]") == 1
    assert page.index("[injected fault]") < page.index("Order A1049 is shipped")


async def test_the_run_cache_keys_recordings_by_the_faults(tmp_path) -> None:
    from evalport.client import RunCache, Runner, RunOptions

    @eval_case(id="status", faults=[ToolFault(tool="order_status", error="down", times=1)])
    async def down(ctx):
        await ctx.send("Where is my order A1049?")
        ctx.tool_was_injected("order_status")

    @eval_case(id="status", faults=[ToolFault(tool="order_status", error="gone", times=1)])
    async def gone(ctx):
        await ctx.send("Where is my order A1049?")
        ctx.tool_was_injected("order_status")

    async def run(func: Any) -> Any:
        async with LocalTarget(agent) as target:
            runner = Runner(target, RunOptions(), cache=RunCache(tmp_path))
            return (await runner.run(cases_from(func))).results[0].trials[0]

    first, replayed, other = await run(down), await run(down), await run(gone)
    assert (first.cached, replayed.cached, other.cached) == (False, True, False)
    assert first.verdict == replayed.verdict == other.verdict == Verdict.PASSED
    errors = [t.run["steps"][0]["toolExecutions"][0]["error"] for t in (replayed, other)]
    assert errors[0] != errors[1]  # digests of "down" and "gone": each from its own faults


def test_the_trajectory_reads_injected_from_a_tools_entry_without_an_id() -> None:
    from evalport.client import Trajectory
    from evalport.protocol import ToolCall, ToolRecord

    run = AgentRun(tools=[ToolRecord(tool_call=ToolCall(name="lookup"), injected=True)])
    assert [call.injected for call in Trajectory.of(run).all_calls] == [True]
