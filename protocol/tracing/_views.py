"""What spans read of a run: the fields of the run model they show, decoded from its JSON."""

from __future__ import annotations

from contextlib import suppress
from typing import Any, Final

import msgspec

from .._codec import arguments_map
from .._models import RunStatus, StepType
from .._problems import ProtocolError


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
        """Read as :func:`~evalport.protocol.decode_run` reads an execution: an error text
        makes it failed, and arguments recorded as a JSON string are the map it holds (a
        string that holds none is kept as it is, digested whole under the safe policy)."""
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
    """A run as spans draw it: decoded from the run's JSON with only the fields its spans
    show (a fifth of the time of a whole :class:`~evalport.protocol.AgentRun`)."""

    reply: str = ""
    status: str = RunStatus.PENDING
    turns: int = 0
    steps: list[StepView] = msgspec.field(default_factory=list)
    llm_profile: ProfileView | None = None
    session_id: str | None = None
    user_messages: list[str] = msgspec.field(default_factory=list)
    earlier_user_messages: int = 0
    """How many user messages came before the first of ``user_messages`` (a delta's)."""


class _DeltaView(msgspec.Struct, gc=False):
    kept: dict[str, int]
    run: RunView


class _RunViewOrEnvelope(RunView):
    """A bare run, a turn response's ``{"run": run}`` or ``{"delta": ...}``: one decode
    serves the three."""

    run: RunView | None = None
    delta: _DeltaView | None = None


_decode_view: Final = msgspec.json.Decoder(_RunViewOrEnvelope).decode


def decode_view(data: bytes | msgspec.Raw) -> RunView:
    """The :class:`RunView` of a run's JSON, bare or as a turn response's ``{"run": ...}``;
    of a delta response (``?since=N``), the run's tail that it carries, with every field
    but the lists whole (``msgspec.DecodeError`` for what is no run)."""
    found = _decode_view(data)
    if found.delta is not None:
        view = found.delta.run
        view.earlier_user_messages = found.delta.kept.get("userMessages", 0)
        return view
    return found.run if found.run is not None else found
