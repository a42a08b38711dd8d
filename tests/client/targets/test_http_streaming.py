"""HttpTarget with streamed turns: against a real server, the turn's timing and the
budgets that read it; against ``httpx.MockTransport``, the wire: when it asks for a
stream, how it resumes a lost one, an overflow, a problem event, a server that answers
JSON anyway."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import msgspec
import pytest
from evalport.client import (
    HttpTarget,
    LocalTarget,
    RetryPolicy,
    TargetUnavailable,
    TurnTimedOut,
    cases_from,
    eval_case,
    run_trial,
)
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter
from support.servers import running_server
from target_fixtures import BASE, Sleeps, health, wire_run

CAPABILITIES = ("idempotency", "streaming")
TURNS = "evals/sessions/s1/turns"


async def paced(message: str, history: list[Any], ctx: TurnContext) -> Any:
    await asyncio.sleep(0.05)
    yield "first "
    await asyncio.sleep(0.3)
    yield "second"


@pytest.fixture
def server() -> Iterator[Callable[..., str]]:
    managers: list[Any] = []

    def serve(agent: Any = paced, **options: Any) -> str:
        manager = running_server(EvalAdapter(agent, token=None, **options).app())
        managers.append(manager)
        return manager.__enter__()

    yield serve
    for manager in managers:
        manager.__exit__(None, None, None)


@eval_case
async def ttft_case(ctx) -> None:
    await ctx.send("hi")
    ctx.first_token_within(0.25)
    ctx.first_event_within(0.25)
    ctx.turn_within(10)


async def test_a_streamed_turn_times_its_first_token_before_its_end(server) -> None:
    async with HttpTarget(server()) as target:
        session = await target.open()
        turn = await session.send("hi")
        assert target.streamed_turns and turn.reply == "first second"
        timing = turn.timing
        assert timing is not None and timing.turn == 1
        assert timing.first_event is not None and timing.first_token is not None
        assert timing.first_event <= timing.first_token < 0.25 <= timing.total
        result = await run_trial(cases_from(ttft_case)[0], target)
    assert result.verdict == "passed", result.assertions
    assert len(result.timings) == 1 and result.timings[0].first_token is not None


async def test_without_the_stream_the_first_token_is_not_evaluable(server) -> None:
    url = server()
    for target in (HttpTarget(url, stream=False), HttpTarget(server(streaming=False))):
        async with target:
            session = await target.open()
            turn = await session.send("hi")
            assert not target.streamed_turns and turn.reply == "first second"
            assert turn.timing is not None and turn.timing.first_token is None
            assert turn.timing.total >= 0.35
            result = await run_trial(cases_from(ttft_case)[0], target)
        assert result.verdict == "failed"
        verdicts = {item.name.split("(")[0]: item for item in result.assertions}
        assert not verdicts["first_token_within"].evaluated
        assert "did not stream" in verdicts["first_token_within"].message
        assert verdicts["turn_within"].passed


async def test_local_target_times_turns_the_same_way() -> None:
    async with LocalTarget(paced) as target:
        result = await run_trial(cases_from(ttft_case)[0], target)
    assert result.verdict == "passed", result.assertions
    timing = result.timings[0]
    assert timing.first_event is not None and timing.first_token is not None
    assert timing.first_event < timing.first_token < 0.25 <= timing.total


async def test_a_reply_sent_whole_over_a_stream_has_its_first_token_with_it(server) -> None:
    async def whole(message: str) -> str:
        await asyncio.sleep(0.2)
        return "all at once"

    async with HttpTarget(server(whole)) as target:
        turn = await (await target.open()).send("hi")
    assert turn.timing is not None and turn.timing.first_event is not None
    assert turn.timing.first_token is not None and turn.timing.first_token >= 0.2


# -- the wire, against a mock transport -------------------------------------------------


def frame(name: str, data: Any, event_id: int | None = None) -> bytes:
    head = b"" if event_id is None else b"id: %d\n" % event_id
    return head + b"event: %s\ndata: %s\n\n" % (name.encode(), msgspec.json.encode(data))


class _Cut(httpx.AsyncByteStream):
    """A body that sends ``chunks`` and then fails as a dropped connection does."""

    def __init__(self, chunks: list[bytes], error: bool) -> None:
        self.chunks, self.error = chunks, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.error:
            raise httpx.ReadError("connection reset")


def event_stream(*chunks: bytes, cut: bool = False) -> httpx.Response:
    return httpx.Response(
        200, headers={"Content-Type": "text/event-stream"}, stream=_Cut(list(chunks), cut)
    )


def mocked(turns: Callable[[httpx.Request], httpx.Response]) -> tuple[HttpTarget, list[Any]]:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/health"):
            return httpx.Response(200, json=health(*CAPABILITIES))
        if request.url.path.endswith("/evals/sessions"):
            return httpx.Response(201, json={"sessionId": "s1"})
        sent.append(request)
        return turns(request)

    retry = RetryPolicy(sleep=Sleeps())
    return HttpTarget(BASE, transport=httpx.MockTransport(answer), retry=retry), sent


STARTED = {"event": "turn-started", "turn": 1}
DELTA = {"event": "text-delta", "turn": 1, "text": "Hi", "chars": 2}


async def test_a_dropped_stream_is_resumed_with_its_key_and_last_event_id() -> None:
    answers = iter(
        [
            event_stream(
                frame("turn-started", STARTED, 1), frame("text-delta", DELTA, 2), cut=True
            ),
            event_stream(frame("result", {"run": wire_run(1)})),
        ]
    )
    target, sent = mocked(lambda request: next(answers))
    async with target:
        turn = await (await target.open()).send("hello")
    first, second = sent
    assert first.headers["accept"] == "text/event-stream" and "last-event-id" not in first.headers
    assert second.headers["idempotency-key"] == first.headers["idempotency-key"]
    assert second.headers["last-event-id"] == "2"
    assert second.content == first.content
    assert turn.index == 1 and turn.timing is not None and turn.timing.first_token is not None


async def test_an_overflow_reads_the_answer_without_the_stream() -> None:
    overflow = {"event": "overflow", "detail": "fell behind", "keptBytes": 1024}
    answers = iter(
        [
            event_stream(frame("turn-started", STARTED, 1), frame("overflow", overflow)),
            httpx.Response(200, json={"run": wire_run(1)}),
        ]
    )
    target, sent = mocked(lambda request: next(answers))
    async with target:
        turn = await (await target.open()).send("hello")
    assert turn.index == 1
    assert sent[1].headers["accept"] == "application/json"
    assert sent[1].headers["idempotency-key"] == sent[0].headers["idempotency-key"]


async def test_a_problem_event_raises_as_its_status_would() -> None:
    problem = {
        "type": "urn:evalport:problem:turn-timeout",
        "title": "Turn timed out",
        "status": 504,
        "detail": "The turn did not finish within 1 seconds",
    }
    target, _ = mocked(lambda request: event_stream(frame("problem", problem)))
    async with target:
        session = await target.open()
        with pytest.raises(TurnTimedOut, match="did not finish within 1 seconds"):
            await session.send("hello")


async def test_a_stream_that_keeps_ending_early_gives_up_within_the_retry_policy() -> None:
    target, sent = mocked(lambda request: event_stream(frame("turn-started", STARTED, 1)))
    async with target:
        session = await target.open()
        with pytest.raises(TargetUnavailable, match="ended before its final event"):
            await session.send("hello")
    # the first connection brought event 1; then the whole budget for cuts in a row
    assert len(sent) == 1 + RetryPolicy().attempts
    assert {request.headers["last-event-id"] for request in sent[1:]} == {"1"}


async def test_a_long_turn_cut_after_each_new_event_is_followed_to_its_end() -> None:
    cuts = 2 * RetryPolicy().attempts  # more cuts than the budget, each after progress

    def answer(request: httpx.Request) -> httpx.Response:
        last = int(request.headers.get("last-event-id", "0"))
        if last < cuts:
            return event_stream(frame("text-delta", DELTA, last + 1), cut=True)
        return event_stream(frame("result", {"run": wire_run(1)}))

    target, sent = mocked(answer)
    async with target:
        turn = await (await target.open()).send("hello")
    assert turn.index == 1 and len(sent) == cuts + 1


async def test_a_503_problem_at_the_end_of_a_stream_is_retried_as_a_new_attempt() -> None:
    unavailable = {
        "type": "urn:evalport:problem:store-unavailable",
        "title": "Store unavailable",
        "status": 503,
        "retryAfter": 1,
    }
    answers = iter(
        [
            event_stream(frame("turn-started", STARTED, 1), frame("problem", unavailable)),
            event_stream(frame("result", {"run": wire_run(1)})),
        ]
    )
    target, sent = mocked(lambda request: next(answers))
    async with target:
        turn = await (await target.open()).send("hello")
    assert turn.index == 1
    assert "last-event-id" not in sent[1].headers  # the retry may start the turn anew
    assert target.retry.sleep.waits == [1.0]  # as the problem's retryAfter says


async def test_a_server_that_answers_json_to_a_stream_request_is_read_as_json() -> None:
    target, sent = mocked(lambda request: httpx.Response(200, json={"run": wire_run(1)}))
    async with target:
        turn = await (await target.open()).send("hello")
    assert sent[0].headers["accept"] == "text/event-stream"
    assert turn.index == 1 and turn.timing is not None and turn.timing.first_event is None
