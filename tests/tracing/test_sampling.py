"""``OTEL_TRACES_SAMPLER`` in evalport's exporter: the same decision as OpenTelemetry's
SDK for every trace id and parent flag, made when a trial or turn begins, so an unsampled
one hands nothing over and tells the service it calls not to trace either."""

from __future__ import annotations

import base64
import logging
import random
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from evalport.client import HttpTarget, Runner, RunOptions, cases_from, eval_case, traced_trials
from evalport.protocol._otel import CLIENT, SERVER, Draw, SpanRecord
from evalport.protocol._otlp import STANDARD_VARIABLES, OtlpExporter
from evalport.server import EvalAdapter
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from support.otlp import collector, received_spans

NOWHERE = "http://127.0.0.1:9"  # spans are never handed over in the decision tests
RUN = b'{"reply": "ok", "status": "completed", "turns": 1, "steps": []}'


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in STANDARD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")


@pytest.fixture
def exporter() -> Iterator[Any]:
    """A function that builds an exporter from the environment as it is then."""
    built: list[OtlpExporter] = []

    def build(url: str = NOWHERE) -> OtlpExporter:
        built.append(OtlpExporter(url, "svc"))
        return built[-1]

    yield build
    for one in built:
        one.shutdown()


def _sdk_decides(sampler: Any, trace_id: int, parent_flags: int | None) -> bool:
    context = None
    if parent_flags is not None:
        parent = SpanContext(trace_id, 0xB7AD6B7169203331, True, TraceFlags(parent_flags))
        context = trace.set_span_in_context(NonRecordingSpan(parent))
    decision = sampler.should_sample(context, trace_id, "span").decision
    return bool(decision.is_sampled())


@pytest.mark.parametrize(
    ("name", "arg"),
    [
        (None, None),
        ("always_on", None),
        ("always_off", None),
        ("traceidratio", "0.1"),
        ("traceidratio", "0.5"),
        ("traceidratio", "1"),
        ("traceidratio", None),  # 1.0 unset
        ("traceidratio", "0"),
        ("parentbased_always_on", "0.3"),  # the argument of another sampler is ignored
        ("parentbased_always_off", None),
        ("parentbased_traceidratio", "0.1"),
        ("ParentBased_TraceIdRatio", "0.25"),  # any case
        ("traceidratio", "1.5"),  # not a ratio: 1.0, as the SDK falls back
        ("traceidratio", "a tenth"),
        ("parentbased_traceidratio", "-0.1"),
        ("jaeger_remote", None),  # unknown: parentbased_always_on, as the SDK falls back
    ],
)
def test_each_trace_is_decided_as_the_sdk_decides_it(
    monkeypatch: pytest.MonkeyPatch, exporter: Any, name: str | None, arg: str | None
) -> None:
    if name is not None:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", name)
    if arg is not None:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", arg)
    ours = exporter()
    sdk = TracerProvider(shutdown_on_exit=False).sampler  # read from the same variables
    decided: dict[tuple[int | None, bool], int] = {}
    for parent_flags in (None, 0, 1, 3):  # a new trace, an unsampled and a sampled parent
        for _ in range(2000):
            if parent_flags is None:
                span = ours.begin("trial", CLIENT, None, {})
            else:
                trace_id = random.getrandbits(128) or 1
                header = f"00-{trace_id:032x}-b7ad6b7169203331-{parent_flags:02x}"
                span = ours.begin("turn", SERVER, header, {})
                assert span.record.trace_id == trace_id
            expected = _sdk_decides(sdk, span.record.trace_id, parent_flags)
            assert span.sampled == expected, (span.traceparent, parent_flags)
            assert span.traceparent.endswith("-01" if expected else "-00") or parent_flags == 3
            key = (parent_flags, expected)
            decided[key] = decided.get(key, 0) + 1
    if (name, arg) in {("traceidratio", "0.1"), ("parentbased_traceidratio", "0.1")}:
        assert 100 < decided[(None, True)] < 300  # about one in ten of 2000: not vacuous


def test_a_continued_trace_keeps_its_other_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    ours = OtlpExporter(NOWHERE, "svc")
    span = ours.begin("turn", SERVER, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03", {})
    ours.shutdown()
    assert not span.sampled
    assert span.traceparent.endswith("-02")  # the sampled bit cleared, the random bit kept


def test_a_parent_based_sampler_follows_a_traceparent_both_ways(
    monkeypatch: pytest.MonkeyPatch, exporter: Any
) -> None:
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    sampled, unsampled = f"00-{trace_id}-b7ad6b7169203331-01", f"00-{trace_id}-b7ad6b7169203331-00"
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off")
    never = exporter()
    assert not never.begin("turn", SERVER, None, {}).sampled  # a new trace: never
    assert never.begin("turn", SERVER, sampled, {}).sampled
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    always = exporter()
    assert always.begin("turn", SERVER, None, {}).sampled  # a new trace: always
    assert not always.begin("turn", SERVER, unsampled, {}).sampled
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")  # not parent based: ignores it
    assert exporter().begin("turn", SERVER, unsampled, {}).sampled


def test_an_unsampled_span_hands_nothing_over(
    monkeypatch: pytest.MonkeyPatch, exporter: Any
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    with collector() as (url, bodies):
        ours = exporter(url)
        for _ in range(3):
            span = ours.begin("trial", CLIENT, None, {})
            child = SpanRecord(span.record.trace_id, 7, span.record.span_id, "judge", 1, 5, 9, {})
            ours.finish(span, [child], Draw(msgspec.Raw(RUN)))
        ours.shutdown()
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")  # the same, sampled: sent
        sent = exporter(url)
        kept = sent.begin("trial", CLIENT, None, {})
        sent.finish(kept, [], Draw(msgspec.Raw(RUN)))
        sent.shutdown()
    assert ours.dropped == 0  # nothing was queued: nothing to drop
    spans = received_spans(bodies)
    assert spans[0]["name"] == "trial"
    assert {_id(span) for span in spans} == {f"{kept.record.trace_id:032x}"}


def test_an_unknown_sampler_or_ratio_is_logged_with_its_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, exporter: Any
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "xray")
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        exporter()
    assert "OTEL_TRACES_SAMPLER=xray is not a sampler evalport knows" in caplog.text
    assert "sampling as parentbased_always_on" in caplog.text
    caplog.clear()
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "10%")
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        exporter()
    assert "OTEL_TRACES_SAMPLER_ARG=10% is not a ratio from 0 to 1: sampling at 1.0" in caplog.text


async def agent(message: str, history: list[Any], ctx: Any) -> str:
    ctx.model_step(content="ok", finish_reason="stop")
    return "ok"


@eval_case()
async def hello(ctx: Any) -> None:
    await ctx.send("hi")


class Recording(httpx.AsyncBaseTransport):
    """The service's own transport, noting the ``traceparent`` of each turn request."""

    def __init__(self, app: Any, seen: list[str]) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self._seen = seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/turns"):
            self._seen.append(request.headers["traceparent"])
        return await self._inner.handle_async_request(request)


def _id(span: dict[str, Any]) -> str:
    return base64.b64decode(span["traceId"]).hex()


async def test_a_service_that_follows_its_parent_traces_the_trials_the_runner_sampled(
    monkeypatch: pytest.MonkeyPatch, exporter: Any
) -> None:
    seen: list[str] = []
    with collector() as (url, bodies):
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
        monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
        runner_side = exporter(url)
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off")  # follows only
        service_side = exporter(url)
        service = EvalAdapter(agent, token=None, tracing=service_side)
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
    assert {header[-3:] for header in seen} == {"-00", "-01"}  # 2**-23 to fail by chance
    sampled = {header[3:35] for header in seen if header.endswith("-01")}
    assert trials == sampled  # an unsampled trial sent nothing and said "-00"
    assert served == sampled  # the service traced the turns of those trials, no other
