"""Streamed turns on the server: the events of one turn, kept for the readers of its stream.

Rules (the wire's are in :mod:`evalport.protocol._stream`):

- A streaming turn has one :class:`TurnStream`. The turn's context tells it each event
  as the agent records it (:meth:`TurnStream.tell`, on the event loop); it encodes the
  event at once as one SSE frame with the next id, so what streams is what was recorded
  at that moment. The last frame is the turn's outcome (:meth:`TurnStream.finish`).
- Memory is bounded by ``Limits.stream_buffer_bytes``: the stream keeps the latest frames
  up to that many bytes (the oldest go first), whatever its readers do. A reader that
  falls behind the frames kept (a slow reader, or one resuming from an id no longer
  kept) gets an ``overflow`` frame and its stream ends; the turn runs on and stores its
  outcome, which a request without the stream (same key) reads.
- A reader (:meth:`TurnStream.frames`) starts after the id it names (``Last-Event-ID``,
  0 for all) and ends after the final frame; a comment frame goes out when nothing else
  has for ``Limits.stream_heartbeat`` seconds. A reader that disconnects leaves the turn
  alone (the turn is a job the stream only watches).
- A keyed turn's stream is reachable by repeats of its key while it runs in this process
  (:class:`~._records.InFlight`); a repeat that reaches another replica, or comes once
  the turn is over, gets the final frame alone.
- The endpoint's half: :func:`last_event_id` reads the ``Last-Event-ID`` header,
  :class:`Streamed` sends a stream as the request's answer, and :func:`end_stream` ends
  it with its turn's outcome, or the problem the turn ended with (an unexpected failure
  logged with an error id, as an endpoint's is).
- With a trace policy every event's payload goes through it, inside a run of its own,
  so a stream shows what the run shows (:func:`_redacted`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Final, NamedTuple

import msgspec
from evalport.protocol import (
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

HEARTBEAT: Final = b": keep-alive\n\n"


def frame(name: str, data: bytes, event_id: int | None = None) -> bytes:
    """One Server-Sent Event: its id, name and one line of JSON data."""
    head = b"" if event_id is None else b"id: %d\n" % event_id
    return b"%sevent: %s\ndata: %s\n\n" % (head, name.encode(), data)


def final_frame(outcome: Outcome) -> bytes:
    """The last frame: the outcome's body as ``result`` (200) or ``problem`` (no id: there
    is nothing after it to resume)."""
    return frame("problem" if outcome.is_problem else "result", outcome.body)


class TurnStream:
    """The frames of one streaming turn (see the module's rules); ``since``: what its
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
        name = event_name(event)
        if self._policy is not None:
            event = _redacted(event, self._policy)
        self._last += 1
        data = frame(name, encode(event), self._last)
        self._frames.append((self._last, data))
        self._bytes += len(data)
        while self._bytes > self._limit and len(self._frames) > 1:
            self._bytes -= len(self._frames.popleft()[1])
        self._pulse.set()
        self._pulse.clear()

    def finish(self, outcome: Outcome) -> None:
        """End the stream with the turn's ``outcome`` (its body as sent without streaming)."""
        if self._final is None:
            self._final = final_frame(outcome)
            self._ended.set_result(outcome)
            self._pulse.set()

    async def outcome(self) -> Outcome:
        """The turn's outcome, once the stream ends (what a traced turn draws)."""
        return await asyncio.shield(self._ended)

    def fail(self, problem_type: str, detail: str) -> None:
        """End the stream with a problem (the turn failed in the server)."""
        self.finish(Outcome(ProblemType.STATUS[problem_type], problem_body(problem_type, detail)))

    async def frames(self, after: int = 0) -> AsyncIterator[bytes]:
        """The frames after id ``after``, then the final one (see the module's rules):
        every frame ready when the reader asks goes in one chunk."""
        cursor = after
        while True:
            if cursor < self._last:
                kept = self._frames
                first = kept[0][0]
                if cursor + 1 < first:
                    yield _overflow(self._limit)
                    return
                ready = [kept[index][1] for index in range(cursor + 1 - first, len(kept))]
                cursor = self._last
                if self._final is not None:
                    ready.append(self._final)
                    yield b"".join(ready)
                    return
                yield b"".join(ready)
            elif self._final is not None:
                yield self._final
                return
            else:
                try:
                    async with asyncio.timeout(self._heartbeat):
                        await self._pulse.wait()
                except TimeoutError:
                    yield HEARTBEAT


class Relay:
    """What a streamed turn's context tells its events to: its stream, until the turn's
    request is over (a context that suspends outlives the request, and must not keep the
    stream's frames alive while it waits)."""

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


def last_event_id(value: str | None) -> int:
    """``Last-Event-ID`` as the event number a resumed stream starts after (0: all)."""
    if value is None:
        return 0
    if not value.isdigit() or len(value) > 18:
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


def _overflow(limit: int) -> bytes:
    event = StreamOverflow(
        detail=(
            "This reader fell behind the events the server keeps for a turn "
            f"(stream_buffer_bytes, serve --stream-buffer-bytes: {limit}); the turn goes "
            "on: send the same request without the stream, with the same Idempotency-Key, "
            "for its outcome."
        ),
        kept_bytes=limit,
    )
    return frame("overflow", encode(event))
