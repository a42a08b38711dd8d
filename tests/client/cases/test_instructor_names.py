"""Instructor's EvalContext names, in snake_case, and the expect() chain."""

from __future__ import annotations

import pytest
from evalport.client import EvalContext, Verdict, cases_from, eval_case, run_trial
from evalport.client.assertions import EventsSatisfy, NoFailedActions
from fake_target import FakeTarget, shop_agent


def case_of(func, **options):
    return cases_from(eval_case(**options)(func))[0]


@pytest.fixture
async def target():
    fake = FakeTarget(shop_agent)
    yield fake
    await fake.aclose()


def outcomes(result) -> list[tuple[str, bool]]:
    return [(a.label or a.name, a.passed) for a in result.assertions]


async def test_instructor_named_assertions(target) -> None:
    async def named(ctx: EvalContext) -> None:
        await ctx.send("hello")
        ctx.message_includes("Hello").label("message_includes")
        ctx.output_equals("Hello! How can I help?").label("output_equals")
        ctx.output_equals(lambda reply: reply.endswith("?")).label("output_equals matcher")
        ctx.output_matches(r"^Hello").label("output_matches")
        ctx.event("greeted", lambda e: e.turn == 1, count=1).label("event")
        ctx.not_event("refunded").label("not_event")
        await ctx.send("refund A1 40")
        ctx.tool_order("lookup", "refund").label("tool_order variadic")
        ctx.tool_order(["refund", "lookup"], "strict").label("tool_order strict")
        ctx.event_order("greeted").label("event_order")
        ctx.events_satisfy(lambda events: len(events) < 3).label("events_satisfy")
        ctx.check("custom", ctx.run.turns == 2, "two turns").label("check")

    result = await run_trial(case_of(named), target)
    assert outcomes(result) == [
        ("message_includes", True),
        ("output_equals", True),
        ("output_equals matcher", True),
        ("output_matches", True),
        ("event", True),
        ("not_event", True),
        ("tool_order variadic", True),
        ("tool_order strict", False),
        ("event_order", True),
        ("events_satisfy", True),
        ("check", True),
    ]
    with pytest.raises(TypeError):
        EvalContext.check(None, "name", "not a bool")  # type: ignore[arg-type]


async def test_expect_chain_tunes_the_latest_assertion(target) -> None:
    async def expecting(ctx: EvalContext) -> None:
        await ctx.send("hello")
        (
            ctx.expect(ctx.run.reply)
            .includes("help")
            .similarity("Hello, how can I help?")
            .at_least(0.8)
            .label("close enough")
        )
        ctx.expect(ctx.run.user_messages).includes("hello").equals(["hello"])
        ctx.expect({"a": 1, "b": 2}).equals({"b": 2.0, "a": 1}).satisfies(lambda v: len(v) == 2)
        ctx.expect(7).includes(7).soft()
        ctx.expect("abc").matches(r"b").similarity("xyz")

    result = await run_trial(case_of(expecting), target)
    names = [(a.label or a.name, a.passed, a.severity) for a in result.assertions]
    assert names[0] == ("includes('help')", True, "gate")
    assert names[1] == ("close enough", True, "soft")
    assert [n[1] for n in names[2:6]] == [True, True, True, True]
    assert names[6] == ("includes(7)", False, "soft")
    assert names[7][1] is True and names[8][1:] == (False, "soft")
    assert result.verdict == Verdict.SCORED


async def test_require_in_instructor_form_and_log_context(target) -> None:
    async def requiring(ctx: EvalContext) -> None:
        ctx.log("fixture", {"orders": 2})
        ctx.require("has fixture", True)
        ctx.require("target replied", False, "no reply")
        ctx.log("never")

    result = await run_trial(case_of(requiring), target)
    assert result.verdict == Verdict.FAILED
    assert [(a.name, a.passed, a.message) for a in result.assertions] == [
        ("has fixture", True, ""),
        ("target replied", False, "no reply"),
    ]
    assert result.logs == ['fixture {"orders": 2}']


async def test_no_failed_actions_counts_run_errors_like_instructor(target) -> None:
    async def crashing(ctx: EvalContext) -> None:
        await ctx.send("boom")
        ctx.no_failed_actions()

    result = await run_trial(case_of(crashing), target)
    (failed,) = result.assertions
    assert not failed.passed and failed.score == 0.0 and "errors" in failed.message


def test_events_satisfy_standalone() -> None:
    from evalport.protocol import AgentRun

    run = AgentRun(reply="ok", status="completed", turns=1)
    assert EventsSatisfy(lambda events: events == []).evaluate(run).passed
    assert NoFailedActions().evaluate(run).passed
