"""Criteria builders and how their parts reach the prompt."""

from __future__ import annotations

import pytest
from evalport.client.judges import Example, JudgeRequest, criteria, render_transcript
from evalport.client.judges._prompts import classifier_messages, verdict_messages
from evalport.protocol import AgentRun, PendingApproval, Step, ToolExecution

NONCE = "abcdefabcdefabcd"


@pytest.mark.parametrize(
    ("build", "label"),
    [
        (lambda: criteria.factuality("Paris is the capital."), "expert answer"),
        (lambda: criteria.summarizes("A long source."), "source text"),
        (lambda: criteria.sql("SELECT 1"), "reference query"),
        (lambda: criteria.faithfulness("Retrieved docs."), "context"),
        (lambda: criteria.correctness("42"), "expected answer"),
        (lambda: criteria.relevance("What time is it?"), "question"),
        (lambda: criteria.task_completion("Book a flight"), "user goal"),
    ],
)
def test_reference_reaches_the_prompt_fenced_with_its_label(build, label: str) -> None:
    criterion = build()
    assert criterion.reference_label == label
    request = JudgeRequest(criterion=criterion, output="out", transcript="USER: hi")
    content = verdict_messages(request, NONCE)[1]["content"]
    name = label.replace(" ", "_")
    assert f'<<<DATA-{NONCE} name="{name}">>>\n{criterion.reference}\n<<<END-{NONCE}>>>' in content
    assert criterion.instructions in content


@pytest.mark.parametrize(
    "build",
    [
        lambda: criteria.closed_qa(""),
        lambda: criteria.factuality("  "),
        lambda: criteria.summarizes(""),
        lambda: criteria.sql(""),
        lambda: criteria.faithfulness(""),
        lambda: criteria.correctness(""),
        lambda: criteria.task_completion(""),
        lambda: criteria.custom(""),
        lambda: criteria.classify("q", ["only one"]),
        lambda: criteria.custom("c", examples=[{"output": "x"}]),
        lambda: criteria.custom("c", examples=[{"output": "x", "score": 2}]),
    ],
)
def test_missing_material_is_a_coding_error(build) -> None:
    with pytest.raises(ValueError):
        build()


def test_relevance_without_question_uses_the_input() -> None:
    criterion = criteria.relevance()
    assert criterion.reference is None
    content = verdict_messages(JudgeRequest(criterion=criterion, output="4", input="2+2?"), NONCE)[
        1
    ]["content"]
    assert 'name="input">>>\n2+2?\n' in content


def test_few_shot_examples_are_fenced_and_scored() -> None:
    criterion = criteria.custom(
        "Is the answer polite?",
        examples=[
            Example(output="Get lost.", score=0.0, reason="rude"),
            {"output": "Happy to help!", "score": 1, "input": "Can you help?"},
        ],
    )
    content = verdict_messages(JudgeRequest(criterion=criterion, output="ok"), NONCE)[1]["content"]
    assert f'name="example_1_output">>>\nGet lost.\n<<<END-{NONCE}>>>' in content
    assert "Example 1 deserves a score of 0 (rude)." in content
    assert 'name="example_2_input">>>\nCan you help?\n' in content
    assert "Example 2 deserves a score of 1." in content


def test_classifier_prompt_lists_levels_in_order() -> None:
    criterion = criteria.classify("How complete?", ["none", "partial", "full"])
    content = classifier_messages(JudgeRequest(criterion=criterion, output="x"), NONCE)
    assert "0: none\n1: partial\n2: full" in content[1]["content"]
    assert "single digit from 0 to 2" in content[0]["content"]
    assert criteria.classify("Polite?").levels == ("no", "yes")


def test_trajectory_criteria_get_the_transcript_others_do_not() -> None:
    output_only = verdict_messages(
        JudgeRequest(criterion=criteria.helpfulness(), output="x", transcript="SECRET"), NONCE
    )
    assert "SECRET" not in output_only[1]["content"]
    judged = verdict_messages(
        JudgeRequest(
            criterion=criteria.custom("Was it safe?", trajectory=True), output="x", transcript="T"
        ),
        NONCE,
    )
    assert 'name="transcript">>>\nT\n' in judged[1]["content"]


def test_transcript_from_a_run_without_turn_objects() -> None:
    run = AgentRun(
        reply="Refund requested; awaiting approval.",
        user_messages=["refund 123", "please hurry"],
        turns=2,
        status="in_progress",
        errors="tool timeout",
        steps=[
            Step(turn=1, tool_executions=[ToolExecution(name="lookup", result={"ok": True})]),
            Step(
                turn=2,
                tool_executions=[
                    ToolExecution(name="charge", has_error=True, error="card declined")
                ],
            ),
        ],
        pending_approvals=[PendingApproval(call_id="c1", tool="refund", arguments={"id": 123})],
    )
    text = render_transcript(run)
    assert text.splitlines() == [
        "USER: refund 123",
        "TOOL CALL lookup({})",
        "  result: {ok: true}",
        "USER: please hurry",
        "TOOL CALL charge({})",
        "  error: card declined",
        "ASSISTANT: Refund requested; awaiting approval.",
        "PENDING APPROVAL refund({id: 123}) call c1",
        "RUN ERRORS: tool timeout",
        "RUN STATUS: in_progress",
    ]


def test_long_transcripts_are_cut_in_the_middle() -> None:
    run = AgentRun(
        reply="final", user_messages=[f"message {i} " + "x" * 50 for i in range(100)], turns=100
    )
    text = render_transcript(run, max_chars=900)
    assert text.startswith("USER: message 0 ") and text.endswith("RUN STATUS: pending")
    assert "characters omitted ...]" in text and len(text) < 1000
    long_value = render_transcript(
        AgentRun(steps=[Step(turn=1, tool_executions=[ToolExecution(name="t", result="y" * 5000)])])
    )
    assert "... [3000 more chars]" in long_value
