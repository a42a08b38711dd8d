"""Streamed turns on the server: the frames of one turn kept for its readers, and the
endpoint's half (``Accept``, ``Last-Event-ID``, the SSE answer). Memory is bounded by
``stream_buffer_bytes`` whatever the readers do (ARCHITECTURE.md, "Streamed turns").
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from operator import itemgetter
from typing import Any, Final, NamedTuple

import msgspec
from evalport.protocol import (
    EVENT_STREAM,
    AgentRun,
    ApprovalRequested,
    FieldError,
    InterruptRequested,
    ProblemType,
    Step,
    StepCompleted,
    StreamEvent,
    StreamOverflow,
    ToolCompleted,
    ToolExecution,
    ToolStarted,
    TurnFailed,
    encode,
    event_name,
)
from starlette.types import Scope, Send

from ._problems import HTTPProblem, problem_body
from ._records import Outcome, RunPolicy
from ._standalone import internal_problem, safe_instance

HEARTBEAT: Final = b": keep-alive\n"
"""A comment line alone: a blank line after it is an empty event to some parsers."""

PIECE: Final = 65_536
"""The most a reader sends at once, so the most it holds of its own."""

# What JSON leaves raw and some SSE parsers split lines on, as its JSON escape (in UTF-8
# these bytes are only ever these characters, and in JSON only ever inside a string).
_SEPARATORS: Final = (
    (b"\xe2\x80\xa8", b"\\u2028"),
    (b"\xe2\x80\xa9", b"\\u2029"),
    (b"\xc2\x85", b"\\u0085"),
)


def frame(name: str, data: bytes, event_id: int | None = None) -> bytes:
    """One Server-Sent Event: its id, name and one line of JSON data, read alike by every
    parser (see ARCHITECTURE.md, "Streamed turns")."""
    for raw, escaped in _SEPARATORS:
        data = data.replace(raw, escaped)
    head = b"" if event_id is None else b"id: %d\n" % event_id
    return b"%sevent: %s\ndata: %s\n\n" % (head, name.encode(), data)


def final_frame(outcome: Outcome) -> bytes:
    """The last frame: the outcome's body as ``result`` (200) or ``problem`` (no id: there
    is nothing after it to resume)."""
    return frame("problem" if outcome.is_problem else "result", outcome.body)


class TurnStream:
    """The frames of one streaming turn (see ARCHITECTURE.md, "Streamed turns"); ``since``: what its
    request asked the outcome cut at."""

    __slots__ = (
        "_bytes",
        "_ended",
        "_final",
        "_frames",
        "_heartbeat",
        "_last",
        "_limit",
        "_policy",
        "_pulse",
        "since",
    )

    def __init__(
        self,
        limit: int,
        heartbeat: float,
        policy: RunPolicy | None = None,
        since: int | None = None,
    ) -> None:
        self.since = since
        self._limit = limit
        self._heartbeat = heartbeat
        self._policy = policy
        self._frames: deque[tuple[int, bytes]] = deque()
        self._bytes = 0
        self._last = 0
        self._final: bytes | None = None
        self._ended: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._pulse = asyncio.Event()

    @property
    def done(self) -> bool:
        return self._final is not None

    def tell(self, event: StreamEvent) -> None:
        """Keep ``event`` as the next frame (a turn's context calls this)."""
        if self._final is not None:
            return
        try:
            data = self._encoded(event)
        except (
            UnicodeEncodeError
        ):  # a lone surrogate: as U+FFFD (see ARCHITECTURE.md, "Streamed turns")
            data = self._encoded(_mended(event))
        self._last += 1
        data = frame(event_name(event), data, self._last)
        if len(data) > self._limit:  # not kept, nor anything that would stream past it
            self._frames.clear()
            self._bytes = 0
        else:
            self._frames.append((self._last, data))
            self._bytes += len(data)
            while self._bytes > self._limit:
                self._bytes -= len(self._frames.popleft()[1])
        self._pulse.set()
        self._pulse.clear()

    def _encoded(self, event: StreamEvent) -> bytes:
        return encode(event if self._policy is None else _redacted(event, self._policy))

    def finish(self, outcome: Outcome) -> None:
        """End the stream with the turn's ``outcome`` (its body as sent without streaming)."""
        if self._final is None:
            self._final = final_frame(outcome)
            self._ended.set_result(outcome)
            self._pulse.set()

    def when_ended(self, callback: Callable[[Outcome], None]) -> None:
        """Call ``callback`` with the turn's outcome once the stream ends (a traced turn's
        span ends so)."""
        self._ended.add_done_callback(lambda ended: callback(ended.result()))

    def fail(self, problem_type: str, detail: str) -> None:
        """End the stream with a problem (the turn failed in the server)."""
        self.finish(Outcome(ProblemType.STATUS[problem_type], problem_body(problem_type, detail)))

    async def frames(self, after: int = 0) -> AsyncIterator[bytes]:
        """The frames after id ``after``, then the final one: the frames ready when the
        reader asks go out joined, up to :data:`PIECE` bytes at a time, each found by id in
        the frames kept when its turn comes."""
        cursor = after
        while True:
            if cursor < self._last:
                ready = self._ready(cursor)
                if ready is None:
                    yield _overflow(self._limit)
                    return
                cursor, chunk, ended = ready
                for piece in _pieces(chunk):
                    yield piece
                if ended:
                    return
            elif self._final is not None:
                for piece in _pieces(self._final):
                    yield piece
                return
            else:
                try:
                    async with asyncio.timeout(self._heartbeat):
                        await self._pulse.wait()
                except TimeoutError:
                    yield HEARTBEAT

    def _ready(self, cursor: int) -> tuple[int, bytes, bool] | None:
        """The id of the last kept frame from id ``cursor + 1`` on joined up to
        :data:`PIECE` bytes (a larger frame alone), the frames, and whether the final
        frame fitted after them; ``None`` if frame ``cursor + 1`` is not kept."""
        kept = self._frames
        index = bisect.bisect_left(kept, cursor + 1, key=_ID)
        if index == len(kept) or kept[index][0] != cursor + 1:
            return None
        cursor, chunk = kept[index]
        ready, size = [chunk], len(chunk)
        for next_id, data in itertools.islice(kept, index + 1, None):
            if size + len(data) > PIECE:
                break
            cursor, size = next_id, size + len(data)
            ready.append(data)
        final = self._final
        if final is not None and cursor == self._last and size + len(final) <= PIECE:
            return cursor, b"".join((*ready, final)), True
        return cursor, ready[0] if len(ready) == 1 else b"".join(ready), False


class StreamListener:
    """What a streamed turn's context tells its events to: its stream, until the turn is
    over (a context that suspends outlives the request, and must not keep the stream's
    frames alive while it waits)."""

    __slots__ = ("stream",)

    def __init__(self, stream: TurnStream) -> None:
        self.stream: TurnStream | None = stream

    def __call__(self, event: StreamEvent) -> None:
        if self.stream is not None:
            self.stream.tell(event)

    def cut(self) -> None:
        self.stream = None


class Streamed(NamedTuple):
    """A streamed turn's answer: its stream, read after event ``after``."""

    stream: TurnStream
    after: int

    async def send(self, send: Send) -> None:
        """Send the stream as it comes. A reader that went away is not watched for: the
        ASGI server drops what is sent to it, and the reading ends with the turn."""
        await send({"type": "http.response.start", "status": 200, "headers": _STREAM_HEAD})
        async for chunk in self.stream.frames(self.after):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


_STREAM_HEAD: Final = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),
]


def wants_stream(accept: str | None) -> bool:
    """Whether ``Accept`` asks for the stream, negotiated as RFC 9110 says (media types
    and parameter names are case-insensitive, ``q=0`` is "not acceptable"): the stream
    is named (``*/*`` and ``text/*`` do not stream: a client that reads a stream asks for
    it) with a weight above 0 and no lower than that of ``application/json``, the
    answer without it."""
    if accept is None or "event-stream" not in accept.lower():
        return False  # (most turns: no need to parse)
    weights: dict[str, float] = {}  # the first weight of each range (a repeat changes none)
    for element in accept.lower().split(","):
        media, *parameters = element.split(";")
        weight: float | None = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip() == "q":
                found = _QVALUE.fullmatch(value.strip())
                weight = float(found.group()) if found else None  # (malformed: ignored)
        if weight is not None:
            weights.setdefault(media.strip(), weight)
    stream = weights.get(EVENT_STREAM, 0.0)
    json = next((weights[media] for media in _JSON_RANGES if media in weights), 0.0)
    return stream > 0 and stream >= json


_QVALUE: Final = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")
_JSON_RANGES: Final = ("application/json", "application/*", "*/*")  # most specific first


def last_event_id(value: str | None) -> int:
    """``Last-Event-ID`` as the event number a resumed stream starts after (0: all): ASCII
    digits only (a header is read as Latin-1, whose superscripts ``str.isdigit`` takes)."""
    if value is None:
        return 0
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise HTTPProblem(
            ProblemType.INVALID_BODY,
            "The Last-Event-ID header must be the id of an event of this turn's stream.",
            errors=[FieldError(path="header:Last-Event-ID", message="an event id: 1, 2, ...")],
        )
    return int(value)


def end_stream(stream: TurnStream, scope: Scope, details: bool, job: asyncio.Task[Outcome]) -> None:
    """End ``stream`` with its turn's outcome, or the problem the turn ended with."""
    if job.cancelled():
        stream.fail(ProblemType.DRAINING, "The server stopped the turn; retry on another replica.")
        return
    error = job.exception()
    if error is None:
        stream.finish(job.result())
    elif isinstance(error, HTTPProblem):
        stream.finish(Outcome(error.status, error.body(safe_instance(scope))))
    else:
        try:
            raise error
        except Exception:  # logged with an error id, as an endpoint's failure is
            answer = internal_problem(scope, details=details)
        stream.finish(Outcome(answer.status_code, bytes(answer.body)))


_ID: Final = itemgetter(0)  # a kept frame's id


def _pieces(chunk: bytes) -> Iterator[bytes]:
    """``chunk`` as sent: itself, or slices of :data:`PIECE` bytes, each made when the
    reader sent the one before."""
    if len(chunk) <= PIECE:
        yield chunk
        return
    for start in range(0, len(chunk), PIECE):
        yield chunk[start : start + PIECE]


def _redacted(event: StreamEvent, policy: RunPolicy) -> StreamEvent:
    """``event`` as ``policy`` leaves the run it belongs to: its payload goes through the
    policy inside a run of its own (text deltas are the reply's text, kept as the run's
    reply is)."""
    if isinstance(event, StepCompleted):
        return StepCompleted(step=policy.apply(AgentRun(steps=[event.step])).steps[0])
    if isinstance(event, ToolStarted):
        call = ToolExecution(name=event.name, arguments=event.arguments)
        redacted = policy.apply(AgentRun(steps=[Step(tool_executions=[call])]))
        arguments = redacted.steps[0].tool_executions[0].arguments
        return msgspec.structs.replace(event, arguments=arguments)
    if isinstance(event, ToolCompleted):
        run = policy.apply(AgentRun(steps=[Step(tool_executions=[event.execution])]))
        return ToolCompleted(turn=event.turn, execution=run.steps[0].tool_executions[0])
    if isinstance(event, ApprovalRequested):
        run = policy.apply(AgentRun(pending_approvals=[event.approval]))
        return ApprovalRequested(approval=run.pending_approvals[0])
    if isinstance(event, InterruptRequested):
        run = policy.apply(AgentRun(pending_interrupts=[event.interrupt]))
        return InterruptRequested(interrupt=run.pending_interrupts[0])
    if isinstance(event, TurnFailed):
        run = policy.apply(AgentRun(steps=[Step(errors=[event.error])]))
        return TurnFailed(turn=event.turn, error=run.steps[0].errors[0])
    return event


def _mended(event: StreamEvent) -> StreamEvent:
    """``event`` with each lone surrogate in its strings as U+FFFD (a pair split in two
    code points joined), which UTF-8 and so the wire can hold."""
    return msgspec.convert(_mend(msgspec.to_builtins(event)), type(event))


def _mend(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_mend(key): _mend(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_mend(item) for item in value]
    return value


def _overflow(limit: int) -> bytes:
    event = StreamOverflow(
        detail=(
            "This reader fell behind the events the server keeps for a turn "
            f"(stream_buffer_bytes, serve --stream-buffer-bytes: {limit}; an event larger "
            "than that is not kept); the turn goes on: send the same request without the "
            "stream, with the same Idempotency-Key, for its outcome."
        ),
        kept_bytes=limit,
    )
    return frame("overflow", encode(event))
