"""Runs from chat history (:func:`run_from_chat`): a logged conversation (OpenAI Chat,
Responses, Anthropic) built into an ``AgentRun`` that every assertion and judge reads as
a live run. Rules: see ARCHITECTURE.md, "Logged conversations".
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from evalport.protocol import (
    AgentRun,
    ContentPart,
    ErrorInfo,
    Message,
    RunStatus,
    Step,
    StepType,
    TextPart,
    ToolCall,
    ToolExecution,
    TracePolicy,
    Usage,
)
from evalport.protocol._reported import arguments_of, step_usage
from evalport.protocol.runtime._content import user_parts

from ._chat_parts import FORMAT_OF_PART, part_of

FORMATS: Final = ("openai-chat", "openai-responses", "anthropic")
_NAMESPACE: Final = uuid.UUID("6f1c3f9e-5d0a-4b8e-9a51-2a7c64b0d1e3")
_RESPONSES_TYPES: Final = frozenset(
    ("function_call", "function_call_output", "reasoning", "message", "input_text", "output_text")
)
_ASSISTANT_ITEMS: Final = frozenset(("function_call", "reasoning"))


class ChatHistoryError(ValueError):
    """A logged conversation that cannot be read; ``index`` is the faulty message's."""

    def __init__(self, index: int | None, problem: str, fmt: str | None = None) -> None:
        where = f"message {index}: " if index is not None else ""
        how = f" (format {fmt})" if fmt else ""
        super().__init__(f"{where}{problem}{how}")
        self.index = index
        self.problem = problem


def run_from_chat(
    messages: Sequence[Mapping[str, Any]],
    *,
    format: str = "auto",
    policy: TracePolicy | None = None,
) -> AgentRun:
    """The run a logged conversation records, redacted by ``policy`` (safe by default)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatHistoryError(None, f"expected a list of messages, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatHistoryError(index, f"expected a JSON object, got {type(message).__name__}")
    if format == "auto":
        format = _detect(messages)
    elif format not in FORMATS:
        raise ChatHistoryError(
            None, f"unknown format {format!r}; use one of {', '.join(FORMATS)} or 'auto'"
        )
    builder = _Builder(format)
    if format == "openai-chat":
        builder.read_chat(messages)
    elif format == "anthropic":
        builder.read_anthropic(messages)
    else:
        builder.read_responses(messages)
    run = builder.finish()
    return (policy or TracePolicy.safe()).apply(run, in_place=True)


def _detect(messages: Sequence[Mapping[str, Any]]) -> str:
    found: set[str] = set()
    for message in messages:
        if message.get("role") == "tool" or message.get("tool_calls"):
            found.add("openai-chat")
        if "role" not in message and "type" in message:
            found.add("openai-responses")
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind in FORMAT_OF_PART:
                    found.add(FORMAT_OF_PART[kind])
    if len(found) > 1:
        raise ChatHistoryError(
            None, f"the messages mix formats ({', '.join(sorted(found))}); pass format="
        )
    return found.pop() if found else "openai-chat"


def _text(content: Any, index: int, fmt: str) -> str:
    """The text of a message's content (a string or a list of parts); other parts skipped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ChatHistoryError(
            index, f"content must be a string or a list, got {type(content).__name__}", fmt
        )
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif (
            isinstance(part, Mapping)
            and isinstance(part.get("text"), str)
            and part.get("type") in (None, "text", "input_text", "output_text")
        ):
            texts.append(part["text"])
    return "\n".join(texts)


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _inclusive(raw: Mapping[str, Any], into: str, out: str) -> Usage:
    """OpenAI usage, whose input and output totals include cached and reasoning tokens:
    ``into`` and ``out`` name the two totals (``prompt``/``completion`` or ``input``/``output``)."""
    return step_usage(
        _count(raw, f"{into}_tokens"),
        _count(raw, f"{out}_tokens"),
        cache_read=_count(raw.get(f"{into}_tokens_details") or {}, "cached_tokens"),
        reasoning=_count(raw.get(f"{out}_tokens_details") or {}, "reasoning_tokens"),
    )


def _usage(raw: Any) -> Usage:
    """Usage in any of the three APIs' shapes; prompt/input totals exclude cached tokens."""
    if not isinstance(raw, Mapping):
        return Usage()
    if "prompt_tokens" in raw or "completion_tokens" in raw:
        return _inclusive(raw, "prompt", "completion")
    if "input_tokens_details" in raw or "output_tokens_details" in raw:
        return _inclusive(raw, "input", "output")
    return Usage(
        input=_count(raw, "input_tokens"),
        output=_count(raw, "output_tokens"),
        cache_write=_count(raw, "cache_creation_input_tokens"),
        cache_read=_count(raw, "cache_read_input_tokens"),
    )


class _Builder:
    """Accumulates steps, turns and tool results while one conversation is read."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.run = AgentRun()
        self.calls: dict[str, tuple[Step, ToolCall]] = {}
        self.answered: set[str] = set()
        self.step: Step | None = None  # the Responses step still taking output items
        self.last_text = ""
        self.ended_with_answer = False

    def _id(self, *parts: object) -> str:
        return str(uuid.uuid5(_NAMESPACE, "/".join(str(part) for part in parts)))

    def fail(self, index: int, problem: str) -> ChatHistoryError:
        return ChatHistoryError(index, problem, self.fmt)

    # -- shared -------------------------------------------------------------------------

    def user(self, index: int, content: Any) -> None:
        """A user message (its content a string or a list of parts) starts a turn."""
        parts: list[ContentPart] = []
        if isinstance(content, list):
            for part in content:
                try:
                    read = part_of(self.fmt, part)
                except ValueError as error:
                    raise self.fail(index, str(error)) from None
                if read is not None:
                    parts.append(read)
            text = "\n".join(part.text for part in parts if isinstance(part, TextPart))
        elif content is None or isinstance(content, str):
            text = content or ""
        else:
            raise self.fail(
                index, f"content must be a string or a list, got {type(content).__name__}"
            )
        self.step = None
        run = self.run
        run.turns += 1
        run.user_messages.append(text)
        if any(not isinstance(part, TextPart) for part in parts):
            run.user_parts = [*(run.user_parts or ()), *user_parts(run.turns, parts)]
        self.ended_with_answer = False

    def new_step(self, index: int, usage: Any = None) -> Step:
        run = self.run
        step = Step(
            id=self._id("step", len(run.steps), index),
            turn=max(run.turns, 1),
            index=len(run.steps),
            usage=_usage(usage),
        )
        run.steps.append(step)
        return step

    def call(self, index: int, call_id: Any, name: Any, arguments: Any) -> ToolCall:
        """A requested tool call, its arguments read as ARCHITECTURE.md says ("Logged
        conversations")."""
        if arguments is not None and not isinstance(arguments, str | Mapping):
            raise self.fail(
                index,
                "tool call arguments must be a JSON string or object, "
                f"got {type(arguments).__name__}",
            )
        return ToolCall(
            id=call_id, name=name or "", arguments=arguments_of(arguments, keep_text=True)
        )

    def assistant(self, step: Step, index: int, text: str, calls: list[ToolCall]) -> None:
        for call in calls:
            if not call.name:
                raise self.fail(index, "a tool call has no name")
            if not call.id:
                raise self.fail(index, f"tool call {call.name!r} has no id")
            if call.id in self.calls:
                raise self.fail(index, f"tool call id {call.id!r} is used twice")
            self.calls[call.id] = (step, call)
        step.requested_tool_calls.extend(calls)
        if not step.output_messages:
            step.output_messages.append(Message(role="assistant"))
        message = step.output_messages[-1]
        if text:
            message.content = f"{message.content}\n{text}" if message.content else text
        if calls:
            message.tool_calls = (message.tool_calls or []) + calls
            message.sync_instructor()
        if step.requested_tool_calls:
            step.type = StepType.TOOL_EXECUTION
            step.finish_reason = "tool_calls"
            self.ended_with_answer = False
        else:
            step.finish_reason = "stop"
            self.ended_with_answer = bool(text)
        if text:
            self.last_text = text

    def tool_result(self, index: int, call_id: Any, content: Any, is_error: bool) -> None:
        if not isinstance(call_id, str) or not call_id:
            raise self.fail(index, "a tool result has no call id")
        found = self.calls.get(call_id)
        if found is None:
            raise self.fail(index, f"tool result for call id {call_id!r} matches no earlier call")
        if call_id in self.answered:
            raise self.fail(index, f"call id {call_id!r} is answered twice")
        self.answered.add(call_id)
        step, call = found
        output = _text(content, index, self.fmt)
        execution = ToolExecution(
            id=self._id("execution", call_id),
            name=call.name,
            tool_call_id=call_id,
            arguments=call.arguments,
            has_error=is_error,
            error=output if is_error else None,
            result=None if is_error else output,
        )
        step.tool_executions.append(execution)
        if is_error:
            step.errors.append(ErrorInfo(message=output, error_class="ToolError"))
            step.has_errors = True
        self.ended_with_answer = False

    def finish(self) -> AgentRun:
        run = self.run
        run.reply = self.last_text
        run.status = RunStatus.COMPLETED if self.ended_with_answer else RunStatus.IN_PROGRESS
        if run.steps and not run.turns:
            run.turns = 1
        run.sync_tools()
        run.sync_usage()
        return run

    # -- the formats ----------------------------------------------------------------------

    def read_chat(self, messages: Sequence[Mapping[str, Any]]) -> None:
        for index, message in enumerate(messages):
            role = message.get("role")
            if role in ("system", "developer"):
                continue
            if role == "user":
                self.user(index, message.get("content"))
            elif role == "assistant":
                calls = []
                raw_calls = message.get("tool_calls") or []
                if not isinstance(raw_calls, list):
                    raise self.fail(index, "tool_calls must be a list")
                for raw in raw_calls:
                    function = raw.get("function") if isinstance(raw, Mapping) else None
                    if not isinstance(function, Mapping):
                        raise self.fail(index, "a tool call has no 'function' object")
                    name, arguments = function.get("name"), function.get("arguments")
                    calls.append(self.call(index, raw.get("id"), name, arguments))
                step = self.new_step(index, message.get("usage"))
                self.assistant(step, index, _text(message.get("content"), index, self.fmt), calls)
            elif role == "tool":
                self.tool_result(
                    index,
                    message.get("tool_call_id"),
                    message.get("content"),
                    message.get("is_error") is True,
                )
            else:
                raise self.fail(index, f"unknown role {role!r}")

    def read_anthropic(self, messages: Sequence[Mapping[str, Any]]) -> None:
        for index, message in enumerate(messages):
            role = message.get("role")
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list):
                raise self.fail(index, "content must be a string or a list of blocks")
            if role == "system":
                continue
            if role not in ("user", "assistant"):
                raise self.fail(index, f"unknown role {role!r}")
            if not all(isinstance(block, Mapping) for block in blocks):
                raise self.fail(index, "a content block is not an object")
            if role == "user":
                said = []
                for block in blocks:
                    if block.get("type") == "tool_result":
                        self.tool_result(
                            index,
                            block.get("tool_use_id"),
                            block.get("content", ""),
                            block.get("is_error") is True,
                        )
                    else:
                        said.append(block)
                if said:
                    self.user(index, said)
            else:
                calls = [
                    self.call(index, block.get("id"), block.get("name"), block.get("input"))
                    for block in blocks
                    if block.get("type") == "tool_use"
                ]
                texts = [block.get("text") or "" for block in blocks if block.get("type") == "text"]
                step = self.new_step(index, message.get("usage"))
                self.assistant(step, index, "\n".join(texts), calls)
                if message.get("stop_reason") == "max_tokens":
                    step.finish_reason = "length"

    def read_responses(self, items: Sequence[Mapping[str, Any]]) -> None:
        for index, item in enumerate(items):
            kind = item.get("type", "message" if "role" in item else None)
            role = item.get("role")
            if kind == "message" and role in ("system", "developer"):
                self.step = None
            elif kind == "message" and role == "user":
                self.user(index, item.get("content"))
            elif kind == "function_call_output":
                self.step = None
                self.tool_result(
                    index, item.get("call_id"), item.get("output"), item.get("is_error") is True
                )
            elif (kind == "message" and role == "assistant") or kind in _ASSISTANT_ITEMS:
                if self.step is None:
                    self.step = self.new_step(index)
                step = self.step
                step.usage = step.usage + _usage(item.get("usage"))
                if kind == "function_call":
                    name, arguments = item.get("name"), item.get("arguments")
                    call = self.call(index, item.get("call_id"), name, arguments)
                    self.assistant(step, index, "", [call])
                elif kind == "message":
                    self.assistant(step, index, _text(item.get("content"), index, self.fmt), [])
            elif kind in _RESPONSES_TYPES or kind is None:
                raise self.fail(
                    index, f"item of type {kind!r} with role {role!r} is not understood"
                )
            # Built-in tool items (web_search_call, file_search_call, ...) are skipped.
