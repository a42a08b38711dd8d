"""Streamed turns on a real uvicorn server (protocol 1.2): the events as the agent records
them, the final event equal to the answer without the stream, resumption by key and
``Last-Event-ID``, heartbeats, problems, a reader that goes away, a slow reader, the trace
policy, and a server that does not stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import msgspec
import pytest
from evalport.protocol import (
    STREAM_EVENTS,
    STREAMING_CAPABILITY,
    TracePolicy,
    decode_event,
    decode_run,
)
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter, Limits
from support.servers import running_server

STREAM = {"Accept": "text/event-stream"}


class Frame(msgspec.Struct):
    name: str
    data: str
    id: int | None = None


def frames_of(text: str) -> list[Frame]:
    """The frames of an event stream as the wire has them (comments are kept as ``:``: a
    comment is a line of its own, with no blank line after it)."""
    found = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                found.append(Frame(":", line))
            elif line:
                name, _, value = line.partition(": ")
                fields[name] = value
        if not fields:
            continue
        assert set(fields) <= {"id", "event", "data"}, block
        event_id = int(fields["id"]) if "id" in fields else None
        found.append(Frame(fields["event"], fields["data"], event_id))
    return found


async def tooling_agent(message: str, history: list[Any], ctx: TurnContext) -> Any:
    ctx.model_step(content=None, tool_calls=None)
    with ctx.tool_execution("lookup", {"order": "A1"}) as run:
        run.result = {"status": "shipped"}
    ctx.model_step(content=None)
    for chunk in ("Your order ", "is ", message):
        await asyncio.sleep(0.01)
        ctx.text_delta(chunk)


@pytest.fixture
def served() -> Iterator[Any]:
    """``served(agent, **adapter_options)``: a real server's base URL."""
    stack: list[Any] = []

    def serve(agent: Any = tooling_agent, **options: Any) -> str:
        options.setdefault("token", None)
        manager = running_server(EvalAdapter(agent, **options).app())
        stack.append(manager)
        return manager.__enter__()

    yield serve
    for manager in reversed(stack):
        manager.__exit__(None, None, None)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def session_of(http: httpx.AsyncClient, url: str) -> str:
    created = await http.post(f"{url}/evals/sessions", json={})
    assert created.status_code == 201, created.text
    return str(created.json()["sessionId"])


async def streamed(
    http: httpx.AsyncClient, url: str, session: str, message: str, query: str = "", **headers: str
) -> httpx.Response:
    return await http.post(
        f"{url}/evals/sessions/{session}/turns{query}",
        json={"message": message},
        headers={**STREAM, **headers},
    )


async def test_events_come_in_order_and_end_with_the_answer(served, http) -> None:
    url = served()
    assert STREAMING_CAPABILITY in (await http.get(f"{url}/health")).json()["capabilities"]
    session = await session_of(http, url)
    response = await streamed(http, url, session, "shipped", **{"Idempotency-Key": "k1"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-store"
    frames = frames_of(response.text)
    names = [frame.name for frame in frames]
    assert names == [
        "turn-started",
        "step-started",
        "tool-started",
        "tool-completed",
        "step-completed",
        "step-started",
        "text-delta",
        "text-delta",
        "text-delta",
        "step-completed",
        "result",
    ]
    assert [frame.id for frame in frames[:-1]] == list(range(1, len(frames)))
    for frame in frames[:-1]:  # each names itself, and decodes as its event
        event = decode_event.decode(frame.data)
        assert isinstance(event, STREAM_EVENTS[frame.name])
    deltas = [decode_event.decode(f.data) for f in frames if f.name == "text-delta"]
    assert "".join(delta.text for delta in deltas) == "Your order is shipped"
    assert [delta.chars for delta in deltas] == [11, 3, 7]
    # the final event is the body the same request answers without the stream
    plain = await http.post(
        f"{url}/evals/sessions/{session}/turns",
        json={"message": "shipped"},
        headers={"Idempotency-Key": "k1"},
    )
    assert plain.status_code == 200
    assert frames[-1].data.encode() == plain.content
    run = decode_run(plain.content)
    assert run.reply == "Your order is shipped" and len(run.tools) == 1


async def test_with_since_the_final_event_is_the_delta(served, http) -> None:
    url = served()
    session = await session_of(http, url)
    await http.post(f"{url}/evals/sessions/{session}/turns", json={"message": "one"})
    response = await streamed(http, url, session, "two", "?since=1", **{"Idempotency-Key": "k"})
    final = frames_of(response.text)[-1]
    assert final.name == "result"
    plain = await http.post(
        f"{url}/evals/sessions/{session}/turns?since=1",
        json={"message": "two"},
        headers={"Idempotency-Key": "k"},
    )
    assert final.data.encode() == plain.content
    assert '"since":1' in final.data


async def slow_agent(message: str, history: list[Any], ctx: TurnContext) -> Any:
    for index in range(5):
        yield f"chunk{index} "
        await asyncio.sleep(0.15)


async def test_a_lost_stream_resumes_after_its_last_event_and_the_agent_runs_once(
    served, http
) -> None:
    calls: list[str] = []

    async def counted(message: str, history: list[Any], ctx: TurnContext) -> Any:
        calls.append(message)
        async for chunk in slow_agent(message, history, ctx):
            yield chunk

    url = served(counted)
    session = await session_of(http, url)
    path = f"{url}/evals/sessions/{session}/turns"
    headers = {**STREAM, "Idempotency-Key": "resume-1"}
    seen: list[str] = []
    async with http.stream("POST", path, json={"message": "go"}, headers=headers) as first:
        async for line in first.aiter_lines():
            seen.append(line)
            if line.startswith("data: ") and "chunk1" in line:
                break  # the connection drops here, mid-turn
    last = max(int(line[4:]) for line in seen if line.startswith("id: "))
    resumed = await http.post(
        path, json={"message": "go"}, headers={**headers, "Last-Event-ID": str(last)}
    )
    frames = frames_of(resumed.text)
    assert frames[0].id == last + 1  # the rest, without a gap or a repeat
    texts = [decode_event.decode(f.data).text for f in frames if f.name == "text-delta"]
    assert texts == ["chunk2 ", "chunk3 ", "chunk4 "]
    assert frames[-1].name == "result"
    assert decode_run(frames[-1].data.encode()).reply.startswith("chunk0 chunk1 chunk2")
    # once the turn is over, the same request gets the final event alone
    again = frames_of((await streamed(http, url, session, "go", **headers)).text)
    assert [frame.name for frame in again] == ["result"]
    assert calls == ["go"]


async def test_a_reader_that_goes_away_cancels_nothing(served, http) -> None:
    url = served(slow_agent)
    session = await session_of(http, url)
    path = f"{url}/evals/sessions/{session}/turns"
    async with http.stream("POST", path, json={"message": "go"}, headers=STREAM) as response:
        async for line in response.aiter_lines():
            if line.startswith("event: text-delta"):
                break
    deadline = time.monotonic() + 5
    while True:
        run = decode_run((await http.get(f"{url}/evals/sessions/{session}")).content)
        if run.status == "completed":
            break
        assert time.monotonic() < deadline, run.status
        await asyncio.sleep(0.05)
    assert run.reply == "chunk0 chunk1 chunk2 chunk3 chunk4 "


async def test_a_silent_turn_sends_keep_alive_comments(served, http) -> None:
    async def quiet(message: str) -> str:
        await asyncio.sleep(0.7)
        return "done"

    url = served(quiet, limits=Limits(stream_heartbeat=0.2))
    session = await session_of(http, url)
    frames = frames_of((await streamed(http, url, session, "hi")).text)
    assert [f.data for f in frames if f.name == ":"].count(": keep-alive") >= 2
    assert frames[-1].name == "result"


async def test_a_problem_during_the_turn_is_the_final_event(served, http) -> None:
    async def stuck(message: str) -> str:
        await asyncio.sleep(30)
        return "never"

    url = served(stuck, limits=Limits(turn_timeout=0.3))
    session = await session_of(http, url)
    response = await streamed(http, url, session, "hi")
    assert response.status_code == 200
    final = frames_of(response.text)[-1]
    assert final.name == "problem" and final.id is None
    problem = msgspec.json.decode(final.data)
    assert problem["status"] == 504 and problem["type"].endswith("turn-timeout")


async def test_problems_before_the_turn_starts_keep_their_status(served, http) -> None:
    url = served()
    missing = await streamed(http, url, "no-such-session", "hi")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    session = await session_of(http, url)
    bad = await streamed(http, url, session, "hi", **{"Last-Event-ID": "x1"})
    assert bad.status_code == 422 and "Last-Event-ID" in bad.text
    unstreamed = await http.post(  # the header is checked on every turn, as the spec says
        f"{url}/evals/sessions/{session}/turns",
        json={"message": "hi"},
        headers={"Last-Event-ID": ""},
    )
    assert unstreamed.status_code == 422 and "header:Last-Event-ID" in unstreamed.text


async def test_a_slow_reader_gets_overflow_and_the_turn_completes(served, http) -> None:
    async def chatty(message: str, history: list[Any], ctx: TurnContext) -> Any:
        for index in range(400):
            yield f"{index:04d}" + "x" * 20_000  # ~8 MB: more than loopback buffers hold
            if index % 20 == 0:
                await asyncio.sleep(0)

    url = served(chatty, limits=Limits(stream_buffer_bytes=65_536))
    session = await session_of(http, url)
    path = f"{url}/evals/sessions/{session}/turns"
    headers = {**STREAM, "Idempotency-Key": "slow-reader"}
    async with http.stream("POST", path, json={"message": "go"}, headers=headers) as response:
        lines = response.aiter_lines()
        first = await anext(lines)  # one line, then the reader stalls
        deadline = time.monotonic() + 10
        while decode_run((await http.get(f"{url}/evals/sessions/{session}")).content).status != (
            "completed"
        ):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        rest = [line async for line in lines]
    names = [line[7:] for line in (first, *rest) if line.startswith("event: ")]
    assert names[-1] == "overflow", names[-3:]
    assert "result" not in names
    # the turn completed: the same key without the stream answers it
    answer = await http.post(
        path, json={"message": "go"}, headers={"Idempotency-Key": "slow-reader"}
    )
    assert answer.status_code == 200
    assert decode_run(answer.content).reply.startswith("0000xxx")


async def test_under_a_trace_policy_events_show_what_the_run_shows(served, http) -> None:
    url = served(policy=TracePolicy.safe())
    session = await session_of(http, url)
    frames = frames_of((await streamed(http, url, session, "shipped")).text)
    by_name = {frame.name: decode_event.decode(frame.data) for frame in frames[:-1]}
    run = decode_run(frames[-1].data.encode())
    execution = run.steps[0].tool_executions[0]
    assert execution.result != {"status": "shipped"}  # digested in the run...
    assert by_name["tool-completed"].execution.result == execution.result  # ...and the event
    assert by_name["tool-started"].arguments == execution.arguments
    assert by_name["tool-started"].arguments != {"order": "A1"}
    assert by_name["step-completed"].step == run.steps[-1]
    deltas = [decode_event.decode(f.data).text for f in frames if f.name == "text-delta"]
    assert "".join(deltas) == run.reply == "Your order is shipped"  # replies stay as text


async def test_a_server_that_does_not_stream_answers_json(served, http) -> None:
    url = served(streaming=False)
    assert STREAMING_CAPABILITY not in (await http.get(f"{url}/health")).json()["capabilities"]
    session = await session_of(http, url)
    response = await streamed(http, url, session, "hi")
    assert response.headers["content-type"] == "application/json"
    assert decode_run(response.content).reply == "Your order is hi"


async def test_a_request_that_starts_the_turn_streams_it_whole_whatever_its_last_event_id(
    served, http
) -> None:
    url = served()
    session = await session_of(http, url)
    # a retry whose first attempt never started the turn still carries that attempt's id
    response = await streamed(http, url, session, "x", **{"Last-Event-ID": "9"})
    frames = frames_of(response.text)
    assert frames[0].name == "turn-started" and frames[0].id == 1
    assert frames[-1].name == "result"


async def test_a_reader_joining_with_another_since_gets_the_outcome_cut_for_it(
    served, http
) -> None:
    url = served(slow_agent)
    session = await session_of(http, url)
    await http.post(f"{url}/evals/sessions/{session}/turns", json={"message": "one"})
    path = f"{url}/evals/sessions/{session}/turns"
    headers = {**STREAM, "Idempotency-Key": "since-key"}
    first = asyncio.create_task(
        http.post(f"{path}?since=1", json={"message": "go"}, headers=headers)
    )
    await asyncio.sleep(0.2)  # the turn runs, its stream with since=1
    joined = await http.post(path, json={"message": "go"}, headers=headers)  # no since
    whole = frames_of(joined.text)[-1]
    delta = frames_of((await first).text)[-1]
    assert whole.name == delta.name == "result"
    assert whole.data.startswith('{"run":') and delta.data.startswith('{"delta":')
    assert decode_run(whole.data.encode()).turns == 2


async def test_an_object_whose_async_call_yields_streams(served, http) -> None:
    class Agent:
        async def __call__(self, message: str, history: list[Any], ctx: TurnContext) -> Any:
            yield "streamed "
            yield "by __call__"

    url = served(Agent())
    session = await session_of(http, url)
    frames = frames_of((await streamed(http, url, session, "hi")).text)
    assert [f.name for f in frames].count("text-delta") == 2
    assert decode_run(frames[-1].data.encode()).reply == "streamed by __call__"


async def test_a_stream_waiting_for_its_keys_turn_starts_at_once_and_keeps_alive(
    served, http
) -> None:
    async def slow(message: str) -> str:
        await asyncio.sleep(1.0)
        return f"slow {message}"

    url = served(slow, limits=Limits(stream_heartbeat=0.2))
    session = await session_of(http, url)
    path = f"{url}/evals/sessions/{session}/turns"
    key = {"Idempotency-Key": "waited"}
    first = asyncio.create_task(http.post(path, json={"message": "a"}, headers=key))
    await asyncio.sleep(0.1)  # the first attempt runs, unstreamed
    began = time.monotonic()
    headers = {**STREAM, **key}
    async with http.stream("POST", path, json={"message": "a"}, headers=headers) as waiting:
        assert time.monotonic() - began < 0.5  # headers at once, not after the turn
        text = (await waiting.aread()).decode()
    frames = frames_of(text)
    assert [f.data for f in frames if f.name == ":"].count(": keep-alive") >= 2
    assert frames[-1].name == "result"
    assert frames[-1].data.encode() == (await first).content
