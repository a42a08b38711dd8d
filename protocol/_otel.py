"""Traces of a run, shared by the runner and the server: spans drawn as records, then sent.

Rules:

- A span is drawn once, as a :class:`SpanRecord` (ids, name, kind, times, attributes,
  events, status), from the run as it was recorded: after the fact, with the times the
  run recorded. Records go to one of two sinks: :class:`~._otlp.OtlpExporter` (``evalport
  run --otlp``, ``evalport serve --otlp``: evalport's own OTLP/HTTP protobuf encoder and
  background sender thread, needing no extra) or :class:`~._otel_api.ApiSink` (a
  ``TracerProvider``, ``tracing=True``: the records replayed into the OpenTelemetry API,
  which needs the ``otel`` extra). A sink opens the root span of a trial or a turn while
  it runs (:meth:`Sink.begin`) and takes it back with the records drawn under it and
  what is left to draw (:meth:`Sink.finish`).
- Spans follow OpenTelemetry's GenAI semantic conventions: a turn is an ``invoke_agent``
  span, each step the run recorded a ``chat`` span (its model, token usage and finish
  reason), each tool execution an ``execute_tool`` span (tool name, call id, and
  ``error.type`` when it failed). evalport's own attributes start with ``evalport.``.
- Spans are built only from a run that already passed a trace policy: what a span
  carries (tool arguments and results, messages, error texts) is what the reports show,
  digests included, and nothing else.
- The context crosses the wire as a W3C ``traceparent`` header: a root span continues
  the trace the header names (a new trace without one, or with a malformed one) and
  keeps its sampled flag; a span whose parent was not sampled is not sent.
- A recorded time OTLP cannot carry (before 1970, such as a Go agent's zero
  ``time.Time``, ``0001-01-01T00:00:00Z``, or after 2554) counts as not recorded: its
  span is timed as a span without that time is. A step or tool execution with no start
  starts when its root span ended (the time the trial or turn handed it over, not the
  time it was drawn, which may be seconds later, in the exporter's thread); one with no
  end ends when it started.
- What a trial or a turn leaves to draw is handed to the sink as a :class:`Draw` (the
  run's JSON as it left the trace policy or the service, and what to draw from it), not
  as records: :func:`draw` turns it into records, wherever the sink calls it (in its
  background thread for :class:`~._otlp.OtlpExporter`, a batch at a time, inline for
  :class:`~._otel_api.ApiSink`), so the trial or turn itself pays for none of it.
- Tracing never fails what it traces: spans that cannot be drawn, encoded or replayed
  are dropped and logged on ``evalport.tracing`` (:func:`failed`), and the trial or
  turn goes on as it would untraced.
"""

from __future__ import annotations

import datetime
import logging
import random
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, suppress
from typing import Any, Final, Protocol

import msgspec

from ._codec import arguments_map
from ._models import RunStatus, StepType
from ._policy import TracePolicy
from ._problems import ProtocolError

logger = logging.getLogger("evalport.tracing")

INTERNAL: Final = 1
SERVER: Final = 2
CLIENT: Final = 3
"""Span kinds, numbered as OTLP numbers them."""


class SpanEvent(msgspec.Struct, gc=False):
    name: str
    time: int
    attributes: dict[str, Any]


class SpanRecord(msgspec.Struct, gc=False):
    """One span as evalport draws it; ``parent_id`` 0 is a root; times in ns since the epoch."""

    trace_id: int
    span_id: int
    parent_id: int
    name: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[SpanEvent] = msgspec.field(default_factory=list)
    error: bool = False
    """Status ``ERROR`` (unset otherwise)."""


class Draw(msgspec.Struct, gc=False):
    """What is left to draw under a root span, handed to the sink as it is (see the
    rules): ``run``, a run's JSON (a trial's run, or a turn response's body); ``turn`` 0
    draws each of its turns as an ``invoke_agent`` client span with their steps (the
    runner's view), ``turn`` n draws only that turn's steps but its first ``drawn``, and
    sets the turn's attributes on the root span (the service's view); ``safe``: apply
    :meth:`~evalport.protocol.TracePolicy.safe` to what the spans show first. The JSON is carried
    as it is (a :class:`msgspec.Raw`: handing it over copies and checks nothing)."""

    run: msgspec.Raw
    agent: str | None = None
    turn: int = 0
    drawn: int = 0
    safe: bool = False


class OpenSpan:
    """A root span while its trial or turn runs: its record (filled in as it goes), its W3C
    trace flags, and the sink's own handle (the live OpenTelemetry span of an ApiSink)."""

    __slots__ = ("flags", "handle", "record")

    def __init__(self, record: SpanRecord, flags: int, handle: Any = None) -> None:
        self.record = record
        self.flags = flags
        self.handle = handle

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 1)

    @property
    def traceparent(self) -> str:
        """The W3C ``traceparent`` value naming this span as the parent."""
        return f"00-{self.record.trace_id:032x}-{self.record.span_id:016x}-{self.flags:02x}"


class Sink(Protocol):
    """Where drawn spans go (see the rules)."""

    def begin(
        self, name: str, kind: int, traceparent: str | None, attributes: dict[str, Any]
    ) -> OpenSpan: ...

    def current(self, span: OpenSpan) -> AbstractContextManager[Any] | None:
        """What makes ``span`` the current span while its trial or turn runs (``None``:
        nothing to do, no live span)."""

    def finish(
        self, span: OpenSpan, children: list[SpanRecord], material: Draw | None = None
    ) -> None:
        """Take ``span`` back with ``children`` and what ``material`` draws under it."""


def failed(what: str, error: BaseException) -> None:
    """Log that ``what`` failed with ``error`` and its spans were dropped (see the rules);
    the error's text may carry a payload: its type only, but at debug level."""
    logger.warning("%s failed (%s): its spans were dropped", what, type(error).__name__)
    logger.debug("%s failed", what, exc_info=error)


def new_id(bits: int) -> int:
    """A random non-zero span (64) or trace (128) id."""
    return random.getrandbits(bits) or 1


_TRACEPARENT: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def remote_parent(value: str | None) -> tuple[int, int, int] | None:
    """Trace id, span id and trace flags of a W3C ``traceparent``, or ``None`` (absent or
    malformed: a version ``ff``, extra fields in version ``00``, ids all zeros)."""
    found = _TRACEPARENT.fullmatch(value.strip()) if value else None
    if found is None:
        return None
    version, trace, span, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    trace_id, span_id = int(trace, 16), int(span, 16)
    if not trace_id or not span_id:
        return None
    return trace_id, span_id, int(flags, 16)


def root_record(
    name: str, kind: int, traceparent: str | None, attributes: dict[str, Any]
) -> tuple[SpanRecord, int]:
    """A root span's record starting now, continuing ``traceparent``; and its trace flags
    (the parent's, or sampled)."""
    parent = remote_parent(traceparent)
    trace_id, parent_id, flags = parent if parent else (new_id(128), 0, 1)
    now = time.time_ns()
    record = SpanRecord(trace_id, new_id(64), parent_id, name, kind, now, now, attributes)
    return record, flags


def child(
    parent: SpanRecord, name: str, kind: int, start: int, end: int, attributes: dict[str, Any]
) -> SpanRecord:
    return SpanRecord(
        parent.trace_id, new_id(64), parent.span_id, name, kind, start, end, attributes
    )


LATEST: Final = 2**64
"""The first time, in ns since the epoch, that OTLP cannot carry (in the year 2554)."""


def nanos(stamp: str | None) -> int | None:
    """Nanoseconds since the epoch of an ISO 8601 time the run recorded, or ``None`` (none,
    unreadable, or outside what OTLP carries: see the rules)."""
    if not stamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    value = int(moment.timestamp() * 1_000_000) * 1000
    return value if 0 <= value < LATEST else None


_JSON: Final = msgspec.json.Encoder(enc_hook=str)


def text(value: Any) -> str:
    """A recorded value as span attribute text: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return _JSON.encode(value).decode()


class _View(msgspec.Struct, kw_only=True, rename="camel", gc=False):
    """Base of :class:`RunView`: the fields of the run model that spans show, and no more."""


class UsageView(msgspec.Struct, frozen=True, gc=False):
    input: int = 0
    output: int = 0


class CallView(_View):
    id: str | None = None
    name: str = ""


class ExecutionView(_View):
    name: str = ""
    tool_call_id: str | None = None
    arguments: Any = msgspec.field(default_factory=dict)
    has_error: bool = False
    error: Any = None
    result: Any = None
    started_at: str | None = None
    completed_at: str | None = None

    def __post_init__(self) -> None:
        """Read as :func:`~._codec.decode_run` reads an execution: an error text makes it
        failed, and arguments recorded as a JSON string are the map it holds (a string
        that holds none is kept as it is, digested whole under the safe policy)."""
        if self.error is not None and self.error != "":
            self.has_error = True
        if type(self.arguments) is str:
            with suppress(ProtocolError):
                self.arguments = arguments_map(self.arguments, "arguments")


class ErrorView(_View):
    error_class: str | None = msgspec.field(default=None, name="class")
    type: str | None = None


class ProfileView(_View):
    model: str | None = None


class StepView(_View):
    turn: int = 0
    index: int = 0
    type: str = StepType.FINAL_RESPONSE
    requested_tool_calls: list[CallView] = msgspec.field(default_factory=list)
    tool_executions: list[ExecutionView] = msgspec.field(default_factory=list)
    finish_reason: str | None = None
    usage: UsageView = UsageView()
    started_at: str | None = None
    completed_at: str | None = None
    errors: list[ErrorView] = msgspec.field(default_factory=list)


class RunView(_View):
    """A run as spans draw it, the runner's and the service's: decoded from the run's JSON
    with only the fields its spans show (a fifth of the time of a whole
    :class:`~evalport.protocol.AgentRun`)."""

    reply: str = ""
    status: str = RunStatus.PENDING
    turns: int = 0
    steps: list[StepView] = msgspec.field(default_factory=list)
    llm_profile: ProfileView | None = None
    session_id: str | None = None
    user_messages: list[str] = msgspec.field(default_factory=list)


class _RunViewOrEnvelope(RunView):
    """A bare run, or a turn response's ``{"run": run}``: one decode serves both."""

    run: RunView | None = None


_decode_view: Final = msgspec.json.Decoder(_RunViewOrEnvelope).decode


def decode_view(data: bytes | msgspec.Raw) -> RunView:
    """The :class:`RunView` of a run's JSON, bare or as a turn response's ``{"run": ...}``
    (``msgspec.DecodeError`` for what is no run)."""
    found = _decode_view(data)
    return found.run if found.run is not None else found


_SAFE: Final = TracePolicy.safe()


def _redact(steps: list[StepView]) -> None:
    """Apply :meth:`~evalport.protocol.TracePolicy.safe` to what the spans of ``steps`` show
    of their payloads (tool arguments, results and errors; the rest stays in clear under
    it), in place."""
    for step in steps:
        for execution in step.tool_executions:
            name = execution.name
            execution.arguments = _SAFE.redact_arguments(execution.arguments, name)
            execution.result = _SAFE.redact_value(execution.result, name)
            execution.error = _SAFE.redact_error(execution.error, name)


def turn_steps(run: RunView, turn: int) -> list[StepView]:
    return [step for step in run.steps if step.turn == turn]


def turn_attributes(run: RunView, turn: int, agent: str | None) -> dict[str, Any]:
    """The GenAI attributes of the ``invoke_agent`` span of ``turn`` (1-based)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "evalport.turn": turn,
    }
    if agent:
        attributes["gen_ai.agent.name"] = agent
    if run.session_id:
        attributes["evalport.session.id"] = run.session_id
    if 0 < turn <= len(run.user_messages):
        attributes["gen_ai.input.messages"] = text(
            [{"role": "user", "parts": [{"type": "text", "content": run.user_messages[turn - 1]}]}]
        )
    steps = turn_steps(run, turn)
    if turn == run.turns:
        attributes["evalport.run.status"] = run.status
        if run.reply:
            attributes["gen_ai.output.messages"] = text(
                [{"role": "assistant", "parts": [{"type": "text", "content": run.reply}]}]
            )
    attributes["gen_ai.usage.input_tokens"] = sum(step.usage.input for step in steps)
    attributes["gen_ai.usage.output_tokens"] = sum(step.usage.output for step in steps)
    return attributes


def turn_records(
    run: RunView, parent: SpanRecord, agent: str | None, untimed: int
) -> list[SpanRecord]:
    """Each turn of ``run`` as an ``invoke_agent`` client span under ``parent``, with its
    steps inside, timed from the first step's start to the last one's end (the runner's
    view of the run it received); what has no time is timed at ``untimed`` (see the
    rules)."""
    now = untimed
    records = []
    for turn in range(1, run.turns + 1):
        name = f"invoke_agent {agent}" if agent else "invoke_agent"
        record = child(parent, name, CLIENT, now, now, turn_attributes(run, turn, agent))
        steps = list(step_records(run, turn, record, untimed))
        if steps:
            record.start = min(step.start for step in steps)
            record.end = max(step.end for step in steps)
        records.append(record)
        records += steps
    return records


def step_records(
    run: RunView, turn: int, parent: SpanRecord, untimed: int, drawn: int = 0
) -> Iterator[SpanRecord]:
    """The ``chat`` and ``execute_tool`` spans of ``turn``'s steps, under ``parent``,
    but for its first ``drawn`` steps (drawn already, before the turn suspended); what
    has no start starts at ``untimed`` (see the rules)."""
    model = run.llm_profile.model if run.llm_profile is not None else None
    name = f"chat {model}" if model else "chat"
    now = untimed
    for step in turn_steps(run, turn)[drawn:]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": step.usage.input,
            "gen_ai.usage.output_tokens": step.usage.output,
            "evalport.step.index": step.index,
            "evalport.step.type": step.type,
        }
        if model:
            attributes["gen_ai.request.model"] = model
        if step.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [step.finish_reason]
        calls = step.requested_tool_calls
        if calls:
            attributes["evalport.tool_calls.names"] = [call.name for call in calls]
            attributes["evalport.tool_calls.ids"] = [call.id or "" for call in calls]
        if step.errors:
            first = step.errors[0]
            attributes["error.type"] = first.type or first.error_class or "error"
        start = nanos(step.started_at) or now
        record = child(parent, name, CLIENT, start, nanos(step.completed_at) or start, attributes)
        record.error = bool(step.errors)
        yield record
        for execution in step.tool_executions:
            yield _tool_record(execution, parent, now)


def _tool_record(execution: ExecutionView, parent: SpanRecord, now: int) -> SpanRecord:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": execution.name,
        "gen_ai.tool.call.arguments": text(execution.arguments),
    }
    if execution.tool_call_id:
        attributes["gen_ai.tool.call.id"] = execution.tool_call_id
    if execution.has_error:
        attributes["error.type"] = _error_type(execution.error)
        if execution.error is not None:
            attributes["evalport.tool.error"] = text(execution.error)
    elif execution.result is not None:
        attributes["gen_ai.tool.call.result"] = text(execution.result)
    start = nanos(execution.started_at) or now
    end = nanos(execution.completed_at) or start
    record = child(parent, f"execute_tool {execution.name}", INTERNAL, start, end, attributes)
    record.error = execution.has_error
    return record


def _error_type(error: Any) -> str:
    if isinstance(error, Mapping):
        for key in ("type", "class", "errorClass"):
            if isinstance(error.get(key), str) and error[key]:
                return str(error[key])
    return "tool_error"


def draw(root: SpanRecord, material: Draw) -> list[SpanRecord]:
    """The records ``material`` names under ``root`` (see :class:`Draw`); a served turn's
    attributes go on ``root``. The one place a run becomes spans, whichever the sink:
    what the run did not time is timed at ``root``'s end (see the rules).
    ``msgspec.DecodeError`` for a run that cannot be decoded (the sink drops and counts
    what it would have drawn)."""
    untimed = root.end or time.time_ns()  # a root its caller did not end: now
    run = decode_view(material.run)
    turn = material.turn
    if material.safe:  # only the steps drawn: a served turn's run holds every earlier one
        _redact(turn_steps(run, turn)[material.drawn :] if turn else run.steps)
    if not turn:
        return turn_records(run, root, material.agent, untimed)
    root.attributes.update(turn_attributes(run, turn, material.agent))
    return list(step_records(run, turn, root, untimed, material.drawn))


class _TurnOfView(msgspec.Struct, gc=False):
    turn: int = 0


class _TurnsView(msgspec.Struct, gc=False):
    turns: int = 0
    steps: list[_TurnOfView] = msgspec.field(default_factory=list)


class _TurnsOrEnvelope(_TurnsView, gc=False):
    run: _TurnsView | None = None


_decode_turns: Final = msgspec.json.Decoder(_TurnsOrEnvelope).decode


def turn_and_steps(body: bytes) -> tuple[int, int] | None:
    """The last turn of the run a turn response carries (bare or as ``{"run": ...}``) and
    how many steps it has; ``None`` for a body that is no run. A tenth of the time of
    decoding the whole run (the service's replay bookkeeping needs no more)."""
    try:
        found = _decode_turns(body)
    except (msgspec.DecodeError, RecursionError):
        return None
    run: _TurnsView = found.run if found.run is not None else found
    turn = run.turns
    return turn, sum(1 for step in run.steps if step.turn == turn)
