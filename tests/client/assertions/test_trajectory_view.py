"""The trajectory view: merged tool calls, final answer, usage, transcript."""

from __future__ import annotations

from evalport.client import Trajectory
from evalport.protocol import AgentRun, Message, Step, Usage
from runbuild import call, make_run, redacted

RUN = make_run(
    [
        call("lookup", {"order_id": "A1"}, {"status": "late"}),
        call(
            "refund",
            {"order_id": "A1"},
            None,
            error="rejected",
            approval="rejected",
            reason="too big",
            turn=2,
        ),
    ],
    reply="I could not refund it.",
    user_messages=["Where is A1?", "Refund it"],
    pending=[("call_x", "escalate", {"level": 2})],
)


def test_tool_calls_merge_results_errors_and_approvals() -> None:
    view = Trajectory(RUN)
    lookup, refund, escalate = view.tool_calls()
    assert lookup.result == {"status": "late"} and not lookup.is_error and lookup.approval is None
    assert refund.is_error and refund.approval == "rejected" and refund.approval_reason == "too big"
    assert refund.turn == 2 and refund.call_id == "call_1"
    assert escalate.approval == "pending" and not escalate.executed
    assert view.tool_calls("refund") == [refund]
    assert view.last_tool_call("lookup") is lookup
    assert view.last_tool_call() is escalate
    assert view.tool_names() == ["lookup", "refund"]
    assert refund.inputs == {"order_id": "A1"}


def test_final_answer_user_messages_usage() -> None:
    view = Trajectory(RUN)
    assert view.final_answer == "I could not refund it."
    assert view.user_messages == ["Where is A1?", "Refund it"]
    assert view.usage == Usage(input=300, output=60)
    no_reply = AgentRun(
        steps=[Step(output_messages=[Message(role="assistant", content="from steps")])]
    )
    assert Trajectory(no_reply).final_answer == "from steps"


def test_transcript_reads_like_a_conversation() -> None:
    text = Trajectory(RUN).transcript()
    lines = text.splitlines()
    assert lines[0] == "User: Where is A1?"
    assert 'Tool call: lookup({"order_id":"A1"}) -> {"status":"late"}' in lines
    assert "User: Refund it" in lines
    assert any("refund" in line and "[approval rejected: too big]" in line for line in lines)
    assert lines[-1] == "Assistant: I could not refund it."


def test_transcript_of_a_redacted_run_shows_digests_not_payloads() -> None:
    text = Trajectory(redacted(RUN)).transcript()
    assert "sha256:" in text and '"late"' not in text


def test_of_memoises_per_run_state() -> None:
    run = make_run([call("a")])
    first = Trajectory.of(run)
    assert Trajectory.of(run) is first
    run.steps[0].tool_executions[0].name = "b"
    run.steps.append(run.steps[-1])
    run.sync_tools()
    again = Trajectory.of(run)
    assert again is not first and again.tool_names() == ["b"]


def test_messages_interleave_user_turns_and_step_output() -> None:
    from evalport.protocol import Message

    messages = Trajectory(RUN).messages()
    assert messages[0] == Message(role="user", content="Where is A1?")
    assert [m.role for m in messages].count("user") == 2
    assert messages[-1].content == "I could not refund it."
    assert Trajectory(RUN).to_transcript() == Trajectory(RUN).transcript()


def test_neuron_aliases_port_an_evaluate_method() -> None:
    from evalport.client.assertions.neuron import (
        Mode,
        StringContains,
        ToolWasCalled,
        ToolWasRejected,
        TrajectoryMatches,
    )

    view = Trajectory(RUN)
    assert TrajectoryMatches(["lookup", "refund"], Mode.Subset).evaluate(view).passed
    assert not TrajectoryMatches(["refund", "lookup"], Mode.Strict).evaluate(view).passed
    assert ToolWasCalled("lookup", {"order_id": "A1"}).evaluate(view).passed
    assert ToolWasRejected("refund").evaluate(view).passed
    assert StringContains("refund").evaluate(view.final_answer).passed
