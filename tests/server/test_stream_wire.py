"""Streamed turns as other people's SSE clients read them (issue 39, items 2 to 6): line
separators escaped in frames, a chunk the stream cannot encode, a ``Last-Event-ID`` of
non-ASCII digits, readers that share the buffer and an event larger than it, ``Accept``
negotiated as HTTP says, and keep-alives that no client reads as an event."""

from __future__ import annotations

import asyncio
import threading
import tomllib
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from evalport.protocol import (
    FINAL_EVENTS,
    STREAM_EVENTS,
    TextDelta,
    decode_event,
    decode_run,
)
from evalport.protocol.runtime import TurnContext
from evalport.server import EvalAdapter, Limits
from evalport.server._records import Outcome
from evalport.server._streams import TurnStream
from httpx_sse import EventSource
from packaging.requirements import Requirement
from support.servers import running_server

STREAM = {"Accept": "text/event-stream"}
SEPARATORS = "one\u2028two\u2029three\x85four"
PIECE = 65_536  # the most a reader holds of its own (docs/expose.md, the limits table)


def app_client(agent: Any, **options: Any) -> httpx.AsyncClient:
    app = EvalAdapter(agent, token=None, **options).app()
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def turns_path(client: httpx.AsyncClient) -> str:
    created = await client.post("/evals/sessions", json={})
    assert created.status_code == 201, created.text
    return f"/evals/sessions/{created.json()['sessionId']}/turns"


def events_split_on_every_line_break(raw: bytes) -> list[dict[str, str]]:
    """The events of ``raw`` as httpx-sse 0.4.0 and 0.4.1 read them: lines split with
    ``str.splitlines``, which also breaks on U+2028, U+2029 and U+0085."""
    events, fields = [], {}
    for line in raw.decode().splitlines():
        if not line:
            if fields:
                events.append(fields)
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = fields.get(name, "") + value
    return events


# -- 2. line separators --------------------------------------------------------------------


async def test_line_separators_are_escaped_so_every_sse_parser_reads_them() -> None:
    async def agent(message: str, history: list[Any], ctx: TurnContext) -> Any:
        yield SEPARATORS

    async with app_client(agent) as client:
        path = await turns_path(client)
        raw = (await client.post(path, json={"message": "hi"}, headers=STREAM)).content
        unstreamed = await client.post(path, json={"message": "hi"})
    for character in ("\u2028", "\u2029", "\x85"):
        assert character.encode() not in raw  # written as a JSON escape in every frame
    events = events_split_on_every_line_break(raw)
    deltas = [decode_event.decode(e["data"]) for e in events if e["event"] == "text-delta"]
    assert [delta.text for delta in deltas if isinstance(delta, TextDelta)] == [SEPARATORS]
    [result] = [e for e in events if e["event"] == "result"]
    assert decode_run(result["data"].encode()).reply == SEPARATORS
    assert decode_run(unstreamed.content).reply == SEPARATORS  # (the next turn, unstreamed)


def test_the_client_extra_requires_an_httpx_sse_that_splits_lines_as_sse_does() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    [requirement] = [
        Requirement(line)
        for line in pyproject["project"]["optional-dependencies"]["client"]
        if Requirement(line).name == "httpx-sse"
    ]
    # 0.4.2 split lines on CR and LF only (0.4.0 and 0.4.1 on U+2028, U+2029, U+0085 too);
    # 0.4.3 fixed the slowness of that parsing
    assert not requirement.specifier.contains("0.4.1")
    assert not requirement.specifier.contains("0.4.2")
    assert requirement.specifier.contains("0.4.3")


# -- 3. a chunk the stream cannot encode ----------------------------------------------------


async def test_a_chunk_with_a_lone_surrogate_streams_replaced_and_the_turn_completes() -> None:
    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        ctx.text_delta("half an emoji \ud83d")  # a provider split it between two chunks
        ctx.text_delta(" and the rest")
        return "done"

    async with app_client(agent) as client:
        path = await turns_path(client)
        unstreamed = decode_run((await client.post(path, json={"message": "a"})).content)
        raw = (await client.post(path, json={"message": "b"}, headers=STREAM)).content
    assert unstreamed.status == "completed" and unstreamed.reply == "done"
    events = events_split_on_every_line_break(raw)
    run = decode_run(events[-1]["data"].encode())
    assert events[-1]["event"] == "result"
    assert run.status == "completed" and run.reply == "done"
    assert not run.steps[-1].errors
    texts = [decode_event.decode(e["data"]).text for e in events if e["event"] == "text-delta"]
    assert texts == ["half an emoji \ufffd", " and the rest"]
    ids = [int(e["id"]) for e in events if "id" in e]
    assert ids == list(range(1, len(ids) + 1))  # no id used up by the chunk


async def test_a_reader_resuming_past_a_replaced_chunk_reads_every_later_event() -> None:
    stream = TurnStream(limit=1 << 20, heartbeat=60)
    stream.tell(TextDelta(turn=1, text="a", chars=1))
    stream.tell(TextDelta(turn=1, text="\udc00", chars=1))
    stream.tell(TextDelta(turn=1, text="b", chars=1))
    stream.finish(Outcome(200, b'{"run":{}}'))
    read = b"".join([chunk async for chunk in stream.frames(1)])
    events = events_split_on_every_line_break(read)
    assert [e.get("id") for e in events] == ["2", "3", None]
    assert [decode_event.decode(e["data"]).text for e in events[:2]] == ["\ufffd", "b"]


# -- 4. Last-Event-ID ------------------------------------------------------------------------


@pytest.mark.parametrize("digit", [b"\xb2", b"\xb3", b"\xb9", b"1\xb2"])
async def test_a_last_event_id_of_latin_1_superscript_digits_is_a_422(digit: bytes) -> None:
    async def agent(message: str) -> str:
        return "ok"

    async with app_client(agent) as client:
        path = await turns_path(client)
        for headers in ([*STREAM.items()], []):
            answer = await client.post(
                path, json={"message": "hi"}, headers=[*headers, (b"Last-Event-ID", digit)]
            )
            assert answer.status_code == 422, answer.text
            assert answer.json()["errors"][0]["path"] == "header:Last-Event-ID"


# -- 5. readers share the buffer; an event larger than it -----------------------------------


async def test_readers_resuming_one_turn_share_its_buffer() -> None:
    limit = 1 << 20
    stream = TurnStream(limit=limit, heartbeat=60)
    for index in range(128):  # the buffer full: 128 frames of about 8 KiB
        stream.tell(TextDelta(turn=1, text=f"{index:04d}" + "x" * 8000, chars=8004))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        readers = [stream.frames(0) for _ in range(200)]
        held = [await anext(reader) for reader in readers]  # readers that never read on
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(len(chunk) <= PIECE for chunk in held)
    assert grown < limit + 200 * 2 * PIECE, grown  # not 200 copies of the buffer
    for reader in readers:
        await reader.aclose()


async def test_an_event_larger_than_the_buffer_is_not_kept_and_its_readers_overflow() -> None:
    limit = 4096
    stream = TurnStream(limit=limit, heartbeat=60)
    stream.tell(TextDelta(turn=1, text="small", chars=5))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        big = TextDelta(turn=1, text="y" * 50_000, chars=50_000)
        stream.tell(big)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 50_000 + limit  # the event itself, not its frame too
    stream.tell(TextDelta(turn=1, text="after", chars=5))
    stream.finish(Outcome(200, b'{"run":{}}'))
    behind = events_split_on_every_line_break(b"".join([c async for c in stream.frames(1)]))
    assert [e["event"] for e in behind] == ["overflow"]  # it never gets event 2, so it knows
    past = events_split_on_every_line_break(b"".join([c async for c in stream.frames(2)]))
    assert [(e["event"], e.get("id")) for e in past] == [("text-delta", "3"), ("result", None)]


async def test_a_frame_larger_than_a_piece_goes_out_in_pieces_of_the_same_bytes() -> None:
    stream = TurnStream(limit=1 << 20, heartbeat=60)
    stream.tell(TextDelta(turn=1, text="z" * (3 * PIECE), chars=3 * PIECE))
    stream.finish(Outcome(200, b'{"run":{}}'))
    chunks = [chunk async for chunk in stream.frames(0)]
    assert all(len(chunk) <= PIECE for chunk in chunks) and len(chunks) > 3
    [delta, result] = events_split_on_every_line_break(b"".join(chunks))
    assert decode_event.decode(delta["data"]).text == "z" * (3 * PIECE)
    assert result["event"] == "result"


# -- 6. Accept; keep-alives ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "streams"),
    [
        ("text/event-stream", True),
        ("TEXT/EVENT-STREAM", True),
        ("Text/Event-Stream; Q=1", True),
        ("text/event-stream;q=0.5", True),
        ("application/json;q=0.5, text/event-stream", True),
        ("text/event-stream, */*;q=0.1", True),
        ("text/event-stream;q=0.5, */*", False),
        ("text/event-stream;q=high", False),
        ("text/event-stream;q=0", False),
        ("text/event-stream; q=0.000", False),
        ("application/json, text/event-stream;q=0.5", False),
        ("application/json", False),
        ("*/*", False),
        ("text/*", False),
        ("text/event-streams", False),
        ("application/x-text/event-stream", False),
    ],
)
async def test_accept_is_negotiated_as_http_says(accept: str, streams: bool) -> None:
    async def agent(message: str) -> str:
        return "ok"

    async with app_client(agent) as client:
        path = await turns_path(client)
        answer = await client.post(path, json={"message": "hi"}, headers={"Accept": accept})
    assert answer.status_code == 200, answer.text
    kind = answer.headers["content-type"]
    assert kind.startswith("text/event-stream" if streams else "application/json"), kind


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def test_keep_alives_are_no_event_to_httpx_sse(http: httpx.AsyncClient) -> None:
    heard = threading.Event()  # the test heard a keep-alive: the agent may end its turn

    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        ctx.text_delta("first ")
        while not heard.is_set():
            await asyncio.sleep(0.01)
        return "first done"

    app = EvalAdapter(agent, token=None, limits=Limits(stream_heartbeat=0.05)).app()
    with running_server(app) as url:
        created = await http.post(f"{url}/evals/sessions", json={})
        path = f"{url}/evals/sessions/{created.json()['sessionId']}/turns"
        raw = b""
        async with http.stream("POST", path, json={"message": "hi"}, headers=STREAM) as answer:
            async for chunk in answer.aiter_bytes():
                raw += chunk
                if b": keep-alive" in raw:
                    heard.set()
            kind = answer.headers["content-type"]
    assert heard.is_set() and b": keep-alive\n" in raw
    read = httpx.Response(200, headers={"content-type": kind}, content=raw)
    events = list(EventSource(read).iter_sse())
    names = [event.event for event in events]
    assert all(name in STREAM_EVENTS or name in FINAL_EVENTS for name in names), names
    assert names[-1] == "result" and all(event.data for event in events)
    assert msgspec.json.decode(events[-1].data)["run"]["reply"] == "first done"
