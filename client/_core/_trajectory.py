"""The trajectory: a read-only view of a run made for asserting and judging; it never
changes the run. Rules: see ARCHITECTURE.md, "Trajectories".
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

import msgspec
from evalport.protocol import AgentRun, Event, Message, Usage

# The memo of views: 30 assertions on one 200-step run take 0.5 ms with it, 9.2 ms without
# (benchmarks/assertions.py, about 18x).
_CACHE_SIZE: Final = 8
_cache: dict[int, tuple[AgentRun, tuple[Any, ...], Trajectory]] = {}
_lock = threading.Lock()


class TrajectoryToolCall(NamedTuple):
    """One tool call with its outcome and approval state merged in (immutable)."""

    name: str
    arguments: Any
    result: Any = None
    error: Any = None
    is_error: bool = False
    call_id: str | None = None
    id: str = ""
    turn: int = 0
    executed: bool = True
    approval: str | None = None  # None (not gated), "pending", "approved", "rejected"
    approval_reason: str | None = None
    injected: bool = False

    @property
    def inputs(self) -> Any:
        """The arguments (Neuron's name for them)."""
        return self.arguments


def _fingerprint(run: AgentRun) -> tuple[Any, ...]:
    return (
        len(run.tools),
        len(run.steps),
        len(run.events),
        len(run.pending_approvals),
        len(run.user_messages),
        run.turns,
        run.status,
        run.reply,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text", "") if isinstance(part, dict) else str(part) for part in content]
        return "".join(parts)
    return "" if content is None else msgspec.json.encode(content).decode()


def _payload(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


class Trajectory:
    """What the agent did in a session, shaped for assertions and judges."""

    __slots__ = ("_by_name", "_calls", "_names", "_usage", "run")

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        failed_ids = set()
        injected_ids = set()  # (runs whose tools entries predate their injected flag)
        for step in run.steps:
            for execution in step.tool_executions:
                if execution.has_error:
                    failed_ids.add(execution.id)
                if execution.injected and execution.id:
                    injected_ids.add(execution.id)
        calls: list[TrajectoryToolCall] = []
        seen_call_ids: set[str | None] = set()
        make = TrajectoryToolCall
        for record in run.tools:
            call = record.tool_call
            approval = record.approval
            seen_call_ids.add(call.id)
            calls.append(
                make(
                    call.name,
                    call.arguments,
                    record.result,
                    record.error,
                    bool(record.error) or (record.id in failed_ids),
                    call.id,
                    record.id,
                    record.turn,
                    True,
                    approval.state if approval is not None else None,
                    approval.reason if approval is not None else None,
                    record.injected or record.id in injected_ids,
                )
            )
        for pending in run.pending_approvals:
            if pending.call_id in seen_call_ids:
                continue
            calls.append(
                TrajectoryToolCall(
                    name=pending.tool,
                    arguments=pending.arguments,
                    call_id=pending.call_id,
                    turn=pending.turn,
                    executed=False,
                    approval="pending",
                    approval_reason=pending.reason,
                )
            )
        by_name: dict[str, list[TrajectoryToolCall]] = {}
        for entry in calls:
            by_name.setdefault(entry.name, []).append(entry)
        self._calls = calls
        self._by_name = by_name
        self._names: list[str] | None = None
        if run.steps:
            usage = Usage()
            for step in run.steps:
                usage = usage + step.usage
            self._usage = usage
        else:
            self._usage = run.usage

    @classmethod
    def of(cls, run: AgentRun) -> Trajectory:
        """The view of ``run``, built once per run state."""
        key = id(run)
        cached = _cache.get(key)
        fingerprint = _fingerprint(run)
        if cached is not None and cached[0] is run and cached[1] == fingerprint:
            return cached[2]
        view = cls(run)
        with _lock:  # sync cases assert from worker threads
            if len(_cache) >= _CACHE_SIZE:
                _cache.pop(next(iter(_cache)))
            _cache[key] = (run, fingerprint, view)
        return view

    # -- tool calls ---------------------------------------------------------------------

    def tool_calls(self, name: str | None = None) -> list[TrajectoryToolCall]:
        """Every tool call in order, or only those of tool ``name``."""
        if name is None:
            return list(self._calls)
        return list(self._by_name.get(name, ()))

    def calls_of(self, name: str) -> Sequence[TrajectoryToolCall]:
        """Like :meth:`tool_calls` without copying (for assertions)."""
        return self._by_name.get(name, ())

    @property
    def all_calls(self) -> list[TrajectoryToolCall]:
        """Every tool call, not copied (read-only by convention)."""
        return self._calls

    @property
    def call_names(self) -> list[str]:
        """The names of every call in order (pending ones included); read-only."""
        if self._names is None:
            self._names = [call.name for call in self._calls]
        return self._names

    def last_tool_call(self, name: str | None = None) -> TrajectoryToolCall | None:
        calls = self._calls if name is None else self._by_name.get(name, [])
        return calls[-1] if calls else None

    def tool_names(self) -> list[str]:
        """The names of the executed tool calls, in order."""
        return [call.name for call in self._calls if call.executed]

    def __iter__(self) -> Iterator[TrajectoryToolCall]:
        return iter(self._calls)

    def __len__(self) -> int:
        return len(self._calls)

    # -- the conversation ---------------------------------------------------------------

    @property
    def final_answer(self) -> str:
        if self.run.reply:
            return self.run.reply
        for step in reversed(self.run.steps):
            for message in reversed(step.output_messages):
                if message.role == "assistant" and not message.tool_calls:
                    text = _text(message.content)
                    if text:
                        return text
        return ""

    @property
    def user_messages(self) -> list[str]:
        return list(self.run.user_messages)

    @property
    def usage(self) -> Usage:
        """Token usage summed over the steps."""
        return self._usage

    @property
    def events(self) -> list[Event]:
        return self.run.events

    @property
    def status(self) -> str:
        return self.run.status

    def messages(self) -> list[Message]:
        """The conversation as messages: each turn's user message, then the messages its
        steps produced (assistant text, tool calls, tool results), in order."""
        users = self.run.user_messages
        by_turn: dict[int, list[Message]] = {}
        for step in self.run.steps:
            by_turn.setdefault(step.turn, []).extend(step.output_messages)
        turns = max(self.run.turns, len(users), max(by_turn, default=0))
        messages: list[Message] = []
        for turn in range(1, turns + 1):
            if turn <= len(users):
                messages.append(Message(role="user", content=users[turn - 1]))
            messages.extend(by_turn.get(turn, ()))
        return messages

    def to_transcript(self) -> str:
        """Neuron's name for :meth:`transcript`."""
        return self.transcript()

    def transcript(self) -> str:
        """A readable transcript: user turns, tool calls with outcomes, assistant text."""
        lines: list[str] = []
        users = self.run.user_messages
        turns = max(self.run.turns, len(users), max((s.turn for s in self.run.steps), default=0))
        calls_by_turn: dict[int, list[TrajectoryToolCall]] = {}
        for call in self._calls:
            calls_by_turn.setdefault(call.turn, []).append(call)
        for turn in range(1, turns + 1):
            if turn <= len(users):
                lines.append(f"User: {users[turn - 1]}")
            for call in calls_by_turn.get(turn, []):
                lines.append(self._render_call(call))
            for step in self.run.steps_of_turn(turn):
                for message in step.output_messages:
                    if message.role == "assistant" and not message.tool_calls:
                        text = _text(message.content)
                        if text:
                            lines.append(f"Assistant: {text}")
        if self.run.reply and (not lines or lines[-1] != f"Assistant: {self.run.reply}"):
            lines.append(f"Assistant: {self.run.reply}")
        return "\n".join(lines)

    @staticmethod
    def _render_call(call: TrajectoryToolCall) -> str:
        head = f"Tool call: {call.name}({_payload(call.arguments)})"
        if call.approval is not None:
            reason = f": {call.approval_reason}" if call.approval_reason else ""
            head += f" [approval {call.approval}{reason}]"
        if not call.executed:
            return head
        if call.is_error:
            return f"{head} -> error: {_payload(call.error)}"
        return f"{head} -> {_payload(call.result)}"

    def __repr__(self) -> str:
        return f"<Trajectory tools={len(self._calls)} steps={len(self.run.steps)}>"
