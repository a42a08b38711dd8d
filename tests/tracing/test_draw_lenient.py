"""A run drawn as the service recorded it, not normalised yet: spans read each tool
execution as :func:`~evalport.protocol.decode_run` does (an error text makes it failed;
arguments recorded as a JSON string are the map it holds), under the safe policy or not."""

from __future__ import annotations

import msgspec
import pytest
from evalport.protocol import TracePolicy
from evalport.protocol._otel import SERVER, Draw, SpanRecord, draw


def _tool_span(execution: dict[str, object], safe: bool) -> SpanRecord:
    run = {
        "turns": 1,
        "steps": [{"turn": 1, "index": 0, "type": "tool_call", "toolExecutions": [execution]}],
    }
    root = SpanRecord(1, 2, 0, "invoke_agent", SERVER, 5, 10, {})
    body = b'{"run":' + msgspec.json.encode(run) + b"}"
    _chat, tool = draw(root, Draw(msgspec.Raw(body), "agent", 1, 0, safe))
    return tool


@pytest.mark.parametrize("safe", [False, True])
def test_an_execution_with_an_error_text_and_no_flag_is_a_failed_tool_span(safe: bool) -> None:
    tool = _tool_span({"name": "t", "error": "boom pin-0042", "result": "res"}, safe)
    assert tool.error is True
    assert tool.attributes["error.type"] == "tool_error"
    assert "gen_ai.tool.call.result" not in tool.attributes
    shown = tool.attributes["evalport.tool.error"]
    assert ("pin-0042" in shown) is not safe


@pytest.mark.parametrize("safe", [False, True])
def test_arguments_recorded_as_a_json_string_are_drawn_as_the_map(safe: bool) -> None:
    tool = _tool_span({"name": "t", "arguments": '{"card": "4111", "n": 2}'}, safe)
    expected = {"card": "4111", "n": 2}
    if safe:  # keys in clear, each value digested, as the policy does to the map
        expected = TracePolicy.safe().redact_arguments(expected)
    assert msgspec.json.decode(tool.attributes["gen_ai.tool.call.arguments"]) == expected


def test_arguments_that_are_no_json_map_are_drawn_as_recorded_or_digested_whole() -> None:
    shown = _tool_span({"name": "t", "arguments": "card 4111"}, safe=False)
    assert shown.attributes["gen_ai.tool.call.arguments"] == "card 4111"
    digested = _tool_span({"name": "t", "arguments": "card 4111"}, safe=True)
    assert "4111" not in digested.attributes["gen_ai.tool.call.arguments"]
