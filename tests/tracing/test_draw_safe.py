"""Drawing under the safe policy: the spans of a run drawn with ``Draw(safe=True)`` show
exactly what they show of the run :func:`decode_run` reads and :meth:`TracePolicy.safe`
redacts, in the runner's view
and in the service's (one turn, its first steps drawn already), whatever the payloads."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from evalport.protocol import TracePolicy, decode_run
from evalport.protocol._otel import CLIENT, SERVER, Draw, SpanRecord, draw


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


def _shown(records: list[SpanRecord], root: SpanRecord) -> list[Any]:
    return [root.attributes, *[(record.name, record.attributes) for record in records]]


@pytest.mark.parametrize(("turn", "drawn", "body"), [(0, 0, "bare"), (2, 1, "envelope")])
def test_safe_spans_show_what_the_safe_policy_leaves_of_the_run(
    turn: int, drawn: int, body: str
) -> None:
    raw = msgspec.json.encode(RUN)
    redacted = TracePolicy.safe().apply(decode_run(raw))  # read leniently, as drawn
    expected_raw = msgspec.json.encode(redacted)
    if body == "envelope":  # a turn response's body, as the service hands it over
        raw, expected_raw = b'{"run":' + raw + b"}", b'{"run":' + expected_raw + b"}"
    kind = SERVER if turn else CLIENT

    def drawn_from(run: bytes, safe: bool) -> list[Any]:
        root = SpanRecord(1, 2, 0, "root", kind, 5, 10, {})
        records = draw(root, Draw(msgspec.Raw(run), "agent", turn, drawn, safe))
        for record in records:
            record.span_id = record.trace_id = 0
        return _shown(records, root)

    shown = drawn_from(raw, safe=True)
    assert shown == drawn_from(expected_raw, safe=False)
    text = msgspec.json.encode(shown)
    for secret in (b"pin-0042", b"4111-1111", b"tok-secret", b"Ada"):
        assert secret not in text
    assert b"refund my order" in text if not turn else b"and charge me" in text
