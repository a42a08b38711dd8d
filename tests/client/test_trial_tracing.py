"""Traces of trials (evalport.client._tracing), read back from an in-memory exporter."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.client import (
    FakeJudge,
    HttpTarget,
    LocalTarget,
    RunCache,
    Runner,
    TracePolicy,
    cases_from,
    eval_case,
    traced_trials,
)
from evalport.client._core._logged import LoggedConversations
from evalport.protocol import MissingExtraError, ToolCall, Usage
from evalport.protocol.runtime import TurnContext, tool
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SECRET = "card-4111-planted"


@tool
def charge(card: str, amount: float) -> dict[str, Any]:
    return {"receipt": "R-9", "card": card}


async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
    ctx.llm_profile(driver="fake", model="m-1")
    ctx.model_step(
        tool_calls=[ToolCall(id="call_1", name="charge", arguments={"card": SECRET, "amount": 3})],
        usage=Usage(input=40, output=4),
    )
    charge(SECRET, 3)
    ctx.model_step(content="done", finish_reason="stop", usage=Usage(input=50, output=1))
    return "done"


@eval_case()
async def charges(ctx: Any) -> None:
    await ctx.send("charge it")
    ctx.called_tool("charge")
    ctx.contains("nothing like this")
    ctx.judge().closed_qa("Did it charge?").soft()


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _dump(spans: tuple[ReadableSpan, ...]) -> str:
    return json.dumps(
        [
            [
                span.name,
                dict(span.attributes or {}),
                [dict(e.attributes or {}) for e in span.events],
            ]
            for span in spans
        ],
        default=str,
    )


async def _run(policy: TracePolicy) -> tuple[ReadableSpan, ...]:
    provider, exporter = _provider()
    async with LocalTarget(agent, policy=policy) as target:
        runner = Runner(
            target, judge=FakeJudge([0.5], tokens=(7, 2)), trial_function=traced_trials(provider)
        )
        await runner.run(cases_from(charges))
    return exporter.get_finished_spans()


async def test_a_trial_is_a_trace_of_turns_steps_tools_and_judge_calls() -> None:
    spans = await _run(TracePolicy.safe())
    by_name = {span.name: span for span in spans}
    trial = by_name["evalport.trial charges"]
    assert trial.parent is None
    assert {span.context.trace_id for span in spans} == {trial.context.trace_id}
    assert trial.attributes is not None
    assert trial.attributes["evalport.case.id"] == "charges"
    assert trial.attributes["evalport.trial.index"] == 0
    assert trial.attributes["evalport.verdict"] == "failed"
    events = [(e.name, dict(e.attributes or {})) for e in trial.events]
    assertions = [a for name, a in events if name == "evalport.assertion"]
    assert [
        (a["evalport.assertion.passed"], a["evalport.assertion.score"]) for a in assertions
    ] == [
        (True, 1.0),
        (False, 0.0),
        (False, 0.5),
    ]
    judged = [a for name, a in events if name == "evalport.judge"]
    assert judged == [
        {
            "evalport.judge.criterion": "closed_qa",
            "evalport.judge.cached": False,
            "evalport.judge.score": 0.5,
        }
    ]

    judge = by_name["evalport.judge closed_qa"]
    assert judge.parent is not None and judge.parent.span_id == trial.context.span_id
    assert judge.attributes is not None
    assert judge.attributes["evalport.judge"] is True
    assert judge.attributes["gen_ai.request.model"] == "fake-judge"
    assert judge.attributes["gen_ai.usage.input_tokens"] == 7

    turn = by_name["invoke_agent agent"]
    assert turn.parent is not None and turn.parent.span_id == trial.context.span_id
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.usage.input_tokens"] == 90
    chats = [span for span in spans if span.name == "chat m-1"]
    tool_span = by_name["execute_tool charge"]
    assert len(chats) == 2
    for child in [*chats, tool_span]:
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool_span.attributes["gen_ai.tool.name"] == "charge"
    assert chats[0].attributes is not None
    assert chats[0].attributes["evalport.tool_calls.names"] == ("charge",)
    assert chats[1].attributes is not None
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert turn.start_time is not None and chats[0].start_time is not None
    assert turn.start_time <= chats[0].start_time  # the times the run recorded


async def test_under_safe_no_span_carries_a_payload_the_reports_would_not_show() -> None:
    assert SECRET not in _dump(await _run(TracePolicy.safe()))
    # the same run, verbatim: the payload is there (so the check above can fail)
    assert SECRET in _dump(await _run(TracePolicy.verbatim()))


async def test_every_request_of_a_traced_trial_carries_its_traceparent() -> None:
    seen: list[httpx.Request] = []
    run = {"reply": "done", "status": "completed", "turns": 1}

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/health"):
            return httpx.Response(200, json={"status": "ok", "protocol": "1"})
        if request.method == "POST" and request.url.path.endswith("/sessions"):
            return httpx.Response(
                201, json={"sessionId": "s1", "expiresAt": "2030-01-01T00:00:00Z"}
            )
        if request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(200, json={"run": run})

    @eval_case()
    async def hello(ctx: Any) -> None:
        await ctx.send("hi")
        await ctx.send("again")

    provider, exporter = _provider()
    target = HttpTarget("http://agent.test/", transport=httpx.MockTransport(answer))
    async with target:
        await Runner(target, trial_function=traced_trials(provider)).run(cases_from(hello))
        await target.check()  # outside a trial: no trace to continue
    trial = next(s for s in exporter.get_finished_spans() if s.name.startswith("evalport.trial"))
    context = trial.context
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    in_trial = [request for request in seen if request.method != "GET"]
    assert [request.method for request in in_trial] == ["POST", "POST", "POST", "DELETE"]
    assert {request.headers.get("traceparent") for request in in_trial} == {expected}
    assert "traceparent" not in seen[-1].headers


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    provider, _ = _provider()
    for name in [name for name in sys.modules if name.startswith("evalport.protocol.tracing")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'evalport\[otel\]'"):
        traced_trials(provider)


def test_run_refuses_an_otlp_url_that_is_not_http(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalport.protocol._cli import main

    (tmp_path / "hello_eval.py").write_text(
        "from evalport.client import eval_case\n\n\n@eval_case()\nasync def hello(ctx):\n"
        "    await ctx.send('hi')\n"
    )
    args = ["run", str(tmp_path), "--local", "tests.nowhere:agent", "--otlp", "collector:4318"]
    code = main([*args, "--out", str(tmp_path / "o")])
    assert code == 2
    assert "--otlp: 'collector:4318' is not an http:// or https:// URL" in capsys.readouterr().err


AGENT_SPANS = ("invoke_agent", "chat ", "execute_tool")


def _agent_spans(spans: tuple[ReadableSpan, ...]) -> list[str]:
    return [span.name for span in spans if span.name.startswith(AGENT_SPANS)]


def _trial_span(spans: tuple[ReadableSpan, ...]) -> ReadableSpan:
    (trial,) = [span for span in spans if span.name.startswith("evalport.trial ")]
    return trial


async def test_a_replayed_trial_draws_no_agent_spans(tmp_path: Path) -> None:
    """A trial the run cache replays called no agent: the trial span says so and has its
    assertion events, and no turn, chat or tool span carries the recording's old times."""
    traces = []
    for _ in range(2):
        provider, exporter = _provider()
        async with LocalTarget(agent) as target:
            runner = Runner(
                target,
                judge=FakeJudge([0.5]),
                cache=RunCache(tmp_path / "cache"),
                trial_function=traced_trials(provider),
            )
            await runner.run(cases_from(charges))
        traces.append(exporter.get_finished_spans())
    live, replayed = traces
    assert _agent_spans(live) == [
        "chat m-1",
        "execute_tool charge",
        "chat m-1",
        "invoke_agent agent",
    ]
    assert _agent_spans(replayed) == []
    attributes = dict(_trial_span(replayed).attributes or {})
    assert attributes["evalport.trial.cached"] is True
    assert "evalport.trial.cached" not in dict(_trial_span(live).attributes or {})
    events = [event.name for event in _trial_span(replayed).events]
    assert events.count("evalport.assertion") == 3


async def test_a_logged_conversation_trial_draws_no_agent_spans(tmp_path: Path) -> None:
    chat = [
        {"role": "user", "content": "Refund A1050."},
        {"role": "assistant", "content": "Done: A1050 is refunded."},
    ]
    (tmp_path / "chat.json").write_text(json.dumps(chat))

    @eval_case(conversations=str(tmp_path / "chat.json"))
    async def logged(ctx: Any) -> None:
        ctx.contains("refunded")

    provider, exporter = _provider()
    runner = Runner(LoggedConversations(), trial_function=traced_trials(provider))
    report = await runner.run(cases_from(logged))
    assert report.results[0].verdict == "passed", report.results[0].trials[0].error
    spans = exporter.get_finished_spans()
    assert _agent_spans(spans) == []
    trial = _trial_span(spans)
    assert dict(trial.attributes or {})["evalport.trial.logged"] is True
    assert [event.name for event in trial.events] == ["evalport.assertion"]


async def test_a_trial_that_raises_is_an_error_span_without_the_exception_text() -> None:
    async def raising(case: Any, target: Any, *, trial: int = 0, **options: Any) -> Any:
        raise RuntimeError(f"target refused {SECRET}")

    provider, exporter = _provider()
    traced = traced_trials(provider, trial_function=raising)
    with pytest.raises(RuntimeError):
        await traced(cases_from(charges)[0], object(), trial=1)
    (trial,) = exporter.get_finished_spans()
    assert dict(trial.attributes or {})["error.type"] == "RuntimeError"
    assert trial.status.status_code.name == "ERROR"
    assert SECRET not in _dump(exporter.get_finished_spans())
