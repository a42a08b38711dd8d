"""TracePolicy: what safe() digests, what stays clear, allow-lists, verbatim, idempotence."""

from __future__ import annotations

import copy

import msgspec
import pytest
from evalport.protocol import (
    AgentRun,
    ErrorInfo,
    Message,
    PendingApproval,
    Step,
    ToolCall,
    ToolExecution,
    TracePolicy,
    decode_run,
    digest,
    encode,
    is_digest,
    matches_digest,
)
from evalport.protocol._policy import digest_text, matches_digest_text

SECRET = "SECRET-4111111111111111"


def make_run() -> AgentRun:
    call = ToolCall(id="c1", name="refund", arguments={"order_id": "A1", "card": SECRET})
    step = Step(
        id="00000000-0000-0000-0000-000000000001",
        turn=1,
        index=0,
        type="tool_execution",
        output_messages=[
            Message(role="assistant", content="checking", tool_calls=[call]),
            Message(role="tool", content={"ok": True, "card": SECRET}, tool_call_id="c1"),
            Message(
                role="assistant",
                content=[
                    {"type": "text", "text": "plain"},
                    {"type": "tool_use", "id": "c1", "name": "refund", "input": {"card": SECRET}},
                    {"type": "tool_result", "tool_use_id": "c1", "content": SECRET},
                ],
            ),
        ],
        requested_tool_calls=[call],
        tool_executions=[
            ToolExecution(
                id="00000000-0000-0000-0000-00000000000a",
                name="refund",
                tool_call_id="c1",
                arguments={"order_id": "A1", "card": SECRET},
                has_error=True,
                error=f"card {SECRET} declined",
                result={"card": SECRET},
            ),
            ToolExecution(
                id="00000000-0000-0000-0000-00000000000b",
                name="lookup",
                tool_call_id="c2",
                arguments={"order_id": "A1"},
                result="found A1049",
            ),
        ],
        errors=[ErrorInfo(message=f"tool failed for {SECRET}", error_class="ToolError")],
        has_errors=True,
    )
    run = AgentRun(
        reply="done",
        status="failed",
        turns=1,
        errors=f"first {SECRET}\nsecond",
        steps=[step],
        pending_approvals=[
            PendingApproval(call_id="c3", tool="refund", arguments={"card": SECRET})
        ],
        error_details=[ErrorInfo(message=SECRET)],
        user_messages=["refund A1"],
    )
    run.sync_tools()
    return run


def test_safe_leaves_no_payload_in_clear_and_keeps_structure() -> None:
    run = make_run()
    redacted = TracePolicy.safe().apply(run)
    assert SECRET not in encode(redacted).decode()
    step = redacted.steps[0]
    execution = step.tool_executions[0]
    assert execution.name == "refund" and execution.has_error is True
    assert list(execution.arguments) == ["order_id", "card"]
    assert is_digest(execution.arguments["order_id"]) and is_digest(execution.result)
    assert is_digest(execution.error)
    assert (redacted.reply, redacted.status, redacted.turns) == ("done", "failed", 1)
    assert redacted.user_messages == ["refund A1"]
    assert step.output_messages[0].content == "checking"
    assert step.output_messages[2].content[0] == {"type": "text", "text": "plain"}
    assert redacted.tools[1].tool_call.name == "lookup"
    assert redacted.errors.count("\n") == 1


def test_apply_never_modifies_its_input() -> None:
    run = make_run()
    before = encode(run)
    TracePolicy.safe().apply(run)
    assert encode(run) == before


def test_in_place_gives_the_same_result() -> None:
    policy = TracePolicy.safe()
    assert encode(policy.apply(make_run(), in_place=True)) == encode(policy.apply(make_run()))


def test_argument_checks_work_on_redacted_runs() -> None:
    redacted = TracePolicy.safe().apply(make_run())
    arguments = redacted.tools[0].tool_call.arguments
    assert matches_digest("A1", arguments["order_id"])
    assert not matches_digest("A2", arguments["order_id"])
    assert matches_digest(SECRET, arguments["card"])
    assert matches_digest({"card": SECRET}, redacted.tools[0].result)
    assert matches_digest_text(f"first {SECRET}", redacted.errors.split("\n")[0])
    assert matches_digest_text("second", redacted.errors.split("\n")[1])
    assert not matches_digest_text("other", redacted.errors.split("\n")[1])


def test_digests_match_instructor_vectors() -> None:
    assert digest({"id": "A1049"})["hash"] == (
        "sha256:eeed0884e001b29968b8aaafb5df5b7a62d20169acde3325d7cf204812e1098c"
    )
    found = digest("found A1049")
    assert found["bytes"] == 13
    assert found["hash"] == (
        "sha256:cca20afd098f7d7d93bae2191aa3f7d3d5fdc10050928bd2aab4f9b8ce67e252"
    )
    assert digest({"card": SECRET})["preview"] == '{"card":"<string:23>"}'
    nested = {"user": {"id": 7, "ssn": "123-45-6789"}, "rows": [1, 2, 3]}
    assert digest(nested)["preview"] == (
        '{"user":{"id":"<int>","ssn":"<string:11>"},"rows":"<array:3>"}'
    )


def test_redaction_is_idempotent_and_passes_server_digests_through() -> None:
    policy = TracePolicy.safe()
    once = policy.apply(make_run())
    assert encode(policy.apply(once)) == encode(once)
    # A server that digested whole argument maps (as Instructor does) keeps its digests.
    whole = digest({"order_id": "A1"})
    run = AgentRun(
        steps=[Step(tool_executions=[ToolExecution(name="lookup", arguments=whole, result=whole)])]
    )
    run.sync_tools()
    redacted = policy.apply(run)
    assert redacted.steps[0].tool_executions[0].arguments == whole
    assert redacted.tools[0].tool_call.arguments == whole
    assert redacted.tools[0].result == whole


def test_allow_lists_by_tool_and_argument_key() -> None:
    policy = TracePolicy.safe(allow_tools=["lookup"], allow_argument_keys=["order_id"])
    redacted = policy.apply(make_run())
    lookup = redacted.steps[0].tool_executions[1]
    assert lookup.arguments == {"order_id": "A1"} and lookup.result == "found A1049"
    refund = redacted.steps[0].tool_executions[0]
    assert refund.arguments["order_id"] == "A1"
    assert is_digest(refund.arguments["card"])
    assert SECRET not in encode(redacted).decode()
    widened = TracePolicy.safe().allowing(tools=["refund"], argument_keys=["card"])
    assert widened.allowed_tools == frozenset({"refund"})
    kept = widened.apply(make_run()).steps[0]
    assert kept.tool_executions[0].result == {"card": SECRET}
    assert kept.output_messages[1].content == {"ok": True, "card": SECRET}


def test_verbatim_is_explicit_and_returns_the_run_untouched() -> None:
    run = make_run()
    assert TracePolicy.verbatim().apply(run) is run
    assert TracePolicy().verbatim_payloads is False
    assert TracePolicy.verbatim().describe() == "verbatim"
    assert TracePolicy.safe(allow_tools=["b", "a"]).describe() == "safe(tools=a,b)"


def test_preview_size_is_configurable() -> None:
    redacted = TracePolicy.safe(preview_bytes=5).apply(make_run())
    assert redacted.tools[0].result["preview"] == '{"car'
    with pytest.raises(ValueError, match="preview_bytes"):
        TracePolicy.safe(preview_bytes=-1)


def test_none_and_empty_errors_stay_as_they_are() -> None:
    run = AgentRun(steps=[Step(tool_executions=[ToolExecution(name="t", error=None)])])
    run.sync_tools()
    redacted = TracePolicy.safe().apply(run)
    assert redacted.steps[0].tool_executions[0].error is None
    assert redacted.steps[0].tool_executions[0].result is None
    assert redacted.errors == ""


def test_string_arguments_nobody_parsed_are_digested_whole() -> None:
    run = AgentRun(steps=[Step(requested_tool_calls=[ToolCall(name="t", arguments='{"a":1}')])])
    call = TracePolicy.safe().apply(run).steps[0].requested_tool_calls[0]
    assert matches_digest('{"a":1}', call.arguments)


def test_digest_text_keeps_a_digest_line() -> None:
    line = digest_text("boom")
    assert digest_text(line) == line
    assert msgspec.json.decode(line)["hash"].startswith("sha256:")


def test_decoded_wire_run_redacts_like_a_struct_run() -> None:
    run = make_run()
    policy = TracePolicy.safe()
    assert encode(policy.apply(decode_run(encode({"run": run})))) == encode(
        policy.apply(copy.deepcopy(run))
    )
