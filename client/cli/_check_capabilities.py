"""The checks of ``evalport check`` that run only when ``/health`` lists their capability
(``delta``, ``content-parts``, ``streaming``, ``interrupts``). See ARCHITECTURE.md,
"evalport check".
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Protocol

import httpx
import msgspec
from evalport.protocol import (
    EVENT_STREAM,
    FINAL_EVENTS,
    STREAM_EVENTS,
    AgentRun,
    ProblemType,
    ProtocolError,
    RunDelta,
    apply_delta,
    decode_answer,
    decode_event,
    settled_turns,
)
from httpx_sse import EventSource, ServerSentEvent

from ._check_answers import CheckFailed, enveloped_run, expect, problem, validate_run


class Checker(Protocol):
    """What these checks use of the checker of ``evalport check`` (``_Checker``)."""

    client: httpx.AsyncClient
    message: str
    run: AgentRun | None
    first: AgentRun | None

    def session_url(self, session_id: str | None = None) -> str: ...

    async def decide(self, run: AgentRun, number: int) -> tuple[AgentRun, int]: ...


async def delta(checker: Checker) -> str:
    first, last = checker.first, checker.run
    assert first is not None and last is not None  # (the turns passed)
    since = settled_turns(first)
    url = f"{checker.session_url()}?since={since}"
    response = expect(await checker.client.get(url), 200)
    answer = decode_answer(response.content)
    if not isinstance(answer, RunDelta):
        raise CheckFailed(f"/health lists 'delta' but ?since={since} answered the whole run")
    try:
        run = apply_delta(first, answer)
    except ProtocolError as error:
        raise CheckFailed(str(error)) from None
    if msgspec.to_builtins(run) != msgspec.to_builtins(last):
        raise CheckFailed("the first turn's run with the delta differs from the second's")
    return f"since={since}: {len(response.content)} bytes, reassembled run equal"


async def content_parts(checker: Checker) -> str:
    url = checker.session_url() + "/turns"
    image = {"type": "image", "mediaType": "image/png", "data": _b64(CHECK_PNG)}
    body = {"message": checker.message, "parts": [image]}
    response = expect(await checker.client.post(url, json=body), 200)
    run = enveloped_run(response)
    validate_run(run, 3)
    recorded = [part for part in run.user_parts or () if part.turn == 3]
    if [part.type for part in recorded] != ["text", "image"]:
        raise CheckFailed(f"userParts of turn 3 should be text, image: {recorded!r}"[:300])
    png = recorded[1]
    if png.media_type != "image/png" or png.size != len(CHECK_PNG):
        raise CheckFailed(f"the image part is recorded as {png.media_type}, {png.size} bytes")
    if png.sha256 != hashlib.sha256(CHECK_PNG).hexdigest() or png.data not in (None, CHECK_PNG):
        raise CheckFailed("the image part's sha256 or bytes differ from those sent")
    checker.run, _ = await checker.decide(run, 3)
    bad = {"parts": [{"type": "image", "data": _b64(CHECK_PNG)}]}
    refused = await checker.client.post(url, json=bad)
    refusal = problem(refused, 422, ProblemType.INVALID_BODY)
    if "$.parts[0]" not in [error.get("path") for error in refusal.get("errors") or []]:
        raise CheckFailed("a part without its mediaType should be a 422 naming $.parts[0]")
    return "an inline image recorded with its sha256; a bad part is a 422 naming it"


async def interrupts(checker: Checker) -> str:
    """What a client's answer to an interrupt meets on a session that waits for none: no
    agent can be made to interrupt by a message every agent understands, so the check
    sends the answers the protocol defines and reads the problems it documents. An
    answer decision without its answer is wrong twice (a bad body, nothing pending); the
    protocol does not say which a server reads first, so either problem passes."""
    url = checker.session_url() + "/approvals"
    answer = {"decision": "answer", "answer": {"from": "evalport check"}}
    response = await checker.client.post(url, json={"decisions": {CHECK_INTERRUPT: answer}})
    problem(response, 409, ProblemType.NOT_SUSPENDED)
    unanswered = {"decisions": {CHECK_INTERRUPT: {"decision": "answer"}}}
    refused = await checker.client.post(url, json=unanswered)
    if refused.status_code == 409:
        problem(refused, 409, ProblemType.NOT_SUSPENDED)
        return "an answer with nothing pending is a 409 problem, one without its answer too"
    refusal = problem(refused, 422, ProblemType.INVALID_BODY)
    named = f'$.decisions["{CHECK_INTERRUPT}"]'
    if named not in [error.get("path") for error in refusal.get("errors") or []]:
        raise CheckFailed(f"an answer decision without its answer should be a 422 naming {named}")
    return "an answer with nothing pending is a 409 problem; one without its answer a 422"


CHECK_INTERRUPT = "evalport-check-interrupt"
"""The interrupt id the interrupts check answers (no session ever has it pending)."""

# A 1x1 PNG: what the content parts check sends inline.
CHECK_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="
)


async def streaming(checker: Checker) -> str:
    assert checker.run is not None  # (the turns passed)
    url = checker.session_url() + "/turns"
    body = {"message": checker.message}
    number = checker.run.turns + 1
    key = {"Idempotency-Key": f"evalport-check-{uuid.uuid4()}"}
    events = await _stream(checker, url, body, key)
    final = _in_order(events, number, 1)
    plain = expect(await checker.client.post(url, json=body, headers=key), 200)
    if final.data.encode() != plain.content:
        raise CheckFailed("the final event's data differs from the answer without the stream")
    checker.run, _ = await checker.decide(enveloped_run(plain), number)
    # a stream dropped after its first event, resumed by its key and Last-Event-ID
    number, key = checker.run.turns + 1, {"Idempotency-Key": f"evalport-check-{uuid.uuid4()}"}
    first = (await _stream(checker, url, body, key, stop_after=1))[0]
    if not first.id:
        raise CheckFailed(f"the {first.event!r} event carries no id to resume from")
    rest = await _stream(checker, url, body, {**key, "Last-Event-ID": first.id})
    resumed = _in_order(rest, number, int(first.id) + 1, resumed=True)
    plain = expect(await checker.client.post(url, json=body, headers=key), 200)
    if resumed.data.encode() != plain.content:
        raise CheckFailed("the resumed stream's final event differs from the answer")
    run = enveloped_run(plain)
    validate_run(run, number)
    checker.run, _ = await checker.decide(run, number)
    return (
        f"{len(events) - 1} events then the answer; a stream dropped after event {first.id} "
        f"resumed with {len(rest) - 1} more and the same answer"
    )


async def _stream(
    checker: Checker,
    url: str,
    body: dict[str, str],
    headers: dict[str, str],
    *,
    stop_after: int | None = None,
) -> list[ServerSentEvent]:
    """A streamed turn's events (the first ``stop_after`` only: then the stream drops)."""
    sent = {**headers, "Accept": EVENT_STREAM}
    events: list[ServerSentEvent] = []
    async with checker.client.stream("POST", url, json=body, headers=sent) as response:
        if response.status_code != 200:
            await response.aread()
            expect(response, 200)
        media = response.headers.get("content-type", "").split(";")[0].strip()
        if media != EVENT_STREAM:
            raise CheckFailed(f"/health lists 'streaming' but the turn answered {media!r}")
        async for event in EventSource(response).aiter_sse():
            events.append(event)
            if len(events) == stop_after or event.event in FINAL_EVENTS:
                break
    if not events:
        raise CheckFailed("the stream ended without an event")
    return events


def _in_order(
    events: list[ServerSentEvent], turn: int, first_id: int, *, resumed: bool = False
) -> ServerSentEvent:
    """The final event of ``events``, once each before it is known, decodes as its name
    says and has the next id (a fresh stream starts with ``turn-started``)."""
    final = events[-1]
    if final.event != "result":
        raise CheckFailed(
            f"the stream ended with {final.event!r}, not 'result': {final.data}"[:300]
        )
    if not resumed and (not events[:-1] or events[0].event != "turn-started"):
        raise CheckFailed(f"the stream starts with {events[0].event!r}, not 'turn-started'")
    for index, event in enumerate(events[:-1]):
        if event.event not in STREAM_EVENTS:
            raise CheckFailed(f"event {event.event!r} is not a protocol event")
        try:
            decoded = decode_event.decode(event.data)
        except msgspec.DecodeError as error:
            raise CheckFailed(f"the data of a {event.event!r} event: {error}") from None
        if not isinstance(decoded, STREAM_EVENTS[event.event]):
            raise CheckFailed(f"a {event.event!r} event's data names another event")
        if event.id != str(first_id + index):
            raise CheckFailed(f"event {index + 1} has id {event.id!r}, expected {first_id + index}")
        named = getattr(decoded, "turn", turn)
        if named != turn:
            raise CheckFailed(f"a {event.event!r} event names turn {named}, not {turn}")
    return final


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
