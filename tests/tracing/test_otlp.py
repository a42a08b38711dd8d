"""``--otlp``: the SDK's batch processor and OTLP/HTTP exporter, configured by the
standard variables the SDK reads, to a real collector on a loopback port; and the exit
status without the ``otel`` extra."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from evalport.client import HttpTarget, Runner, RunOptions, cases_from, eval_case, traced_trials
from evalport.protocol.tracing import otlp_provider
from evalport.server import EvalAdapter
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


def test_run_otlp_exports_each_trial_before_it_exits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from evalport.protocol._cli import main

    (tmp_path / "otlp_agent.py").write_text(AGENT)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "where_eval.py").write_text(EVALS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,team=a%2Cb")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "evals")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")  # sent at the end, not before
    with collector() as (url, bodies):
        args = ["run", str(tmp_path / "evals"), "--local", "otlp_agent:agent", "--otlp", url]
        assert main([*args, "--out", str(tmp_path / "out"), "-q"]) == 0
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


def test_the_service_is_named_by_the_command_unless_a_variable_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider = otlp_provider("http://127.0.0.1:4318", "evalport-serve")
    assert provider.resource.attributes["service.name"] == "evalport-serve"
    provider.shutdown()
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=checkout")
    provider = otlp_provider("http://127.0.0.1:4318", "evalport-serve")
    assert provider.resource.attributes["service.name"] == "checkout"
    provider.shutdown()


BLOCKED = (
    "import sys; sys.modules['opentelemetry'] = None\n"
    "from evalport.protocol._cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.parametrize(
    "command",
    [
        ["run", "evals", "--local", "nowhere:agent", "--otlp", "http://127.0.0.1:4318"],
        ["serve", "nowhere:agent", "--insecure-no-auth", "--otlp", "http://127.0.0.1:4318"],
    ],
)
def test_otlp_without_the_extra_is_exit_2_naming_it(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "where_eval.py").write_text(EVALS)
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "--otlp needs 'opentelemetry', which is not installed" in done.stderr
    assert "pip install 'evalport[otel]'" in done.stderr


def test_an_endpoint_variable_without_the_extra_runs_untraced_with_one_line(
    tmp_path: Path,
) -> None:
    """A variable set for the environment's other programs is no usage error of the run."""
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "where_eval.py").write_text(EVALS)
    (tmp_path / "agent.py").write_text(
        "async def agent(message, history, ctx):\n    return 'A7 shipped'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, "run", "evals", "--local", "agent.py:agent"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    notes = [line for line in done.stderr.splitlines() if "not tracing" in line]
    assert notes == [
        "evalport run: not tracing: $OTEL_EXPORTER_OTLP_ENDPOINT needs 'opentelemetry', "
        "which is not installed. Run: pip install 'evalport[otel]'"
    ]


async def answer(message: str, history: list[Any], ctx: Any) -> str:
    ctx.model_step(content="ok", finish_reason="stop")
    return "ok"


@eval_case()
async def hello(ctx: Any) -> None:
    await ctx.send("hi")
    ctx.succeeded()


class Recording(httpx.AsyncBaseTransport):
    """The service's own transport, noting the ``traceparent`` of each turn request."""

    def __init__(self, app: Any, seen: list[str]) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self._seen = seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/turns"):
            self._seen.append(request.headers.get("traceparent", ""))
        return await self._inner.handle_async_request(request)


def _id(span: dict[str, Any]) -> str:
    return base64.b64decode(span["traceId"]).hex()


async def test_a_service_that_follows_its_parent_traces_the_trials_the_runner_sampled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's sampler decides (``OTEL_TRACES_SAMPLER``), and the ``traceparent`` flag
    carries its decision across the wire."""
    seen: list[str] = []
    with collector() as (url, bodies):
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
        monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
        runner_side = otlp_provider(url, "evals")
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off")  # follows only
        service_side = otlp_provider(url, "agent")
        service = EvalAdapter(answer, token=None, tracing=service_side)
        target = HttpTarget("http://agent.test/", transport=Recording(service.app(), seen))
        async with target:
            traced = traced_trials(runner_side)
            await Runner(target, RunOptions(repeat=24), trial_function=traced).run(
                cases_from(hello)
            )
        runner_side.shutdown()
        service_side.shutdown()
    spans = received_spans(bodies)
    trials = {_id(span) for span in spans if span["name"].startswith("evalport.trial")}
    served = {_id(span) for span in spans if span.get("kind") == "SPAN_KIND_SERVER"}
    assert len(seen) == 24
    flags = [int(header[-2:], 16) & 1 for header in seen]  # W3C's sampled flag
    assert set(flags) == {0, 1}  # 2**-23 to fail by chance
    sampled = {header[3:35] for header, flag in zip(seen, flags, strict=True) if flag}
    assert trials == sampled  # an unsampled trial sent nothing and said so
    assert served == sampled  # the service traced the turns of those trials, no other


async def test_sdk_disabled_traces_nothing_and_sends_no_traceparent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    with collector() as (url, bodies):
        provider = otlp_provider(url, "evals")
        service = EvalAdapter(answer, token=None)
        target = HttpTarget("http://agent.test/", transport=Recording(service.app(), seen))
        async with target:
            report = await Runner(target, trial_function=traced_trials(provider)).run(
                cases_from(hello)
            )
        provider.shutdown()
    assert report.summary.ok
    assert seen == [""] and bodies == []  # the turn request carried no traceparent
