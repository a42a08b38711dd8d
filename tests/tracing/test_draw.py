"""How a run becomes spans (evalport.protocol.tracing.draw), read back from the SDK's
in-memory exporter: runs as a service recorded them, the safe policy, and times the run
did not record or OTLP cannot carry."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from evalport.protocol import TracePolicy, decode_run, tracing
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

UNTIMED = 1_700_000_000_000_000_000


def _drawn(run: bytes, turn: int = 0, drawn: int = 0, safe: bool = False) -> list[ReadableSpan]:
    """The spans ``run`` draws under a root span, the root last."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    root = tracer.start_span("root", kind=SpanKind.SERVER if turn else SpanKind.INTERNAL)
    view = tracing.decode_view(run)
    tracing.draw(
        tracer, root, view, untimed=UNTIMED, agent="agent", turn=turn, drawn=drawn, safe=safe
    )
    root.end(UNTIMED + 10)
    return list(exporter.get_finished_spans())


def _tool_span(execution: dict[str, object], safe: bool) -> dict[str, Any]:
    run = {
        "turns": 1,
        "steps": [{"turn": 1, "index": 0, "type": "tool_call", "toolExecutions": [execution]}],
    }
    body = b'{"run":' + msgspec.json.encode(run) + b"}"
    _chat, tool, _root = _drawn(body, turn=1, safe=safe)
    assert tool.name.startswith("execute_tool")
    return {**(tool.attributes or {}), "failed": tool.status.status_code.name == "ERROR"}


@pytest.mark.parametrize("safe", [False, True])
def test_an_execution_with_an_error_text_and_no_flag_is_a_failed_tool_span(safe: bool) -> None:
    tool = _tool_span({"name": "t", "error": "boom pin-0042", "result": "res"}, safe)
    assert tool["failed"] is True
    assert tool["error.type"] == "tool_error"
    assert "gen_ai.tool.call.result" not in tool
    assert ("pin-0042" in tool["evalport.tool.error"]) is not safe


@pytest.mark.parametrize("safe", [False, True])
def test_arguments_recorded_as_a_json_string_are_drawn_as_the_map(safe: bool) -> None:
    tool = _tool_span({"name": "t", "arguments": '{"card": "4111", "n": 2}'}, safe)
    expected = {"card": "4111", "n": 2}
    if safe:  # keys in clear, each value digested, as the policy does to the map
        expected = TracePolicy.safe().redact_arguments(expected)
    assert msgspec.json.decode(tool["gen_ai.tool.call.arguments"]) == expected


def test_arguments_that_are_no_json_map_are_drawn_as_recorded_or_digested_whole() -> None:
    shown = _tool_span({"name": "t", "arguments": "card 4111"}, safe=False)
    assert shown["gen_ai.tool.call.arguments"] == "card 4111"
    digested = _tool_span({"name": "t", "arguments": "card 4111"}, safe=True)
    assert "4111" not in digested["gen_ai.tool.call.arguments"]


def _execution(name: str, arguments: Any, **more: Any) -> dict[str, Any]:
    return {"name": name, "toolCallId": f"{name}-1", "arguments": arguments, **more}


STEPS = [
    {
        "turn": 1,
        "index": 0,
        "type": "tool_call",
        "toolExecutions": [
            _execution("refund", {"order": "pin-0042", "nested": {"amount": 10.5}}, result="ok"),
            _execution("lookup", '{"card": "4111-1111"}', result={"owner": "Ada"}),
        ],
    },
    {"turn": 1, "index": 1, "type": "final_response", "finishReason": "stop"},
    {
        "turn": 2,
        "index": 2,
        "type": "tool_call",
        "toolExecutions": [_execution("charge", {"token": "tok-secret"}, result=None)],
    },
    {
        "turn": 2,
        "index": 3,
        "type": "tool_call",
        "toolExecutions": [
            _execution("charge", '{"pin": "tok-secret"}', error="card tok-secret declined"),
            _execution("void", {}, hasError=True, error={"type": "Timeout", "detail": "x"}),
            _execution("ping", {"n": 1}, hasError=True, error=""),
        ],
    },
]
RUN = {
    "reply": "done",
    "status": "completed",
    "turns": 2,
    "userMessages": ["refund my order", "and charge me"],
    "steps": STEPS,
}


@pytest.mark.parametrize(("turn", "drawn", "body"), [(0, 0, "bare"), (2, 1, "envelope")])
def test_safe_spans_show_what_the_safe_policy_leaves_of_the_run(
    turn: int, drawn: int, body: str
) -> None:
    """Drawn with ``safe``, the spans show exactly what they show of the run
    :func:`decode_run` reads and :meth:`TracePolicy.safe` redacts, in the runner's view
    and in the service's (one turn, its first steps drawn already)."""
    raw = msgspec.json.encode(RUN)
    redacted = TracePolicy.safe().apply(decode_run(raw))  # read leniently, as drawn
    expected_raw = msgspec.json.encode(redacted)
    if body == "envelope":  # a turn response's body, as the service hands it over
        raw, expected_raw = b'{"run":' + raw + b"}", b'{"run":' + expected_raw + b"}"

    def shown(run: bytes, safe: bool) -> list[Any]:
        spans = _drawn(run, turn, drawn, safe)
        return [(span.name, dict(span.attributes or {})) for span in spans]

    found = shown(raw, safe=True)
    assert found == shown(expected_raw, safe=False)
    text = json.dumps(found)
    for secret in ("pin-0042", "4111-1111", "tok-secret", "Ada"):
        assert secret not in text
    assert "refund my order" in text if not turn else "and charge me" in text
    if turn:  # the service's view: the turn's steps but the first, on the root span
        assert found[0][0] == "chat"
        assert found[-1][1]["evalport.turn"] == 2


GO_ZERO = "0001-01-01T00:00:00Z"


def test_a_time_otlp_cannot_carry_counts_as_not_recorded() -> None:
    """A Go agent's zero ``time.Time`` (before 1970) or a time after 2554 is timed as a
    time not recorded: at the root span's end, within it."""
    run = {
        "turns": 1,
        "steps": [
            {
                "turn": 1,
                "index": 0,
                "type": "tool_calls",
                "startedAt": GO_ZERO,
                "completedAt": GO_ZERO,
                "toolExecutions": [
                    _execution("lookup", {}, startedAt=GO_ZERO, completedAt="9999-12-31T23:59:59Z")
                ],
            }
        ],
    }
    spans = {span.name: span for span in _drawn(msgspec.json.encode(run))}
    assert set(spans) == {"invoke_agent agent", "chat", "execute_tool lookup", "root"}
    for name in ("invoke_agent agent", "chat", "execute_tool lookup"):
        assert spans[name].start_time == spans[name].end_time == UNTIMED


def test_a_turn_is_timed_from_its_first_step_to_its_last() -> None:
    run = {
        "turns": 1,
        "steps": [
            {
                "turn": 1,
                "index": 0,
                "startedAt": "2026-01-01T00:00:01Z",
                "completedAt": "2026-01-01T00:00:02Z",
            },
            {"turn": 1, "index": 1, "startedAt": "2026-01-01T00:00:03Z"},
        ],
    }
    spans = _drawn(msgspec.json.encode(run))
    assert [span.name for span in spans] == ["chat", "chat", "invoke_agent agent", "root"]
    first, second, turn, _ = spans
    assert turn.start_time == first.start_time and turn.end_time == second.end_time
    assert second.start_time == second.end_time  # no end: it ends when it started
    assert {span.parent.span_id for span in (first, second) if span.parent} == {
        turn.context.span_id
    }
