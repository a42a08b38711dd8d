"""Seeded tool fault injection: which tool calls of a session fail or return a canned result.

The plan keeps no counters: each choice is recomputed from the session's run, so a
session restored elsewhere decides as the first did. Rules: see ARCHITECTURE.md,
"Tool faults".
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
    """The faults of one session, deciding per tool call (ARCHITECTURE.md, "Tool faults")."""

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
        """The fault an injected execution counts for (ARCHITECTURE.md, "Tool faults", State)."""
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
