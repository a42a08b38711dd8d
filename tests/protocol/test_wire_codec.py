"""The codec: strict request decoding (server side), lenient response decoding (client side).

Bad input never escapes as a bare ``KeyError``/``TypeError``: a request becomes a
:class:`RequestError` (400 malformed JSON, 422 invalid body) naming the JSON path; a
response becomes a :class:`ProtocolError` naming the field and quoting the body.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from evalport.protocol import (
    AgentRun,
    ApprovalsRequest,
    CreateSessionRequest,
    CreateSessionResponse,
    Health,
    ProblemType,
    ProtocolError,
    RequestError,
    Step,
    ToolExecution,
    TurnRequest,
    Usage,
    decode_request,
    decode_response,
    decode_run,
    encode,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# ---------------------------------------------------------------- requests (strict)


@pytest.mark.parametrize(
    ("kind", "body", "path"),
    [
        (TurnRequest, b"{}", "$"),  # a message, or parts
        (TurnRequest, b'{"message": 3}', "$.message"),
        (TurnRequest, b'{"message": "hi", "extra": 1}', "$.extra"),
        (TurnRequest, b"[]", "$"),
        (TurnRequest, b'"hello"', "$"),
        (CreateSessionRequest, b'{"caseId": 7}', "$.caseId"),
        (CreateSessionRequest, b'{"case_id": "snake"}', "$.case_id"),
        (CreateSessionRequest, b'{"metadata": []}', "$.metadata"),
        (ApprovalsRequest, b'{"decisions": []}', "$.decisions"),
        (ApprovalsRequest, b'{"decisions": {"c1": {}}}', '$.decisions["c1"].decision'),
        (
            ApprovalsRequest,
            b'{"decisions": {"c1": {"decision": "approve"}, "c2": {"decision": "maybe"}}}',
            '$.decisions["c2"].decision',
        ),
        (
            ApprovalsRequest,
            b'{"decisions": {"c1": {"decision": "approve", "why": "x"}}}',
            '$.decisions["c1"].why',
        ),
        (ApprovalsRequest, b'{"decisions": {"a\\"b": 5}}', '$.decisions["a\\"b"]'),
    ],
)
def test_invalid_request_is_422_naming_the_path(kind: type, body: bytes, path: str) -> None:
    with pytest.raises(RequestError) as caught:
        decode_request(body, kind)
    error = caught.value
    assert error.problem_type == ProblemType.INVALID_BODY
    assert error.status == 422
    assert error.path == path
    assert error.path in error.detail


@pytest.mark.parametrize("body", [b"", b"{", b'{"message": "hi"', b"nope", b'{"message":"\xff"}'])
def test_malformed_request_is_400(body: bytes) -> None:
    with pytest.raises(RequestError) as caught:
        decode_request(body, TurnRequest)
    assert caught.value.problem_type == ProblemType.MALFORMED_JSON
    assert caught.value.status == 400


def test_valid_requests() -> None:
    assert decode_request(b'{"message":"hi"}', TurnRequest) == TurnRequest(message="hi")
    instructor = decode_request(b'{"caseId":null,"description":null}', CreateSessionRequest)
    assert instructor == CreateSessionRequest()
    assert decode_request(b"{}", CreateSessionRequest) == CreateSessionRequest()
    approvals = decode_request(
        b'{"decisions":{"c1":{"decision":"reject","reason":"too much"}}}', ApprovalsRequest
    )
    assert approvals.decisions["c1"].decision == "reject"
    assert approvals.decisions["c1"].reason == "too much"


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=80) | st.text(max_size=60).map(str.encode))
def test_request_garbage_only_ever_raises_request_error(body: bytes) -> None:
    for kind in (TurnRequest, CreateSessionRequest, ApprovalsRequest):
        try:
            decode_request(body, kind)
        except RequestError as error:
            assert error.status in (400, 422)


class _Scores(msgspec.Struct, forbid_unknown_fields=True):
    scores: dict[str, int]
    nested: dict[str, dict[str, int]] | None = None


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (b'{"scores": {"a": 1, "b": "two"}}', '$.scores["b"]'),
        (b'{"scores": {}, "nested": {"x": {"y": "z"}}}', "$.nested[...][...]"),
    ],
)
def test_map_keys_named_when_their_value_type_is_known(body: bytes, path: str) -> None:
    with pytest.raises(RequestError) as caught:
        decode_request(body, _Scores)
    assert caught.value.path == path


# ---------------------------------------------------------------- responses (lenient)

MINIMAL = b'{"run":{"reply":"verify first","status":"completed","turns":1,"tools":[],"errors":""}}'


def test_instructor_minimal_reply_decodes() -> None:
    run = decode_run(MINIMAL)
    assert (run.reply, run.status, run.turns, run.tools, run.errors) == (
        "verify first",
        "completed",
        1,
        [],
        "",
    )


def test_bare_run_and_envelope_decode_alike() -> None:
    bare = json.loads(MINIMAL)["run"]
    assert decode_run(json.dumps(bare).encode()) == decode_run(MINIMAL)


def test_unknown_fields_ignored_and_unknown_enums_kept() -> None:
    body = {
        "run": {
            "reply": "ok",
            "status": "thinking_hard",
            "futureField": {"a": 1},
            "steps": [{"type": "reflection", "finishReason": "tool_use", "novel": True}],
            "stopSignal": {"reason": "budget_exhausted", "extra": 1},
        },
        "serverInfo": "v9",
    }
    run = decode_run(json.dumps(body).encode())
    assert run.status == "thinking_hard"
    assert run.steps[0].type == "reflection"
    assert run.steps[0].finish_reason == "tool_use"
    assert run.stop_signal is not None and run.stop_signal.reason == "budget_exhausted"


def _step_with_tool(turn: int, call_id: str, arguments: Any) -> dict[str, Any]:
    return {
        "id": "",
        "turn": turn,
        "type": "tool_execution",
        "requestedToolCalls": [{"id": call_id, "name": "lookup", "arguments": arguments}],
        "toolExecutions": [
            {
                "name": "lookup",
                "toolCallId": call_id,
                "arguments": arguments,
                "result": {"ok": True},
                "error": "boom" if turn == 2 else None,
            }
        ],
        "usage": {"input": 10, "output": 2},
    }


def test_tools_derived_from_steps_when_server_sends_only_steps() -> None:
    body = {
        "status": "completed",
        "steps": [
            _step_with_tool(1, "c1", {"q": "a"}),
            _step_with_tool(2, "c2", '{"q": "b"}'),
        ],
    }
    run = decode_run(json.dumps(body).encode())
    assert [record.tool_call.name for record in run.tools] == ["lookup", "lookup"]
    assert [record.tool_call.arguments for record in run.tools] == [{"q": "a"}, {"q": "b"}]
    assert [record.turn for record in run.tools] == [1, 2]
    assert run.steps[1].tool_executions[0].has_error  # an error text means failed
    assert run.steps[1].requested_tool_calls[0].arguments == {"q": "b"}
    assert run.usage == Usage(input=20, output=4)


def test_tools_sent_by_the_server_are_kept() -> None:
    body = {
        "steps": [_step_with_tool(1, "c1", {"q": "a"})],
        "tools": [{"tool_call": {"id": "c9", "name": "other", "arguments": '{"x":1}'}}],
    }
    run = decode_run(json.dumps(body).encode())
    assert [(r.tool_call.name, r.tool_call.arguments) for r in run.tools] == [("other", {"x": 1})]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (b'{"run": null}', "$.run"),
        (b'{"run": 5}', "$.run"),
        (b'{"run": "x"}', "$.run"),
        (b"[]", "$"),
        (b'{"turns": "1"}', "$.turns"),
        (b'{"run": {"steps": [{"usage": {"input": 1.5}}]}}', "$.run.steps[0].usage.input"),
        (b'{"run": {"tools": [{"tool_call": []}]}}', "$.run.tools[0].tool_call"),
        (
            b'{"steps": [{"toolExecutions": [{"arguments": "{oops"}]}]}',
            "$.steps[0].toolExecutions[0].arguments",
        ),
        (
            b'{"run": {"steps": [{"requestedToolCalls": [{"arguments": "[1]"}]}]}}',
            "$.run.steps[0].requestedToolCalls[0].arguments",
        ),
        (
            b'{"run": {"pendingApprovals": [{"arguments": "7"}]}}',
            "$.run.pendingApprovals[0].arguments",
        ),
    ],
)
def test_unusable_run_is_a_protocol_error_naming_the_field(body: bytes, path: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_run(body)
    error = caught.value
    assert error.path == path
    assert path in str(error)
    assert body.decode()[:40] in str(error)  # quotes the body


def test_non_json_response() -> None:
    with pytest.raises(ProtocolError, match="not JSON") as caught:
        decode_run(b"<html>502 Bad Gateway</html>")
    assert "<html>502 Bad Gateway" in str(caught.value)


def test_excerpt_is_bounded() -> None:
    body = b'{"turns": "x", "pad": "' + b"a" * 5000 + b'"}'
    with pytest.raises(ProtocolError) as caught:
        decode_run(body)
    assert len(caught.value.excerpt) == 512


def test_other_responses() -> None:
    created = decode_response(b'{"sessionId": "s1", "later": 1}', CreateSessionResponse)
    assert created.session_id == "s1"
    with pytest.raises(ProtocolError) as caught:
        decode_response(b'{"id": "s1"}', CreateSessionResponse)
    assert caught.value.path == "$.sessionId"
    health = decode_response(b'{"status":"ok","capabilities":["attach","teleport"]}', Health)
    assert health.capabilities == ["attach", "teleport"]
    assert health.protocol == "1"


RUN_KEYS = (
    *("run", "steps", "tools", "toolExecutions", "arguments", "tool_call", "turns"),
    *("usage", "requestedToolCalls", "error", "pendingApprovals", "stopSignal"),
)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(RUN_KEYS),
                inner,
                max_size=4,
            )
        ),
        max_leaves=25,
    )
)
def test_response_garbage_only_ever_raises_protocol_error(value: Any) -> None:
    try:
        run = decode_run(msgspec.json.encode(value))
    except ProtocolError:
        return
    assert isinstance(run, AgentRun)
    encode(run)


# ---------------------------------------------------------------- round trips and encoding


def test_round_trip_is_lossless() -> None:
    step = Step(
        id="6f1c0b2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e",
        turn=1,
        tool_executions=[ToolExecution(id="", name="t", arguments={"a": 1}, result=[1, "x"])],
    )
    run = AgentRun(reply="r", status="completed", turns=1, steps=[step])
    run.sync_tools()
    run.sync_usage()
    assert decode_run(encode(run)) == run
    assert decode_run(encode({"run": run})) == run


def test_camel_case_on_the_wire_and_tool_call_snake_case() -> None:
    run = AgentRun(steps=[Step(tool_executions=[ToolExecution(tool_call_id="c1")])])
    run.sync_tools()
    wire = json.loads(encode(run))
    assert {"stopSignal", "llmProfile", "pendingApprovals", "userMessages"} <= set(wire)
    assert "toolCallId" in wire["steps"][0]["toolExecutions"][0]
    assert "tool_call" in wire["tools"][0]
    assert "cacheWrite" in wire["steps"][0]["usage"]
    assert "id" not in wire["tools"][0]  # an empty id is left out, never sent as ""
