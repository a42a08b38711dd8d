"""Event and approval assertions."""

from __future__ import annotations

import pytest
from evalport.client.assertions import (
    EventNotSeen,
    EventSeen,
    EventsInOrder,
    ToolWasApproved,
    ToolWasRejected,
    at_least,
)
from evalport.protocol import AgentRun
from runbuild import both, call, make_run, redacted

EVENTS = make_run(
    events=["started", ("lookup", {"order": "A1"}), ("lookup", {"order": "B2"}), "escalated"]
)


@pytest.mark.parametrize("run", both(EVENTS), ids=["verbatim", "redacted"])
def test_event_seen_and_not_seen(run: AgentRun) -> None:
    assert EventSeen("started").evaluate(run).passed
    assert EventSeen("lookup", count=2).evaluate(run).passed
    assert EventSeen("lookup", count=at_least(3)).evaluate(run).passed is False
    assert EventSeen("lookup", data={"order": "B2"}).evaluate(run).passed
    assert not EventSeen("lookup", data={"order": "C3"}).evaluate(run).passed
    assert EventSeen("lookup", data=lambda d: d["order"].startswith("A")).evaluate(run).passed
    missing = EventSeen("refunded").evaluate(run)
    assert not missing.passed and "seen 0 time(s)" in missing.message
    assert EventNotSeen("refunded").evaluate(run).passed
    assert not EventNotSeen("escalated").evaluate(run).passed


def test_event_data_digested_whole_matches_by_hash_but_not_by_predicate() -> None:
    from evalport.client.assertions import Exact
    from evalport.protocol import digest

    run = make_run(events=[("lookup", digest({"order": "A1"}))])
    assert EventSeen("lookup", data={"order": "A1"}).evaluate(run).passed  # the same map
    assert EventSeen("lookup", data=Exact({"order": "A1"})).evaluate(run).passed
    assert not EventSeen("lookup", data=Exact({"order": "B2"})).evaluate(run).passed
    unknown = EventSeen("lookup", data={"order": "B2"}).evaluate(run)  # a part of it? unknowable
    assert not unknown.evaluated and "verbatim" in unknown.message
    assert not EventSeen("lookup", data=lambda d: True).evaluate(run).evaluated


def test_events_in_order_with_partial_credit() -> None:
    assert EventsInOrder(["started", "escalated"]).evaluate(EVENTS).passed
    result = EventsInOrder(["escalated", "started"]).evaluate(EVENTS)
    assert not result.passed and result.score == 0.5
    assert EventsInOrder([]).evaluate(EVENTS).passed


APPROVALS = make_run(
    [
        call("refund", {"order_id": "A1", "amount": 40}, "ok", approval="approved"),
        call(
            "refund",
            {"order_id": "B2", "amount": 400},
            None,
            error="rejected",
            approval="rejected",
            reason="above the limit",
        ),
        call("lookup", {"order_id": "A1"}, "found"),
    ]
)


@pytest.mark.parametrize("run", both(APPROVALS), ids=["verbatim", "redacted"])
def test_tool_was_approved_and_rejected(run: AgentRun) -> None:
    assert ToolWasApproved("refund").evaluate(run).passed
    assert ToolWasRejected("refund").evaluate(run).passed
    rejected = ToolWasRejected("refund", {"order_id": "B2"}).evaluate(run)
    assert rejected.passed and rejected.context["reason"] == "above the limit"
    assert not ToolWasRejected("refund", {"order_id": "A1"}).evaluate(run).passed
    ungated = ToolWasApproved("lookup").evaluate(run)
    assert not ungated.passed and "not gated" in ungated.message
    assert "never called" in ToolWasApproved("delete").evaluate(run).message


def test_approval_predicates_need_verbatim_data() -> None:
    check = ToolWasRejected("refund", lambda a: a["amount"] > 100)
    assert check.evaluate(APPROVALS).passed
    result = check.evaluate(redacted(APPROVALS))
    assert not result.evaluated and "verbatim" in result.message


def test_pending_approvals_count_as_calls_without_a_decision() -> None:
    from evalport.client.assertions import CalledTool

    run = make_run(pending=[("call_9", "refund", {"order_id": "Z9"})])
    assert CalledTool("refund", {"order_id": "Z9"}).evaluate(run).passed
    result = ToolWasApproved("refund").evaluate(run)
    assert not result.passed and "pending" in result.message
