"""Seeded tool fault injection: which tool calls of a session fail, or return a canned result.

A session's faults are the :class:`~evalport.protocol._messages.ToolFault` list it was
opened with (``CreateSessionRequest.faults``, ``SessionInfo.faults``). Rules:

- **Where.** Every call recorded through ``@tool`` or ``ctx.tool_execution()`` consults the
  session's :class:`FaultPlan` once, after its approval (a gated call is approved first;
  a rejected call never reaches the plan) and before the tool runs. Framework adapters
  (the server's adapters for agent frameworks) do not consult it.
- **Ordinal.** A call's ordinal is its 1-based position among the session's recorded
  executions of the same tool, across turns (rejected calls count too).
- **Choice.** The faults are tried in list order; the first one that applies wins: its
  ``tool`` is the call's, its ``turns`` (if given) include the turn, it was injected fewer
  than ``times`` (if given) in the session, and the call is drawn (below). No fault
  applies: the tool runs as usual. Calls that reach the plan first take a fault's
  ``times`` first (calls of one tool running side by side, one waiting for an approval,
  reach it out of their order).
- **Draw.** ``rate`` 1 (the default) draws every call, 0 none. Otherwise the call is drawn
  when ``u < rate``, where ``u`` in [0, 1) comes from SHA-256 of the ``seed``, the tool's
  name and the ordinal: the same seed fails the same calls in every repeat of a case, on
  every target. Without a ``seed`` the session id takes its place: reproducible within
  the session, different between sessions. Two faults with one seed on one tool draw the
  same ``u``.
- **Effect.** An ``error`` fault raises :class:`InjectedFault` (a ``RuntimeError``) into
  the agent, as the tool's own error would propagate; the execution records the error
  text and ``injected=True``. A ``result`` fault returns the canned result without running
  the tool (``injected=True``, the result recorded). Only ``@tool`` can skip a tool's body:
  a result fault chosen for a ``ctx.tool_execution()`` block raises
  :class:`FaultNotApplicable` instead (recorded as the execution's error, *not* injected),
  telling the author to use an error fault or ``@tool``.
- **State.** The plan keeps no counters: ordinals and ``times`` are recomputed from the
  session's accumulated run, so a session restored on another replica decides exactly as
  the first one would have. An injected execution counts for the first fault of its tool
  whose ``turns`` admit its turn and whose effect it shows (the same error text, or the
  same result); faults that share a tool and an effect share their count.
- **Values.** Faults built in Python are checked by the same rules as the wire's
  (:func:`as_faults` passes them through its decoder), and every injection returns a
  fresh copy of the canned result, so an agent that changes it changes nothing else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

import msgspec

from .._messages import ToolFault
from .._models import AgentRun, ToolExecution

_SCALE: Final = float(1 << 64)


class InjectedFault(RuntimeError):
    """The error an ``error`` fault raises into the agent in place of the tool's own."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(message)
        self.tool = tool


class FaultNotApplicable(RuntimeError):
    """A ``result`` fault was chosen for a ``ctx.tool_execution()`` block, whose body is
    the agent's own code and cannot be skipped."""

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"a result fault cannot apply to tool {tool!r}: it runs in a "
            "ctx.tool_execution() block; decorate it with @tool or inject an error fault"
        )
        self.tool = tool


class _Call(Protocol):
    """A tool call in progress (the recorder's ``ToolRun``)."""

    execution: ToolExecution
    result: Any


def draw(key: str, tool: str, ordinal: int) -> float:
    """The call's number in [0, 1): SHA-256 of key, tool and ordinal, scaled."""
    data = f"{key}\x1f{tool}\x1f{ordinal}".encode()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") / _SCALE


class FaultPlan:
    """The faults of one session, deciding per tool call (see the module rules)."""

    __slots__ = ("_effects", "_faults", "_session_key", "_tools")

    def __init__(self, faults: Iterable[ToolFault], session_id: str = "") -> None:
        self._faults = tuple(faults)
        self._tools = frozenset(fault.tool for fault in self._faults)
        self._session_key = f"session:{session_id}"
        # what each fault leaves on an execution: its error text, or its result as recorded
        self._effects = tuple(
            fault.error if isinstance(fault.error, str) else _copy(fault.result)
            for fault in self._faults
        )

    def __bool__(self) -> bool:
        return bool(self._faults)

    @property
    def faults(self) -> tuple[ToolFault, ...]:
        return self._faults

    def decide(self, run: AgentRun, execution: ToolExecution, turn: int) -> ToolFault | None:
        """The fault to inject into ``execution`` (recorded in ``run``, in turn ``turn``)."""
        tool = execution.name
        if tool not in self._tools:
            return None
        used = [0] * len(self._faults)
        ordinal = 0  # the recorded executions of the tool before this one
        seen = False
        for step in run.steps:
            for earlier in step.tool_executions:
                if earlier.name != tool:
                    continue
                if earlier is execution:
                    seen = True
                    continue
                if not seen:
                    ordinal += 1
                if earlier.injected:
                    index = self._attributed(earlier, step.turn)
                    if index is not None:
                        used[index] += 1
        return self._choose(tool, ordinal + 1, turn, used)

    def _attributed(self, execution: ToolExecution, turn: int) -> int | None:
        """The fault an injected execution counts for (the module rules say which)."""
        for index, fault in enumerate(self._faults):
            if fault.tool != execution.name:
                continue
            if fault.turns is not None and turn not in fault.turns:
                continue
            if isinstance(fault.error, str):
                if execution.error == self._effects[index]:
                    return index
            elif execution.error is None and execution.result == self._effects[index]:
                return index
        return None

    def apply(
        self, run: AgentRun, call: _Call, turn: int, *, results: bool
    ) -> BaseException | None:
        """Decide ``call`` and apply the fault, if any: the error to raise (already marked
        injected, unless not applicable), or ``None`` to go on (with ``call.result`` set and
        the execution marked injected when a result fault applied). ``results`` says
        whether the caller can skip the tool's body (``@tool`` can, a block cannot)."""
        execution = call.execution
        fault = self.decide(run, execution, turn)
        if fault is None:
            return None
        if isinstance(fault.error, str):
            execution.injected = True
            return InjectedFault(execution.name, fault.error)
        if not results:
            return FaultNotApplicable(execution.name)
        execution.injected = True
        call.result = _copy(fault.result)
        return None

    def _choose(self, tool: str, ordinal: int, turn: int, used: list[int]) -> ToolFault | None:
        index = self._index(tool, ordinal, turn, used)
        return None if index is None else self._faults[index]

    def _index(self, tool: str, ordinal: int, turn: int, used: list[int]) -> int | None:
        for index, fault in enumerate(self._faults):
            if fault.tool != tool:
                continue
            if fault.turns is not None and turn not in fault.turns:
                continue
            if fault.times is not None and used[index] >= fault.times:
                continue
            if fault.rate < 1.0:
                key = self._session_key if fault.seed is None else f"seed:{fault.seed}"
                if not draw(key, tool, ordinal) < fault.rate:
                    continue
            return index
        return None


def as_faults(faults: Iterable[ToolFault | Mapping[str, Any]] | None) -> tuple[ToolFault, ...]:
    """``faults`` as ToolFaults checked by the wire's rules: each a :class:`ToolFault`, or a
    mapping of its wire fields (``{"tool": "order_status", "error": "timed out"}``).
    Raises ``TypeError`` or ``ValueError`` naming the entry at fault."""
    if faults is None:
        return ()
    if isinstance(faults, ToolFault | Mapping | str):
        raise TypeError("faults takes a list of ToolFault, e.g. faults=[ToolFault(...)]")
    found: list[ToolFault] = []
    for index, fault in enumerate(faults):
        if isinstance(fault, ToolFault):
            fields: Any = fault
        elif isinstance(fault, Mapping):
            fields = dict(fault)
        else:
            raise TypeError(f"faults[{index}] is a {type(fault).__name__}, not a ToolFault")
        try:  # through JSON, as a server would decode it: the same checks and value types
            found.append(_decode_fault(_encode(fields)))
        except (TypeError, ValueError) as error:  # msgspec's errors are ValueErrors
            raise ValueError(f"faults[{index}]: {error}") from None
    return tuple(found)


_encode = msgspec.json.Encoder().encode
_decode_fault = msgspec.json.Decoder(ToolFault).decode
_decode_value = msgspec.json.Decoder().decode


def _copy(value: Any) -> Any:
    """A fresh copy of a JSON value."""
    return _decode_value(_encode(value))
