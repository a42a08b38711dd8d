"""Seeded tool fault injection in the runtime (protocol/faults.py, @tool, tool_execution)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import yaml
from evalport.protocol import (
    AgentRun,
    CreateSessionRequest,
    RequestError,
    ToolFault,
    decode_request,
    decode_run,
    encode,
)
from evalport.protocol.runtime import (
    AgentSession,
    FaultNotApplicable,
    FaultPlan,
    InjectedFault,
    SessionInfo,
    TurnContext,
    session_factory,
    tool,
)
from evalport.protocol.runtime._faults import as_faults, draw

# -- the plan --------------------------------------------------------------------------------


def calls_failing(faults: list[ToolFault], calls: int, session_id: str = "s") -> list[int]:
    """Ordinals (1-based) of the calls of 'lookup' a plan injects, all in turn 1."""
    ctx = TurnContext(run=AgentRun(), turn=1, message="m", session_id=session_id, faults=faults)
    hits: list[int] = []
    for ordinal in range(1, calls + 1):
        try:
            with ctx.tool_execution("lookup", {"n": ordinal}) as call:
                call.result = "ok"
        except InjectedFault:
            hits.append(ordinal)
    return hits


def test_same_seed_fails_the_same_calls_and_another_seed_others() -> None:
    fault = ToolFault(tool="lookup", error="down", rate=0.3, seed=42)
    first = calls_failing([fault], 200, session_id="one")
    again = calls_failing([fault], 200, session_id="two")  # the session does not matter
    assert first == again
    assert 30 < len(first) < 90  # about 30 %
    other = calls_failing([ToolFault(tool="lookup", error="down", rate=0.3, seed=43)], 200)
    assert other != first
    # the documented draw: SHA-256 of seed, tool and ordinal
    assert first == [n for n in range(1, 201) if draw("seed:42", "lookup", n) < 0.3]


def test_without_a_seed_the_session_id_seeds_the_draw() -> None:
    fault = ToolFault(tool="lookup", error="down", rate=0.5)
    assert calls_failing([fault], 60, "a") == calls_failing([fault], 60, "a")
    assert calls_failing([fault], 60, "a") != calls_failing([fault], 60, "b")


def test_rate_one_fails_every_call_and_rate_zero_none() -> None:
    assert calls_failing([ToolFault(tool="lookup", error="x")], 5) == [1, 2, 3, 4, 5]
    assert calls_failing([ToolFault(tool="lookup", error="x", rate=0.0, seed=1)], 50) == []
    assert calls_failing([ToolFault(tool="other", error="x")], 5) == []


def test_times_caps_injections_and_the_first_applicable_fault_wins() -> None:
    faults = [
        ToolFault(tool="lookup", error="first", times=2),
        ToolFault(tool="lookup", error="second", times=1),
    ]
    assert calls_failing(faults, 6) == [1, 2, 3]
    run = AgentRun()
    ctx = TurnContext(run=run, turn=1, message="m", faults=faults)
    texts = []
    for _ in range(4):
        try:
            with ctx.tool_execution("lookup"):
                pass
        except InjectedFault as error:
            texts.append(str(error))
    assert texts == ["first", "first", "second"]


async def test_turns_pick_the_turns_and_counts_survive_a_restore() -> None:
    faults = (
        ToolFault(tool="lookup", error="down on turn 2", turns=[2]),
        ToolFault(tool="lookup", result={"status": "lost"}, times=1),
    )
    session = await AgentSession.open(lookup_agent, SessionInfo("s", faults=faults))
    replies = [(await session.send(m)).reply for m in ("a", "b")]
    assert replies == ["{'status': 'lost'}", "sorry: down on turn 2"]
    # Another replica rebuilds the session from its run: times=1 is already used up.
    restored = await AgentSession.restore(
        _factory, SessionInfo("s", faults=faults), decode_run(session.run_envelope)
    )
    run = await restored.send("c")
    assert run.reply == "{'status': 'shipped'}"
    assert [e.injected for step in run.steps for e in step.tool_executions] == [True, True, False]


async def _factory(info: SessionInfo) -> Any:
    return await session_factory(lookup_agent)(info)


def test_plan_decides_nothing_for_tools_it_does_not_name() -> None:
    plan = FaultPlan([ToolFault(tool="lookup", error="x")])
    assert plan and FaultPlan([]).faults == () and not FaultPlan([])
    run = AgentRun()
    ctx = TurnContext(run=run, turn=1, message="m")
    with ctx.tool_execution("other") as call:
        call.result = 1
    execution = run.steps[0].tool_executions[0]
    assert plan.decide(run, execution, 1) is None


# -- the wire -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "path", "words"),
    [
        ({"tool": "t"}, "$.faults[0]", "exactly one of error and result, not neither"),
        ({"tool": "t", "error": "e", "result": 1}, "$.faults[0]", "not both"),
        ({"tool": "", "error": "e"}, "$.faults[0].tool", "length >= 1"),
        ({"tool": "t", "error": "e", "rate": 1.5}, "$.faults[0].rate", "<= 1.0"),
        ({"tool": "t", "error": "e", "rate": -0.1}, "$.faults[0].rate", ">= 0.0"),
        ({"tool": "t", "error": "e", "turns": [0]}, "$.faults[0].turns[0]", ">= 1"),
        ({"tool": "t", "error": "e", "turns": []}, "$.faults[0].turns", "length >= 1"),
        ({"tool": "t", "error": "e", "times": 0}, "$.faults[0].times", ">= 1"),
        ({"tool": "t", "error": "e", "seed": "7"}, "$.faults[0].seed", "got `str`"),
        ({"tool": "t", "error": "e", "seed": 0.5}, "$.faults[0].seed", "multiple of 1.0"),
        ({"tool": "t", "error": "e", "turns": [1.5]}, "$.faults[0].turns[0]", "multiple of 1.0"),
        ({"tool": "t", "error": "e", "retries": 1}, "$.faults[0].retries", "unknown field"),
    ],
)
def test_bad_faults_are_refused_naming_the_field(
    fault: dict[str, Any], path: str, words: str
) -> None:
    body = json.dumps({"faults": [fault]}).encode()
    with pytest.raises(RequestError) as caught:
        decode_request(body, CreateSessionRequest)
    assert caught.value.status == 422
    assert caught.value.path == path
    assert words in caught.value.detail


def test_faults_round_trip_and_stay_off_the_wire_when_absent() -> None:
    assert b"faults" not in encode(CreateSessionRequest(case_id="c"))
    request = decode_request(
        b'{"faults":[{"tool":"t","result":null},{"tool":"u","error":"e","rate":0.25,'
        b'"seed":3,"turns":[1,3],"times":2}]}',
        CreateSessionRequest,
    )
    assert isinstance(request.faults, list)
    canned, failing = request.faults
    assert canned.result is None and canned.error is msgspec.UNSET  # null is a result
    assert (failing.rate, failing.seed, failing.turns, failing.times) == (0.25, 3, [1, 3], 2)
    assert decode_request(encode(request), CreateSessionRequest) == request
    assert decode_request(b'{"faults":null}', CreateSessionRequest).faults is None
    # JSON's 2.0 is the whole number 2: ints once decoded (the seed keys the draw)
    whole = decode_request(
        b'{"faults":[{"tool":"t","error":"e","seed":7.0,"turns":[2.0],"times":1.0}]}',
        CreateSessionRequest,
    )
    assert isinstance(whole.faults, list)
    (fault,) = whole.faults
    assert (fault.seed, fault.turns, fault.times) == (7, [2], 1)
    assert all(type(n) is int for n in (fault.seed, fault.turns[0], fault.times))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tool": "t"},
        {"tool": "t", "error": "e", "result": 1},
        {"tool": "", "error": "e"},
        {"tool": "t", "error": ""},
        {"tool": "t", "error": "e", "rate": 2.0},
        {"tool": "t", "error": "e", "turns": [0]},
        {"tool": "t", "error": "e", "times": 0},
        {"tool": "t", "error": "e", "times": 1.5},
        {"tool": "t", "error": "e", "seed": 0.5},
    ],
)
def test_faults_built_in_python_are_checked_too(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="tool fault"):
        ToolFault(**kwargs)


# -- @tool and blocks ---------------------------------------------------------------------------


@tool
def lookup(order_id: str) -> dict[str, str]:
    ran.append(order_id)
    return {"status": "shipped"}


@tool
async def lookup_async(order_id: str) -> dict[str, str]:
    ran.append(order_id)
    return {"status": "shipped"}


ran: list[str] = []


def lookup_agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    try:
        return str(lookup("A1"))
    except InjectedFault as error:
        return f"sorry: {error}"


async def async_agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    try:
        return str(await lookup_async("A1"))
    except InjectedFault as error:
        return f"sorry: {error}"


@pytest.mark.parametrize("agent", [lookup_agent, async_agent], ids=["sync", "async"])
async def test_tool_error_fault_raises_into_the_agent_and_is_recorded(agent: Any) -> None:
    ran.clear()
    name = "lookup" if agent is lookup_agent else "lookup_async"
    faults = (ToolFault(tool=name, error="boom"),)
    session = await AgentSession.open(agent, SessionInfo("s", faults=faults))
    run = await session.send("where is A1?")
    assert run.reply == "sorry: boom" and ran == []
    (execution,) = run.steps[0].tool_executions
    assert (execution.injected, execution.has_error, execution.error) == (True, True, "boom")
    assert run.steps[0].errors[0].type == "evalport.protocol.runtime._faults.InjectedFault"
    wire = msgspec.json.decode(session.run_envelope)["run"]["steps"][0]["toolExecutions"][0]
    assert wire["injected"] is True


@pytest.mark.parametrize("agent", [lookup_agent, async_agent], ids=["sync", "async"])
async def test_tool_result_fault_skips_the_tool(agent: Any) -> None:
    ran.clear()
    name = "lookup" if agent is lookup_agent else "lookup_async"
    faults = (ToolFault(tool=name, result={"status": "lost in transit"}),)
    session = await AgentSession.open(agent, SessionInfo("s", faults=faults))
    run = await session.send("where is A1?")
    assert run.reply == "{'status': 'lost in transit'}" and ran == []
    (execution,) = run.steps[0].tool_executions
    assert execution.injected and not execution.has_error
    assert execution.result == {"status": "lost in transit"}


async def test_an_uncaught_injected_fault_fails_the_turn_like_a_tool_error() -> None:
    def careless(message: str, history: list[Any], ctx: TurnContext) -> str:
        return str(lookup("A1"))

    faults = (ToolFault(tool="lookup", error="order service timed out"),)
    session = await AgentSession.open(careless, SessionInfo("s", faults=faults))
    run = await session.send("hi")
    assert run.status == "failed"
    assert "InjectedFault: order service timed out" in run.errors


async def test_blocks_take_error_faults_and_refuse_result_faults() -> None:
    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        try:
            with ctx.tool_execution("search", {"q": message}) as call:
                call.result = ["hit"]
        except InjectedFault as error:
            return f"injected: {error}"
        except FaultNotApplicable as error:
            return f"not applicable: {error}"
        return "ran"

    faults = (
        ToolFault(tool="search", error="index offline", turns=[1]),
        ToolFault(tool="search", result=["canned"], turns=[2]),
    )
    session = await AgentSession.open(agent, SessionInfo("s", faults=faults))
    assert (await session.send("one")).reply == "injected: index offline"
    run = await session.send("two")
    assert run.reply.startswith("not applicable: a result fault cannot apply to tool 'search'")
    assert "@tool" in run.reply
    assert (await session.send("three")).reply == "ran"
    executions = [e for step in run.steps for e in step.tool_executions]
    assert [e.injected for e in executions] == [True, False]
    assert executions[1].has_error and "ctx.tool_execution()" in str(executions[1].error)


async def test_gated_tools_are_approved_first_then_faulted() -> None:
    @tool(approval=True)
    async def refund(order_id: str) -> str:
        ran.append(order_id)
        return "refunded"

    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        try:
            return await refund("A1")
        except InjectedFault as error:
            return f"failed: {error}"

    ran.clear()
    faults = (ToolFault(tool="refund", error="payments down"),)
    session = await AgentSession.open(agent, SessionInfo("s", faults=faults))
    run = await session.send("refund A1")
    assert run.status == "in_progress" and run.pending_approvals  # the approval comes first
    run = await session.decide({run.pending_approvals[0].call_id: "approve"})
    assert run.reply == "failed: payments down" and ran == []
    (execution,) = run.steps[0].tool_executions
    assert execution.approval is not None and execution.approval.state == "approved"
    assert execution.injected and execution.error == "payments down"


async def test_a_session_without_faults_records_nothing_injected() -> None:
    ran.clear()
    session = await AgentSession.open(lookup_agent, SessionInfo("s"))
    run = await session.send("hi")
    assert run.reply == "{'status': 'shipped'}" and ran == ["A1"]
    assert not run.steps[0].tool_executions[0].injected


def test_the_spec_and_the_decoder_agree_on_error_and_result() -> None:
    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi.yaml").read_text())
    schema = spec["components"]["schemas"]["ToolFault"]
    validator = jsonschema.Draft202012Validator(schema)
    for fault in (
        {"tool": "t"},
        {"tool": "t", "error": "e", "result": 1},
        {"tool": "t", "error": None, "result": 1},
        {"tool": "t", "error": "e"},
        {"tool": "t", "result": None},
    ):
        valid = validator.is_valid(fault)
        try:
            decode_request(json.dumps({"faults": [fault]}).encode(), CreateSessionRequest)
        except RequestError:
            accepted = False
        else:
            accepted = True
        assert valid == accepted, fault


# -- review fixes: times with calls side by side, fresh results, Python faults checked -------


async def test_times_holds_when_a_gated_call_reaches_the_plan_after_a_later_one() -> None:
    import asyncio

    from evalport.protocol.runtime import (
        AgentSession,
        SessionInfo,
        as_factory,
        session_factory,
        tool,
    )

    @tool(approval=lambda amount: amount > 100)
    async def pay(amount: int) -> str:
        return f"paid {amount}"

    class Agent:
        async def turn(self, message: str, ctx: Any) -> str:
            async def one(amount: int) -> str:
                try:
                    return await pay(amount)
                except Exception as error:
                    return f"ERR {error}"

            return "; ".join(await asyncio.gather(one(500), one(5)))

    faults = (ToolFault(tool="pay", error="bank down", times=1),)
    session = await AgentSession.from_factory(
        session_factory(as_factory(lambda info: Agent())),
        SessionInfo(session_id="s1", faults=faults),
    )
    run = await session.send("go")  # pay(500) waits for approval; pay(5) reaches the plan
    run = await session.decide({p.call_id: "approve" for p in run.pending_approvals})
    injected = [e.injected for step in run.steps for e in step.tool_executions]
    assert sorted(injected) == [False, True]  # once, as times=1 says
    assert run.reply == "paid 500; ERR bank down"
    await session.close()


async def test_each_injection_returns_a_fresh_copy_of_the_result() -> None:
    from evalport.protocol.runtime import (
        AgentSession,
        SessionInfo,
        as_factory,
        session_factory,
        tool,
    )

    @tool
    def lookup() -> list[str]:
        return []

    class Agent:
        async def turn(self, message: str, ctx: Any) -> str:
            found = lookup()
            found.append(message)  # the agent changes what the tool gave it
            return ",".join(found)

    faults = as_faults([ToolFault(tool="lookup", result=["canned"])])
    session = await AgentSession.from_factory(
        session_factory(as_factory(lambda info: Agent())),
        SessionInfo(session_id="s", faults=faults),
    )
    replies = [(await session.send(text)).reply for text in ("a", "b")]
    assert replies == ["canned,a", "canned,b"]
    assert faults[0].result == ["canned"]
    await session.close()


@pytest.mark.parametrize(
    ("fault", "where"),
    [
        (ToolFault(tool="t", error="x", seed=2**60), "$.seed"),
        (ToolFault(tool="t", error="x", times=2**40), "$.times"),
        (ToolFault(tool="t", result=object()), "unsupported"),
    ],
)
def test_faults_built_in_python_meet_the_wire_rules(fault: ToolFault, where: str) -> None:
    with pytest.raises(ValueError, match=r"faults\[0\]") as error:
        as_faults([fault])
    assert where in str(error.value)


def test_python_results_take_their_wire_types() -> None:
    import datetime

    (fault,) = as_faults([ToolFault(tool="t", result={"when": datetime.date(2026, 1, 1)})])
    assert fault.result == {"when": "2026-01-01"}  # as a server decodes it


@pytest.mark.parametrize(
    ("faults", "path"),
    [
        ([{"tool": "t", "error": "x"}] * 65, "$.faults"),
        ([{"tool": "t", "error": "x", "turns": list(range(1, 1002))}], "$.faults[0].turns"),
    ],
)
def test_fault_lists_are_bounded(faults: list[dict[str, Any]], path: str) -> None:
    body = json.dumps({"faults": faults}).encode()
    with pytest.raises(RequestError) as caught:
        decode_request(body, CreateSessionRequest)
    assert caught.value.status == 422 and caught.value.path == path


async def test_the_flat_tools_list_says_which_calls_were_injected() -> None:
    from evalport.protocol import encode
    from evalport.protocol.runtime import (
        AgentSession,
        SessionInfo,
        session_factory,
        tool,
    )

    @tool
    def lookup(order_id: str) -> str:
        return "shipped"

    async def agent(message: str, history: Any, ctx: Any) -> str:
        return f"{lookup('A1')} {lookup('A2')}"

    faults = (ToolFault(tool="lookup", result="lost", times=1),)
    session = await AgentSession.from_factory(
        session_factory(agent), SessionInfo(session_id="s", faults=faults)
    )
    run = await session.send("go")
    assert [(record.result, record.injected) for record in run.tools] == [
        ("lost", True),
        ("shipped", False),
    ]
    tools = json.loads(encode(run))["tools"]
    assert [entry.get("injected", False) for entry in tools] == [True, False]  # false left out
    await session.close()
