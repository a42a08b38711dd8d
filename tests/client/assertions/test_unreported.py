"""A run that does not carry something (an A2A run has no tool calls) makes every
assertion that reads it not evaluable, with the reason; nothing passes or fails silently."""

from __future__ import annotations

import pytest
from evalport.client import assertions as a
from evalport.protocol import UNREPORTABLE, AgentRun, RunStatus

WHY = "A2A agents do not report their tool calls"

READERS = {
    "tools": [
        a.CalledTool("refund"),
        a.NotCalledTool("refund"),
        a.UsedNoTools(),
        a.MaxToolCalls(3),
        a.NoFailedActions(),
        a.ToolOrder(["lookup", "refund"]),
        a.ToolWasApproved("refund"),
        a.ToolWasInjected("refund"),
        a.FirstToolCallWithin(1.0),
    ],
    "steps": [a.StepCount(1), a.MaxSteps(3)],
    "usage": [a.TotalTokensAtMost(100), a.TokensAtMost("input", 10)],
    "events": [
        a.EventSeen("escalated"),
        a.EventNotSeen("escalated"),
        a.EventsInOrder(["a", "b"]),
        a.EventsSatisfy(lambda events: True),
    ],
}


def _run(**unreported: str) -> AgentRun:
    run = AgentRun(reply="done", status=RunStatus.COMPLETED, turns=1)
    if unreported:
        run.unreported = unreported
    return run


def test_every_kind_of_unreported_data_has_readers() -> None:
    assert set(READERS) == set(UNREPORTABLE)


@pytest.mark.parametrize(
    ("what", "assertion"), [(what, item) for what, items in READERS.items() for item in items]
)
def test_an_assertion_reading_what_the_run_lacks_is_not_evaluable(
    what: str, assertion: a.Assertion
) -> None:
    result = assertion.evaluate(_run(**{what: WHY}))
    assert (result.evaluated, result.passed) == (False, False)
    assert WHY in result.message and assertion.kind in result.message


@pytest.mark.parametrize(
    "assertion", [item for items in READERS.values() for item in items], ids=repr
)
def test_a_run_that_lacks_something_else_is_evaluated(assertion: a.Assertion) -> None:
    others = {what: WHY for what in UNREPORTABLE if what != assertion.needs}
    assert assertion.evaluate(_run(**others)).evaluated


def test_text_and_outcome_assertions_read_what_every_protocol_carries() -> None:
    run = _run(**dict.fromkeys(UNREPORTABLE, WHY))
    assert a.Contains("done").evaluate(run).passed
    assert a.Succeeded().evaluate(run).passed


def test_the_reason_travels_with_the_run_on_the_wire() -> None:
    from evalport.protocol import decode_run, encode

    assert b"unreported" not in encode(_run())  # absent when the run carries everything
    again = decode_run(encode(_run(tools=WHY)))
    assert again.not_reported("tools") == WHY and again.not_reported("usage") == ""
