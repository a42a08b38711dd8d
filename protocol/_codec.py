"""Encoding and decoding of protocol bodies: requests strictly, responses leniently.

Rules: see ARCHITECTURE.md, "The wire: run model, messages, codec".
"""

from __future__ import annotations

import json
from typing import Any, Final, TypeVar

import msgspec

from ._models import AgentRun, Step
from ._paths import error_path
from ._problems import ProblemType, ProtocolError, RequestError

T = TypeVar("T")

EXCERPT_BYTES: Final = 512

_encoder = msgspec.json.Encoder()
_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def encode(value: Any) -> bytes:
    """Compact JSON bytes of a Struct or a plain value."""
    return _encoder.encode(value)


def _decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    return decoder


def decode_request(data: bytes, kind: type[T]) -> T:
    """Decode a request body strictly; raises :class:`RequestError` (400 or 422)."""
    try:
        return _decoder(kind).decode(data)
    except msgspec.ValidationError as error:
        text, path = error_path(error, data, kind)
        raise RequestError(ProblemType.INVALID_BODY, f"{text} at {path}", path) from None
    except msgspec.DecodeError as error:
        raise RequestError(ProblemType.MALFORMED_JSON, f"Malformed JSON: {error}") from None
    except RecursionError:
        raise RequestError(
            ProblemType.INVALID_BODY, "The body nests arrays or objects too deeply."
        ) from None


def excerpt(data: bytes, limit: int = EXCERPT_BYTES) -> str:
    """The first ``limit`` bytes of a body as text, for error messages."""
    return data[:limit].decode(errors="replace")


def decode_response(data: bytes, kind: type[T], *, what: str | None = None) -> T:
    """Decode a response body leniently into ``kind``; raises :class:`ProtocolError`.

    ``what`` names the body in error messages (default: the name of ``kind``).
    """
    try:
        return _decoder(kind).decode(data)
    except msgspec.ValidationError as error:
        text, path = error_path(error, data, kind)
        raise ProtocolError(
            f"unusable {what or kind.__name__} response at {path}: {text}",
            path=path,
            excerpt=excerpt(data),
        ) from None
    except msgspec.DecodeError as error:
        raise ProtocolError(f"response is not JSON: {error}", excerpt=excerpt(data)) from None


class _RunOrEnvelope(AgentRun, kw_only=True, rename="camel", gc=False):
    """A bare run, or ``{"run": run}``: one decode pass serves both shapes."""

    run: AgentRun | msgspec.UnsetType = msgspec.UNSET


def whole_run(decoded: _RunOrEnvelope) -> tuple[AgentRun, str]:
    """The run a decoded body holds, bare or wrapped, and its JSON path."""
    if isinstance(decoded.run, msgspec.UnsetType):
        return AgentRun(
            **{name: getattr(decoded, name) for name in AgentRun.__struct_fields__}
        ), "$"
    return decoded.run, "$.run"


def normalized(run: AgentRun, at: str, data: bytes) -> AgentRun:
    """:func:`normalize_run`, its error quoting the start of ``data``, the body."""
    try:
        return normalize_run(run, at)
    except ProtocolError as error:
        raise ProtocolError(str(error), path=error.path, excerpt=excerpt(data)) from None


def decode_run(data: bytes) -> AgentRun:
    """Decode a turn, attach or approvals response into its accumulated run."""
    run, at = whole_run(decode_response(data, _RunOrEnvelope, what="run"))
    return normalized(run, at, data)


def arguments_map(value: dict[str, Any] | str, path: str) -> dict[str, Any]:
    """Tool arguments as a map: a JSON string holding an object is read (``ProtocolError``
    naming ``path`` for one that does not); an empty string is an empty map."""
    if isinstance(value, dict):
        return value
    if not value:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        raise ProtocolError(
            f"tool arguments at {path} are a string that is not JSON", path=path
        ) from None
    if not isinstance(parsed, dict):
        raise ProtocolError(f"tool arguments at {path} are not a JSON object", path=path)
    return parsed


def _normalize_step(step: Step, base: str) -> None:
    for index, call in enumerate(step.requested_tool_calls):
        path = f"{base}.requestedToolCalls[{index}].arguments"
        call.arguments = arguments_map(call.arguments, path)
    for index, execution in enumerate(step.tool_executions):
        path = f"{base}.toolExecutions[{index}].arguments"
        execution.arguments = arguments_map(execution.arguments, path)
        if execution.error is not None and execution.error != "":
            execution.has_error = True
    for number, message in enumerate(step.output_messages):
        for index, call in enumerate(message.tool_calls or ()):
            path = f"{base}.outputMessages[{number}].toolCalls[{index}].arguments"
            call.arguments = arguments_map(call.arguments, path)
    if step.errors:
        step.has_errors = True


def normalize_run(run: AgentRun, at: str = "$") -> AgentRun:
    """Make a leniently decoded run uniform (maps for arguments, ``tools`` present).

    ``at`` is the JSON path of the run in its body, for error messages.
    """
    for position, step in enumerate(run.steps):
        _normalize_step(step, f"{at}.steps[{position}]")
    if not run.tools and any(step.tool_executions for step in run.steps):
        run.sync_tools()
    for index, record in enumerate(run.tools):
        call = record.tool_call
        if not isinstance(call.arguments, dict):
            path = f"{at}.tools[{index}].tool_call.arguments"
            call.arguments = arguments_map(call.arguments, path)
    for position, pending in enumerate(run.pending_approvals):
        if not isinstance(pending.arguments, dict):
            path = f"{at}.pendingApprovals[{position}].arguments"
            pending.arguments = arguments_map(pending.arguments, path)
    if run.steps and run.usage.total == 0:
        run.sync_usage()
    return run
