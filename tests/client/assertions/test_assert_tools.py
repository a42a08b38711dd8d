"""Tool assertions on hand-built runs, verbatim and redacted by TracePolicy.safe()."""

from __future__ import annotations

import pytest
from evalport.client.assertions import (
    AssertionTypeError,
    CalledTool,
    Exact,
    MaxToolCalls,
    NoFailedActions,
    NotCalledTool,
    ToolOrder,
    ToolOrderMode,
    UsedNoTools,
    any_value,
    at_least,
    at_most,
    between,
    one_of,
)
from evalport.protocol import is_digest
from runbuild import both, call, make_run, redacted

RUN = make_run(
    [
        call("lookup_order", {"order_id": "A1049"}, {"status": "delivered", "total": 40}),
        call("refund", {"order_id": "A1049", "amount": 40}, "refunded"),
        call("lookup_order", {"order_id": "B7"}, error="not found"),
        call("notify", {"channel": "email"}, "sent"),
    ]
)
RUNS = both(RUN)
IDS = ["verbatim", "redacted"]


def test_the_redacted_run_really_is_redacted() -> None:
    run = redacted(RUN)
    args = run.tools[0].tool_call.arguments
    assert isinstance(args, dict) and is_digest(args["order_id"])
    assert is_digest(run.tools[0].result)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_called_tool_by_name_and_count(run) -> None:
    assert CalledTool("lookup_order").evaluate(run).passed
    assert CalledTool("lookup_order", count=2).evaluate(run).passed
    assert CalledTool("lookup_order", count=at_least(2)).evaluate(run).passed
    assert CalledTool("lookup_order", count=at_most(1)).evaluate(run).passed is False
    assert CalledTool("lookup_order", count=between(1, 3)).evaluate(run).passed
    never = CalledTool("delete_account").evaluate(run)
    assert not never.passed and never.evaluated and "never called" in never.message


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_argument_subset_and_exact_match_by_digest(run) -> None:
    assert CalledTool("refund", {"order_id": "A1049"}).evaluate(run).passed
    assert CalledTool("refund", Exact({"order_id": "A1049", "amount": 40})).evaluate(run).passed
    assert not CalledTool("refund", Exact({"order_id": "A1049"})).evaluate(run).passed
    wrong = CalledTool("refund", {"order_id": "A1050"}).evaluate(run)
    assert not wrong.passed and wrong.evaluated
    assert "1 time(s), 0 matching" in wrong.message
    assert not CalledTool("refund", {"missing_key": 1}).evaluate(run).passed
    assert CalledTool("lookup_order", {"order_id": "B7"}, count=1).evaluate(run).passed


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_per_argument_matchers_that_work_on_digests(run) -> None:
    assert CalledTool("refund", {"order_id": any_value()}).evaluate(run).passed
    assert CalledTool("lookup_order", {"order_id": one_of("B7", "C9")}).evaluate(run).passed
    assert not CalledTool("refund", {"order_id": one_of("B7", "C9")}).evaluate(run).passed


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_result_and_error_matchers(run) -> None:
    assert CalledTool("refund", result="refunded").evaluate(run).passed
    assert not CalledTool("refund", result="declined").evaluate(run).passed
    assert CalledTool("lookup_order", is_error=True, count=1).evaluate(run).passed
    assert CalledTool("lookup_order", {"order_id": "A1049"}, is_error=False).evaluate(run).passed
    assert not CalledTool("notify", is_error=True).evaluate(run).passed


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_results_compare_whole_values(run) -> None:
    expected = {"status": "delivered", "total": 40}
    assert CalledTool("lookup_order", result=expected).evaluate(run).passed
    assert not CalledTool("lookup_order", result={"status": "delivered"}).evaluate(run).passed


def test_subset_of_a_result_needs_it_verbatim() -> None:
    from evalport.client.assertions import Subset

    partial = CalledTool("lookup_order", result=Subset({"status": "delivered"}))
    assert partial.evaluate(RUN).passed
    assert not partial.evaluate(redacted(RUN)).evaluated


def test_callable_predicates_on_verbatim_runs() -> None:
    assert CalledTool("refund", lambda a: a["amount"] <= 100).evaluate(RUN).passed
    assert not CalledTool("refund", lambda a: a["amount"] > 100).evaluate(RUN).passed
    assert CalledTool("refund", {"amount": lambda v: v == 40}).evaluate(RUN).passed
    assert CalledTool("lookup_order", result=lambda r: r["total"] == 40).evaluate(RUN).passed


def test_callable_predicates_on_redacted_runs_say_they_need_verbatim_data() -> None:
    run = redacted(RUN)
    result = CalledTool("refund", lambda a: a["amount"] <= 100).evaluate(run)
    assert not result.passed and not result.evaluated
    assert "verbatim" in result.message and "TracePolicy.verbatim()" in result.message
    per_arg = CalledTool("refund", {"amount": lambda v: v < 50}).evaluate(run)
    assert not per_arg.evaluated
    # a clear mismatch on a readable key settles it without reading the digest
    settled = CalledTool("refund", {"order_id": "ZZZ", "amount": lambda v: v < 50}).evaluate(run)
    assert settled.evaluated and not settled.passed


def test_allow_listed_arguments_stay_usable_for_predicates() -> None:
    from evalport.protocol import TracePolicy

    policy = TracePolicy.safe(allow_argument_keys=["amount"])
    run = policy.apply(RUN)
    assert CalledTool("refund", {"amount": lambda v: v <= 100}).evaluate(run).passed


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_not_called_tool(run) -> None:
    assert NotCalledTool("delete_account").evaluate(run).passed
    failed = NotCalledTool("refund").evaluate(run)
    assert not failed.passed and "called 1 time(s)" in failed.message
    assert NotCalledTool("refund", {"order_id": "B7"}).evaluate(run).passed
    assert not NotCalledTool("refund", {"order_id": "A1049"}).evaluate(run).passed


def test_not_called_tool_with_a_predicate_on_redacted_data_is_not_evaluable() -> None:
    result = NotCalledTool("refund", lambda a: a["amount"] > 100).evaluate(redacted(RUN))
    assert not result.evaluated and not result.passed


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_used_no_tools_and_max_tool_calls(run) -> None:
    assert not UsedNoTools().evaluate(run).passed
    assert UsedNoTools().evaluate(make_run([])).passed
    assert MaxToolCalls(4).evaluate(run).passed
    over = MaxToolCalls(2).evaluate(run)
    assert not over.passed and over.score == 0.5
    assert MaxToolCalls(2).evaluate(run).passed is False
    assert MaxToolCalls(1, "refund").evaluate(run).passed


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_no_failed_actions(run) -> None:
    result = NoFailedActions().evaluate(run)
    assert not result.passed and result.score == 0.75
    assert result.context["failed"] == ["lookup_order"]
    assert NoFailedActions().evaluate(make_run([call("a"), call("b")])).passed


ORDER_RUN = make_run([call("search"), call("lookup"), call("log"), call("refund")])


@pytest.mark.parametrize(
    ("mode", "expected", "score"),
    [
        ("strict", ["search", "lookup", "log", "refund"], 1.0),
        ("strict", ["search", "lookup", "refund"], 0.75),
        ("unordered", ["refund", "log", "lookup", "search"], 1.0),
        ("unordered", ["refund", "search"], 0.5),
        ("subset", ["search", "refund"], 1.0),
        ("subset", ["refund", "search"], 0.5),
        ("subset", ["search", "cancel"], 0.5),
        ("superset", ["search", "lookup", "log", "refund", "cancel"], 1.0),
        ("superset", ["search", "refund"], 0.5),
    ],
)
def test_tool_order_modes_and_partial_credit(mode: str, expected: list[str], score: float) -> None:
    for run in both(ORDER_RUN):
        result = ToolOrder(expected, mode).evaluate(run)
        assert result.score == pytest.approx(score)
        assert result.passed is (score == 1.0)
        if score < 1.0:
            assert ToolOrderMode.MEANING[mode] in result.message


def test_tool_order_mode_names_cannot_be_read_backwards() -> None:
    # subset: the EXPECTED list is a subset of the actual calls (extras allowed)
    assert ToolOrder(["search"], ToolOrderMode.EXPECTED_IN_ORDER).evaluate(ORDER_RUN).passed
    # superset: the expected list is a superset of the actual calls (an allow-list)
    assert not ToolOrder(["search"], ToolOrderMode.ONLY_FROM_EXPECTED).evaluate(ORDER_RUN).passed
    assert ToolOrderMode.SUBSET == "subset" and ToolOrderMode.SUPERSET == "superset"
    with pytest.raises(ValueError, match="expected ⊆ actual"):
        ToolOrder(["a"], "contains")
    with pytest.raises(TypeError):
        ToolOrder("search")


def test_tool_order_on_empty_runs() -> None:
    empty = make_run([])
    assert ToolOrder([], "strict").evaluate(empty).passed
    assert ToolOrder(["a"], "superset").evaluate(empty).passed
    assert ToolOrder(["a"], "subset").evaluate(empty).score == 0.0


def test_partial_credit_can_pass_with_at_least_through_a_handle() -> None:
    from evalport.client import AssertionHandle

    handle = AssertionHandle(ToolOrder(["search", "cancel"], "subset").evaluate(ORDER_RUN))
    assert not handle.passed
    assert handle.at_least(0.5).passed


def test_tool_assertions_refuse_text_subjects() -> None:
    with pytest.raises(AssertionTypeError, match="called_tool evaluates an AgentRun"):
        CalledTool("x").evaluate("a reply")
    with pytest.raises(TypeError):
        CalledTool("x", count="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        between(3, 1)


def test_names_describe_the_assertion() -> None:
    assert CalledTool("refund", {"order_id": "A1"}, count=2).name == (
        'called_tool(refund, args ⊆ {order_id="A1"}, exactly 2)'
    )
    assert ToolOrder(["a", "b"], "strict").name == "tool_order(strict: a > b)"
