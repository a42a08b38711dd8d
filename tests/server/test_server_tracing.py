"""Turns as spans in the service (evalport.server._tracing): continued traces, the policy,
and a collector that is down (a real closed port, a real `evalport serve`)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.protocol import MissingExtraError, ToolCall, TracePolicy, Usage
from evalport.protocol.runtime import TurnContext, tool
from evalport.server import EvalAdapter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.otlp import collector, received_spans
from support.servers import free_port, running_process

SECRET = "pin-0042-planted"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@tool
def unlock(pin: str) -> str:
    return f"unlocked with {pin}"


async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    ctx.model_step(
        tool_calls=[ToolCall(id="call_u", name="unlock", arguments={"pin": SECRET})],
        usage=Usage(input=9, output=2),
    )
    unlock(SECRET)
    return "open"


def _traced(**options: Any) -> tuple[httpx.AsyncClient, InMemorySpanExporter, EvalAdapter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    adapter = EvalAdapter(agent, token=None, tracing=provider, **options)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=adapter.app()), base_url="http://agent.test"
    )
    return client, exporter, adapter


async def _turn(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
    return await client.post(
        f"/evals/sessions/{session}/turns", json={"message": "open up"}, headers=headers
    )


async def test_a_turn_continues_the_callers_trace_with_its_steps_inside() -> None:
    client, exporter, _ = _traced()
    async with client:
        assert "tracing" in (await client.get("/health")).json()["capabilities"]
        assert (await _turn(client, {"traceparent": PARENT})).status_code == 200
    spans = exporter.get_finished_spans()
    server = next(span for span in spans if span.name.startswith("invoke_agent"))
    assert server.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert server.parent is not None and server.parent.span_id == 0xB7AD6B7169203331
    assert server.attributes is not None
    assert server.attributes["http.route"] == "/evals/sessions/{session_id}/turns"
    assert server.attributes["evalport.turn"] == 1
    children = {
        span.name for span in spans if span.parent and span.parent.span_id == server.context.span_id
    }
    assert children == {"chat", "execute_tool unlock"}
    # no policy on the adapter: the spans are drawn from the run under TracePolicy.safe()
    dump = json.dumps([dict(span.attributes or {}) for span in spans])
    assert SECRET not in dump and "sha256:" in dump


def invoked(exporter: InMemorySpanExporter) -> list[Any]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith("invoke")]


async def test_a_streamed_turn_is_traced_as_the_same_turn_unstreamed() -> None:
    client, exporter, _ = _traced()
    async with client:
        assert "streaming" in (await client.get("/health")).json()["capabilities"]
        streamed = await _turn(client, {"traceparent": PARENT, "Accept": "text/event-stream"})
        assert streamed.headers["content-type"].startswith("text/event-stream")
        assert "event: result" in streamed.text
        assert (await _turn(client, {"traceparent": PARENT})).status_code == 200
    deadline = time.monotonic() + 5  # a streamed turn's span ends once its stream did
    while len(turns := invoked(exporter)) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    turns.sort(key=lambda span: span.start_time or 0)
    assert len(turns) == 2  # the streamed turn, then the same turn unstreamed
    spans = exporter.get_finished_spans()

    def drawn(turn: Any) -> list[tuple[str, Any]]:
        children = [s for s in spans if s.parent and s.parent.span_id == turn.context.span_id]
        return sorted(
            (s.name, (s.attributes or {}).get("gen_ai.usage.input_tokens")) for s in children
        )

    assert drawn(turns[0]) == drawn(turns[1]) != []
    assert turns[0].parent is not None and turns[0].parent.span_id == 0xB7AD6B7169203331
    assert (turns[0].attributes or {})["evalport.turn"] == 1


@pytest.mark.parametrize("since", [0, 1, 3])
async def test_a_turn_answered_as_a_delta_draws_that_turn_from_it(since: int) -> None:
    """The delta holds the turn's steps and message, with the client's copy behind (0),
    up to date (1), or ahead of the run (3: the whole run is the answer)."""
    client, exporter, _ = _traced()
    async with client:
        session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
        path = f"/evals/sessions/{session}/turns"
        assert (await client.post(path, json={"message": "open up"})).status_code == 200
        second = await client.post(f"{path}?since={since}", json={"message": "again"})
    assert second.status_code == 200 and ("delta" in second.json()) == (since < 3)
    turns = [span for span in exporter.get_finished_spans() if span.name.startswith("invoke")]
    assert [(span.attributes or {})["evalport.turn"] for span in turns] == [1, 2]
    asked = [json.loads(str((span.attributes or {})["gen_ai.input.messages"])) for span in turns]
    assert [item[0]["parts"][0]["content"] for item in asked] == ["open up", "again"]
    steps = [span for span in exporter.get_finished_spans() if span.name == "chat"]
    assert len(steps) == 4  # two steps a turn: the tool call and the reply
    assert sorted(span.parent.span_id for span in steps if span.parent) == sorted(
        2 * [span.context.span_id for span in turns]
    )


@tool(approval=True)
async def refund(order: str) -> str:
    return f"refunded {order}"


async def asks(message: str, history: list[Any], ctx: TurnContext) -> str:
    ctx.model_step(
        tool_calls=[ToolCall(id="call_r", name="refund", arguments={"order": "A1"})],
        usage=Usage(input=5, output=1),
    )
    done = await refund("A1")
    ctx.model_step(usage=Usage(input=7, output=3))
    return done


async def test_a_turn_that_suspends_goes_on_in_the_approvals_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = EvalAdapter(asks, token=None, tracing=provider).app()
    later = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://agent.test") as client:
        session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
        path = f"/evals/sessions/{session}"
        headers = {"traceparent": PARENT}
        asked = await client.post(f"{path}/turns", json={"message": "refund"}, headers=headers)
        (pending,) = asked.json()["run"]["pendingApprovals"]
        decisions = {"decisions": {pending["callId"]: {"decision": "approve"}}}
        done = await client.post(
            f"{path}/approvals", json=decisions, headers={"traceparent": later}
        )
    assert done.json()["run"]["reply"] == "refunded A1"
    spans = exporter.get_finished_spans()
    turn, resumed = [span for span in spans if span.name.startswith("invoke_agent")]
    assert (turn.attributes or {})["http.route"] == "/evals/sessions/{session_id}/turns"
    assert (resumed.attributes or {})["http.route"] == "/evals/sessions/{session_id}/approvals"
    assert resumed.parent is not None and resumed.parent.span_id == 0x00F067AA0BA902B7
    assert resumed.context.trace_id == turn.context.trace_id
    # each step drawn once: the tool call under the turn, the step after the approval
    # under the approvals span
    chats = [span for span in spans if span.name == "chat"]
    assert sorted(
        ((span.attributes or {})["gen_ai.usage.input_tokens"], span.parent.span_id)
        for span in chats
        if span.parent
    ) == sorted([(5, turn.context.span_id), (7, resumed.context.span_id)])


async def test_the_adapters_own_policy_decides_what_spans_carry() -> None:
    client, exporter, _ = _traced(policy=TracePolicy.verbatim())
    async with client:
        await _turn(client, {})
    spans = exporter.get_finished_spans()
    server = next(span for span in spans if span.name.startswith("invoke_agent"))
    assert server.parent is None  # no traceparent: a trace of its own
    assert SECRET in json.dumps([dict(span.attributes or {}) for span in spans])


async def test_tracing_is_off_unless_asked() -> None:
    adapter = EvalAdapter(agent, token=None)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=adapter.app()), base_url="http://agent.test"
    ) as client:
        assert "tracing" not in (await client.get("/health")).json()["capabilities"]
        assert (await _turn(client, {"traceparent": PARENT})).status_code == 200


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name.startswith("evalport.protocol.tracing")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingExtraError, match=r"evalport\[otel\]"):
        EvalAdapter(agent, token=None, tracing=True)


PIN_AGENT = """
from evalport.protocol import ToolCall, Usage
from evalport.protocol.runtime import tool


@tool
def ping(host: str) -> str:
    return "pong"


async def agent(message, history, ctx):
    ctx.model_step(tool_calls=[ToolCall(id="c1", name="ping", arguments={"host": "h"})])
    ping("h")
    return "pong"
"""


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released without listening)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.e2e
def test_a_collector_that_is_down_costs_a_turn_nothing(tmp_path: Path) -> None:
    (tmp_path / "pin_agent.py").write_text(PIN_AGENT)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    collector = f"http://127.0.0.1:{_closed_port()}"
    args = [sys.executable, "-m", "evalport.protocol._cli", "serve", "pin_agent:agent"]
    args += ["--port", str(port), "--insecure-no-auth", "--otlp", collector]
    args += ["--log-level", "warning"]
    env = {"OTEL_BSP_SCHEDULE_DELAY": "20", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    with (
        running_process(args, health_url=f"{base}/health", env=env, cwd=str(tmp_path)) as process,
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        session = http.post("/evals/sessions", json={}).json()["sessionId"]
        started = time.monotonic()
        for _ in range(20):
            turn = http.post(f"/evals/sessions/{session}/turns", json={"message": "go"})
            assert turn.status_code == 200
        elapsed = time.monotonic() - started
        time.sleep(1.5)  # the background exports fail meanwhile
        process.terminate()
        _, stderr = process.communicate(timeout=20)
    assert elapsed < 5.0, f"20 turns took {elapsed:.1f} s with the collector down"
    assert "Failed to export spans batch" in stderr, stderr[-2000:]  # the SDK's exporter


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sends_the_spans_still_queued(tmp_path: Path, stop: signal.Signals) -> None:
    """The provider shuts down at the lifespan's shutdown, before uvicorn re-raises the
    signal: the spans of a schedule delay never reached are sent all the same."""
    (tmp_path / "pin_agent.py").write_text(PIN_AGENT)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with collector() as (url, bodies):
        args = [sys.executable, "-m", "evalport.protocol._cli", "serve", "pin_agent:agent"]
        args += ["--port", str(port), "--insecure-no-auth", "--otlp", url]
        env = {"OTEL_BSP_SCHEDULE_DELAY": "600000"}  # nothing leaves before the shutdown
        with (
            running_process(
                args, health_url=f"{base}/health", env=env, cwd=str(tmp_path)
            ) as served,
            httpx.Client(base_url=base, timeout=10) as http,
        ):
            session = http.post("/evals/sessions", json={}).json()["sessionId"]
            for _ in range(3):
                assert http.post(f"/evals/sessions/{session}/turns", json={"message": "go"})
            assert bodies == []
            served.send_signal(stop)
            served.communicate(timeout=20)
        names = [span["name"] for span in received_spans(bodies)]
    assert sorted(names) == sorted(["invoke_agent agent", "chat", "chat", "execute_tool ping"] * 3)


def test_serve_otlp_refuses_a_url_that_is_not_http(capsys: pytest.CaptureFixture[str]) -> None:
    from evalport.protocol._cli import main

    args = ["serve", "nowhere:agent", "--insecure-no-auth", "--otlp", "127.0.0.1:4318"]
    assert main(args) == 2
    assert "--otlp: '127.0.0.1:4318' is not an http:// or https:// URL" in capsys.readouterr().err


async def test_a_repeated_idempotency_key_draws_the_turns_steps_once() -> None:
    client, exporter, _ = _traced()
    async with client:
        session = (await client.post("/evals/sessions", json={})).json()["sessionId"]
        path = f"/evals/sessions/{session}/turns"
        headers = {"traceparent": PARENT, "Idempotency-Key": "k-1"}
        first = await client.post(path, json={"message": "open up"}, headers=headers)
        again = await client.post(path, json={"message": "open up"}, headers=headers)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        second = await client.post(path, json={"message": "again"}, headers={"traceparent": PARENT})
        assert second.status_code == 200
    spans = exporter.get_finished_spans()
    turns = [span for span in spans if span.name.startswith("invoke_agent")]
    assert len(turns) == 3  # one per request
    replayed = [dict(span.attributes or {}).get("evalport.replayed") for span in turns]
    assert replayed == [None, True, None]
    under = [
        sum(1 for s in spans if s.parent is not None and s.parent.span_id == turn.context.span_id)
        for turn in turns
    ]
    assert under == [3, 0, 3]  # two chat spans and a tool span, drawn once per turn
