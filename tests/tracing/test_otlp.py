"""evalport's own OTLP/HTTP export: what it encodes reads back with OpenTelemetry's own
protobuf classes, it needs no extra, and a full queue drops spans it counts and logs."""

from __future__ import annotations

import base64
import logging
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.protocol._otel import CLIENT, SERVER, SpanEvent, SpanRecord
from evalport.protocol._otlp import OtlpExporter
from evalport.protocol._otlp_proto import encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support.otlp import collector, received_spans

AGENT = """
from evalport.protocol import ToolCall, Usage
from evalport.protocol.runtime import tool


@tool
def lookup(order: str) -> dict:
    return {"order": order, "status": "shipped"}


async def agent(message, history, ctx):
    ctx.llm_profile(driver="fake", model="m-2")
    ctx.model_step(
        tool_calls=[ToolCall(id="c1", name="lookup", arguments={"order": "A7"})],
        usage=Usage(input=12, output=3),
    )
    lookup("A7")
    ctx.model_step(content="shipped", finish_reason="stop", usage=Usage(input=20, output=2))
    return "shipped"
"""

EVALS = """
from evalport.client import eval_case


@eval_case()
async def where(ctx):
    await ctx.send("where is A7?")
    ctx.contains("shipped")
"""


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {item["key"]: item["value"] for item in span.get("attributes", [])}


def test_the_encoder_writes_what_opentelemetry_proto_reads() -> None:
    trace_id, span_id, parent_id = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 7
    root = SpanRecord(trace_id, parent_id, 0, "evalport.trial c", SERVER, 10, 2**62, {"n": -3})
    record = SpanRecord(
        trace_id,
        span_id,
        parent_id,
        "chat m-1 \u00e9",
        CLIENT,
        1_700_000_000_123_456_789,
        1_700_000_000_223_456_789,
        {
            "text": "h\u00e9llo " * 40,
            "flag": True,
            "off": False,
            "count": 300,
            "big": 2**40,
            "score": 0.25,
            "names": ["a", "b"],
            "empty": "",
        },
        events=[SpanEvent("evalport.assertion", 1_700_000_000_200_000_000, {"passed": False})],
        error=True,
    )
    body = encode({"service.name": "svc", "k": "v"}, "evalport.client", [root, record])
    request = ExportTraceServiceRequest.FromString(body)
    (resource,) = request.resource_spans
    assert {kv.key: kv.value.string_value for kv in resource.resource.attributes} == {
        "service.name": "svc",
        "k": "v",
    }
    (scope,) = resource.scope_spans
    assert scope.scope.name == "evalport.client"
    first, span = scope.spans
    assert first.parent_span_id == b"" and first.end_time_unix_nano == 2**62
    assert first.kind == 2 and first.attributes[0].value.int_value == -3
    assert first.status.code == 0
    assert span.trace_id == trace_id.to_bytes(16, "big")
    assert span.span_id == span_id.to_bytes(8, "big")
    assert span.parent_span_id == parent_id.to_bytes(8, "big")
    assert span.name == "chat m-1 \u00e9" and span.kind == 3
    assert span.start_time_unix_nano == 1_700_000_000_123_456_789
    assert span.end_time_unix_nano == 1_700_000_000_223_456_789
    values = {kv.key: kv.value for kv in span.attributes}
    assert values["text"].string_value == "h\u00e9llo " * 40
    assert values["flag"].bool_value is True
    assert values["off"].HasField("bool_value") and values["off"].bool_value is False
    assert values["count"].int_value == 300 and values["big"].int_value == 2**40
    assert values["score"].double_value == 0.25
    assert [v.string_value for v in values["names"].array_value.values] == ["a", "b"]
    assert values["empty"].HasField("string_value")
    (event,) = span.events
    assert event.name == "evalport.assertion"
    assert event.time_unix_nano == 1_700_000_000_200_000_000
    assert event.attributes[0].key == "passed" and event.attributes[0].value.bool_value is False
    assert span.status.code == 2  # STATUS_CODE_ERROR


def test_run_otlp_needs_no_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``evalport run --otlp`` exports without OpenTelemetry's packages installed."""
    from evalport.protocol._cli import main

    (tmp_path / "otlp_agent.py").write_text(AGENT)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "where_eval.py").write_text(EVALS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,team=a%2Cb")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "evals")
    with collector() as (url, bodies):
        with monkeypatch.context() as blocked:
            blocked.setitem(sys.modules, "opentelemetry", None)
            code = main(
                [
                    "run",
                    str(tmp_path / "evals"),
                    "--local",
                    "otlp_agent:agent",
                    "--otlp",
                    url,
                    "--out",
                    str(tmp_path / "out"),
                    "-q",
                ]
            )
        assert code == 0
    request = ExportTraceServiceRequest.FromString(bodies[0][1])
    resource = {
        kv.key: kv.value.string_value for kv in request.resource_spans[0].resource.attributes
    }
    assert resource["service.name"] == "evals"
    assert resource["deployment.environment"] == "ci" and resource["team"] == "a,b"
    spans = received_spans(bodies)
    names = sorted(span["name"] for span in spans)
    assert names == [
        "chat m-2",
        "chat m-2",
        "evalport.trial where_eval::where",
        "execute_tool lookup",
        "invoke_agent agent",
    ]
    (trial,) = [span for span in spans if span["name"].startswith("evalport.trial")]
    (turn,) = [span for span in spans if span["name"].startswith("invoke_agent")]
    assert "parentSpanId" not in trial and turn["parentSpanId"] == trial["spanId"]
    assert {span["traceId"] for span in spans} == {trial["traceId"]}
    assert _attributes(trial)["evalport.verdict"] == {"stringValue": "passed"}
    assert [event["name"] for event in trial["events"]] == ["evalport.assertion"]
    tool = next(span for span in spans if span["name"] == "execute_tool lookup")
    assert "A7" not in str(_attributes(tool)["gen_ai.tool.call.arguments"])  # safe: digested


async def test_an_adapter_exports_over_otlp_without_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from evalport.server import EvalAdapter
    from evalport.server._tracing import serve_provider

    (tmp_path / "otlp_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    from otlp_agent import agent  # type: ignore[import-not-found]

    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with collector() as (url, bodies), monkeypatch.context() as blocked:
        blocked.setitem(sys.modules, "opentelemetry", None)
        exporter = serve_provider(url, "svc")
        adapter = EvalAdapter(agent, token=None, tracing=exporter)
        transport = httpx.ASGITransport(app=adapter.app())
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            session = (await http.post("/evals/sessions", json={})).json()["sessionId"]
            turn = await http.post(
                f"/evals/sessions/{session}/turns",
                json={"message": "where?"},
                headers={"traceparent": parent},
            )
            assert turn.status_code == 200
        exporter.shutdown()
    spans = received_spans(bodies)
    (served,) = [span for span in spans if span["name"].startswith("invoke_agent")]
    assert served["kind"] == "SPAN_KIND_SERVER"
    assert base64.b64decode(served["parentSpanId"]) == bytes.fromhex("b7ad6b7169203331")
    assert sorted(span["name"] for span in spans if span is not served) == [
        "chat m-2",
        "chat m-2",
        "execute_tool lookup",
    ]


def test_spans_beyond_the_queue_are_dropped_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc", queue=3)
        records = [SpanRecord(1, n + 1, 0, f"s{n}", SERVER, 1, 2, {}) for n in range(5)]
        with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
            exporter.add(records[:2])
            exporter.add(records[2:])  # three more than fit: dropped whole
            exporter.shutdown()
    assert exporter.dropped == 3
    assert "the trace queue was full: dropped 3 span(s); 3 dropped so far" in caplog.text
    assert [span["name"] for span in received_spans(bodies)] == ["s0", "s1"]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 1),
        ),
        (
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-later",
            (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 0),
        ),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later", None),
        ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None),
        ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", None),
        ("00-0af7_51916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None),
        ("00-00000000000000000000000000000000-b7ad6b7169203331-01", None),
        ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", None),
        ("", None),
    ],
)
def test_a_traceparent_is_read_as_w3c_writes_it(header: str, expected: Any) -> None:
    from evalport.protocol._otel import remote_parent

    assert remote_parent(header) == expected
