"""What Instructor PHP's ``HttpAgentTarget`` requires of a run, as a checker.

Encodes ``reference/instructor-wire.md``. :func:`violations` takes the JSON bytes of a turn
response (``{"run": ...}`` or a bare run) and lists every rule it breaks; an empty list
means Instructor decodes it unchanged. Besides the hard errors of their decoder (a
non-object run, a non-UUID id, an unknown stop reason), it checks what evalport promises
on top: known enumerated values, integers where integers are read, ``tools`` in sync with
the steps, argument maps (not strings) where Instructor reads ``{map}``, and no PHP
exception class names in ``errors[].class`` (Instructor instantiates those reflectively).

Test modules of this folder import it as ``instructor_rules`` (pytest puts the folder on
``sys.path``); another suite (server conformance, end-to-end) can load it by path.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Any

UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
STATUSES = {"pending", "in_progress", "completed", "stopped", "failed"}
STEP_TYPES = {"tool_execution", "final_response", "error"}
FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter", "error", "other"}
STOP_REASONS = {
    *("completed", "steps_limit", "token_limit", "time_limit", "retry_limit", "error"),
    *("stop_requested", "finish_reason", "user_requested", "unknown"),
}
USAGE_KEYS = ("input", "output", "cacheWrite", "cacheRead", "reasoning")
# PHP's built-in Throwables (global namespace). Python's ValueError, TypeError,
# ArithmeticError, AssertionError, Exception are among them.
PHP_THROWABLES = {
    *("Throwable", "Exception", "Error", "ErrorException", "TypeError", "ValueError"),
    *("ArithmeticError", "DivisionByZeroError", "AssertionError", "ArgumentCountError"),
    *("CompileError", "ParseError", "UnhandledMatchError", "JsonException", "RuntimeException"),
    *("LogicException", "InvalidArgumentException", "DomainException", "LengthException"),
    *("OutOfRangeException", "OutOfBoundsException", "OverflowException", "RangeException"),
    *("UnderflowException", "UnexpectedValueException", "BadFunctionCallException"),
    *("BadMethodCallException", "FiberError", "ClosedGeneratorException"),
}


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_digest(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"hash", "bytes", "preview"}
        and isinstance(value["hash"], str)
        and value["hash"].startswith("sha256:")
    )


def _timestamp(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, path: str, text: str) -> None:
        self.problems.append(f"{path}: {text}")

    def uuid_or_empty(self, value: Any, path: str, *, empty_ok: bool) -> None:
        if value == "" and empty_ok:
            return
        if not isinstance(value, str) or not UUID_RE.match(value):
            self.fail(path, f"{value!r} is not a UUID")
        else:
            uuid.UUID(value)

    def ints(self, node: dict[str, Any], keys: tuple[str, ...], path: str) -> None:
        for key in keys:
            if key in node and not _is_int(node[key]):
                self.fail(f"{path}.{key}", f"{node[key]!r} is not an integer")

    def text_or_null(self, value: Any, path: str) -> None:
        if value is not None and not isinstance(value, str) and not _is_digest(value):
            self.fail(path, f"{value!r} is neither text, null nor a digest")

    def arguments(self, value: Any, path: str, *, string_ok: bool) -> None:
        if isinstance(value, dict):
            return
        if string_ok and isinstance(value, str):
            try:
                parsed = json.loads(value) if value else {}
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return
        self.fail(path, f"arguments {value!r} are not a map")

    def stop_signal(self, value: Any, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            self.fail(path, "stop signal is not an object")
        elif value.get("reason") not in STOP_REASONS:
            self.fail(f"{path}.reason", f"{value.get('reason')!r} is not a stop reason")

    def errors(self, value: Any, path: str) -> None:
        if not isinstance(value, list):
            self.fail(path, "errors is not a list")
            return
        for index, error in enumerate(value):
            where = f"{path}[{index}]"
            if not isinstance(error, dict):
                self.fail(where, "error is not an object")
                continue
            name = error.get("class")
            if isinstance(name, str) and (name in PHP_THROWABLES or "\\" in name):
                self.fail(f"{where}.class", f"{name!r} is a PHP exception class name")
            self.text_or_null(error.get("message"), f"{where}.message")

    def execution(self, execution: Any, path: str) -> None:
        if not isinstance(execution, dict):
            self.fail(path, "tool execution is not an object")
            return
        self.uuid_or_empty(execution.get("id", ""), f"{path}.id", empty_ok=True)
        self.arguments(execution.get("arguments", {}), f"{path}.arguments", string_ok=False)
        if not isinstance(execution.get("hasError", False), bool):
            self.fail(f"{path}.hasError", "not a boolean")
        error = execution.get("error")
        self.text_or_null(error, f"{path}.error")
        if error not in (None, "") and execution.get("hasError") is not True:
            self.fail(f"{path}.hasError", "an execution with an error text must say so")
        for key in ("startedAt", "completedAt"):
            if not _timestamp(execution.get(key)):
                self.fail(f"{path}.{key}", "not ISO-8601")

    def step(self, step: Any, path: str) -> None:
        if not isinstance(step, dict):
            self.fail(path, "step is not an object")
            return
        self.uuid_or_empty(step.get("id", ""), f"{path}.id", empty_ok=True)
        self.ints(step, ("turn", "index"), path)
        if step.get("type", "final_response") not in STEP_TYPES:
            self.fail(f"{path}.type", f"{step.get('type')!r} is not a step type")
        if step.get("finishReason") not in FINISH_REASONS | {None}:
            self.fail(f"{path}.finishReason", f"{step.get('finishReason')!r} is unknown")
        for index, call in enumerate(step.get("requestedToolCalls", [])):
            where = f"{path}.requestedToolCalls[{index}]"
            self.arguments(call.get("arguments", {}), f"{where}.arguments", string_ok=False)
        for index, execution in enumerate(step.get("toolExecutions", [])):
            self.execution(execution, f"{path}.toolExecutions[{index}]")
        usage = step.get("usage", {})
        if not isinstance(usage, dict):
            self.fail(f"{path}.usage", "not an object")
        else:
            self.ints(usage, USAGE_KEYS, f"{path}.usage")
        if not isinstance(step.get("duration", 0.0), int | float):
            self.fail(f"{path}.duration", "not a number of seconds")
        for key in ("startedAt", "completedAt"):
            if not _timestamp(step.get(key)):
                self.fail(f"{path}.{key}", "not ISO-8601")
        self.stop_signal(step.get("stopSignal"), f"{path}.stopSignal")
        self.errors(step.get("errors", []), f"{path}.errors")
        if bool(step.get("errors")) != bool(step.get("hasErrors", False)):
            self.fail(f"{path}.hasErrors", "disagrees with errors")

    def record(self, record: Any, path: str) -> None:
        if not isinstance(record, dict):
            self.fail(path, "tools entry is not an object")
            return
        if "id" in record:  # optional, but a UUID whenever present
            self.uuid_or_empty(record["id"], f"{path}.id", empty_ok=False)
        call = record.get("tool_call")
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            self.fail(f"{path}.tool_call", "missing or without a name")
        else:
            self.arguments(call.get("arguments", {}), f"{path}.tool_call.arguments", string_ok=True)
        self.text_or_null(record.get("error"), f"{path}.error")
        for key in ("startedAt", "completedAt"):
            if not _timestamp(record.get(key)):
                self.fail(f"{path}.{key}", "not ISO-8601")

    def sync(self, run: dict[str, Any]) -> None:
        def execution(e: dict[str, Any]) -> tuple[Any, ...]:
            keys = ("name", "toolCallId", "arguments", "result", "error")
            return (e.get("id", ""), *(e.get(key) for key in keys))

        def record(r: dict[str, Any]) -> tuple[Any, ...]:
            call = r["tool_call"]
            found = (call.get("name"), call.get("id"), call.get("arguments"))
            return (r.get("id", ""), *found, r.get("result"), r.get("error"))

        expected = [
            execution(e) for step in run.get("steps", []) for e in step.get("toolExecutions", [])
        ]
        actual = [
            record(r)
            for r in run.get("tools", [])
            if isinstance(r, dict) and isinstance(r.get("tool_call"), dict)
        ]
        if expected != actual:
            self.fail("$.tools", "not in sync with the steps' tool executions")

    def run(self, run: Any, path: str) -> None:
        if not isinstance(run, dict):
            self.fail(path, "run is not an object")
            return
        if not isinstance(run.get("reply", ""), str):
            self.fail(f"{path}.reply", "not text")
        if run.get("status") not in STATUSES:
            self.fail(f"{path}.status", f"{run.get('status')!r} is not a run status")
        self.ints(run, ("turns",), path)
        if not isinstance(run.get("errors", ""), str):
            self.fail(f"{path}.errors", "run errors must be newline-joined text")
        for index, record in enumerate(run.get("tools", [])):
            self.record(record, f"{path}.tools[{index}]")
        for index, step in enumerate(run.get("steps", [])):
            self.step(step, f"{path}.steps[{index}]")
        self.stop_signal(run.get("stopSignal"), f"{path}.stopSignal")
        profile = run.get("llmProfile")
        if profile is not None:
            for key in ("maxTokens", "contextLength", "maxOutputLength"):
                if profile.get(key) is not None and not _is_int(profile[key]):
                    self.fail(f"{path}.llmProfile.{key}", "not an integer")
        self.sync(run)


def violations(body: bytes) -> list[str]:
    """Every Instructor rule that the turn response ``body`` breaks (empty: it decodes)."""
    try:
        document = json.loads(body)
    except ValueError:
        return ["$: not JSON"]
    checker = _Checker()
    if not isinstance(document, dict):
        checker.fail("$", "not an object")
    elif "run" in document:
        checker.run(document["run"], "$.run")
    else:
        checker.run(document, "$")
    return checker.problems
